"""The parser builds the right AST for every construct of LANGUAGE.md, with spans."""

from __future__ import annotations

import pytest

from wiadsl.diagnostics import WiaSyntaxError
from wiadsl.frontend import ast
from wiadsl.frontend.parser import parse_bytes, parse_source, tokenize

MATMUL = """\
// matmul.wia
kernel matmul(input A: f32[M, K], input B: f32[K, N], output C: f32[M, N]) {
    C = A @ B;  // matrix product
}
"""

BLOCK = """\
import nn;                       // stdlib/nn.wia

const EPS = 1e-5;                // compile-time constant

func scale_shift(x, s, b) {      // generic helper, inlined at each call
    return x * s + b;
}

kernel block(input X: f32[T, D], input W: f32[D, D], input g: f32[D],
             input b: f32[D], output Y: f32[T, D]) {
    h = X @ W;
    h = scale_shift(h, g, b);    /* rebinding a name makes a new SSA value */
    if reduce_max(abs(h)) > 100.0 {
        h = h / reduce_max(abs(h));
    }
    Y = nn.gelu(h);
}
"""


def sexp(e: object) -> str:
    """A compact prefix form of an expression, for precedence checks."""
    if isinstance(e, ast.BinOp):
        return f"({e.op} {sexp(e.lhs)} {sexp(e.rhs)})"
    if isinstance(e, ast.UnaryOp):
        return f"({e.op} {sexp(e.operand)})"
    if isinstance(e, ast.Name):
        return e.id
    if isinstance(e, ast.IntLit | ast.FloatLit):
        return repr(e.value)
    if isinstance(e, ast.Call):
        return f"{e.name}(" + " ".join(sexp(a) for a in e.args) + ")"
    if isinstance(e, ast.Index):
        return f"{sexp(e.base)}[" + " ".join(sexp(i) for i in e.items) + "]"
    return type(e).__name__


def expr(src: str) -> ast.Expr:
    """The AST of one expression, parsed as the value of a const."""
    (const,) = parse_source(f"const X = {src};").decls
    return const.value


def body(src: str) -> tuple[ast.Stmt, ...]:
    """The statements of a kernel body."""
    (kernel,) = parse_source(f"kernel k() {{ {src} }}").decls
    return kernel.body.stmts


def test_language_reference_examples():
    program = parse_source(MATMUL, "matmul.wia")
    assert program.filename == "matmul.wia"
    (k,) = program.kernels
    assert k.name == "matmul"
    assert [(p.direction, p.name) for p in k.params] == [("input", "A"), ("input", "B"),
                                                         ("output", "C")]
    assert k.params[0].type == ast.TensorType("f32", (ast.Dim("M", span=None),
                                                      ast.Dim("K", span=None)), span=None)
    assert k.body.stmts == (ast.Assign("C", ast.BinOp("@", ast.Name("A", span=None),
                                                      ast.Name("B", span=None), span=None),
                                       span=None),)
    program = parse_source(BLOCK)
    kinds = [type(d).__name__ for d in program.decls]
    assert kinds == ["Import", "Const", "Func", "Kernel"]
    assert program.funcs[0].params[2].name == "b"
    assert isinstance(program.kernels[0].body.stmts[2], ast.If)


def test_types():
    (k,) = parse_source(
        "kernel k(input A: f32[M, 4], output C: tensor, input alpha: bf16, input q: i8[2],) {}"
    ).decls
    types = [p.type for p in k.params]
    assert isinstance(types[0], ast.TensorType) and [d.value for d in types[0].dims] == ["M", 4]
    assert isinstance(types[1], ast.AnyTensorType)
    assert types[2] == ast.ScalarType("bf16", span=None)
    assert types[3].dtype == "i8"


def test_statements():
    s = body("""
        x = 1; x += 2; x -= 3; x *= 4; x /= 5;
        C[i, :] = e; C[0:2, j] = e;
        if (c) { a = 1; } else if c2 { a = 2; } else { a = 3; }
        for i in range(n) {} for i in range(a, b) {} for i in range(a, b, 2) {}
        while i < n { i += 1; }
        return x;
    """)
    assert [type(x).__name__ for x in s] == (
        ["Assign"] + ["AugAssign"] * 4 + ["SliceAssign"] * 2 + ["If"] + ["For"] * 3
        + ["While", "Return"])
    assert [a.op for a in s[1:5]] == ["+", "-", "*", "/"]
    assert isinstance(s[5].items[1], ast.Slice) and s[5].items[1] == ast.Slice(None, None,
                                                                             None, span=None)
    chain = s[7]
    assert sexp(chain.cond) == "c"
    (inner,) = chain.else_body.stmts
    assert isinstance(inner, ast.If) and inner.else_body.stmts[0].value == ast.IntLit(3,
                                                                                      span=None)
    loops = s[8:11]
    assert [(sexp(f.start) if f.start else None, sexp(f.stop), sexp(f.step) if f.step else None)
            for f in loops] == [(None, "n", None), ("a", "b", None), ("a", "b", "2")]


@pytest.mark.parametrize("src, tree", [
    ("a + b * c", "(+ a (* b c))"),
    ("a * b + c", "(+ (* a b) c)"),
    ("a - b - c", "(- (- a b) c)"),
    ("-x ** 2", "(- (** x 2))"),
    ("2 ** -1", "(** 2 (- 1))"),
    ("a ** b ** c", "(** a (** b c))"),
    ("a < b && c || d", "(|| (&& (< a b) c) d)"),
    ("a || b && c", "(|| a (&& b c))"),
    ("A @ B + c", "(+ (@ A B) c)"),
    ("a % b / c", "(/ (% a b) c)"),
    ("!a == b", "(== (! a) b)"),
    ("a + b == c * d", "(== (+ a b) (* c d))"),
    ("(a + b) * c", "(* (+ a b) c)"),
    ("-a[0] ** 2", "(- (** a[0] 2))"),
    ("f(x)[1] + 1", "(+ f(x)[1] 1)"),
    ("a >= b != c", None),  # comparisons do not chain: a syntax error
])
def test_precedence(src, tree):
    if tree is None:
        with pytest.raises(WiaSyntaxError):
            expr(src)
    else:
        assert sexp(expr(src)) == tree


def test_calls_index_and_literals():
    call = expr("reduce_sum(x, axis=1, keepdims=false)")
    assert call.name == "reduce_sum" and call.module is None
    assert [k.name for k in call.keywords] == ["axis", "keepdims"]
    qual = expr("nn.softmax(x, axis=-1)")
    assert (qual.module, qual.name) == ("nn", "softmax")
    assert expr("nn.EPS") == ast.QualifiedName("nn", "EPS", span=None)
    items = expr("A[1:3, ::2, :, 1:, -1]").items
    assert items[0] == ast.Slice(ast.IntLit(1, span=None), ast.IntLit(3, span=None), None,
                                 span=None)
    assert items[1].step == ast.IntLit(2, span=None) and items[1].start is None
    assert items[3].stop is None and isinstance(items[4], ast.UnaryOp)
    arr = expr("[[1.0, 2.0], [3.0, 4.0]]")
    assert [[x.value for x in row.elements] for row in arr.elements] == [[1.0, 2.0], [3.0, 4.0]]
    assert expr("[]") == ast.ArrayLit((), span=None)


@pytest.mark.parametrize("src, value", [
    ("42", 42), ("0", 0), ("9223372036854775807", 2**63 - 1), ("3.0", 3.0), ("1e-5", 1e-5),
    (".5", 0.5), ("3.", 3.0), ("2E+3", 2000.0), ("true", True), ("false", False),
])
def test_literal_values(src, value):
    node = expr(src)
    assert node.value == value and type(node.value) is type(value)


def test_spans():
    src = "kernel k(input A: f32[M]) {\n    y = A + 10;\n}\n"
    (k,) = parse_source(src, "s.wia").decls
    assert (k.span.line, k.span.column, k.span.end_line, k.span.end_column) == (1, 1, 3, 2)
    param = k.params[0]
    assert (param.span.column, param.span.end_column) == (10, 25)
    assert (param.type.span.column, param.type.span.end_column) == (19, 25)
    (assign,) = k.body.stmts
    assert (assign.span.line, assign.span.column, assign.span.end_column) == (2, 5, 16)
    add = assign.value
    assert (add.span.column, add.span.end_column) == (9, 15)
    assert (add.rhs.span.column, add.rhs.span.end_column) == (13, 15)
    assert add.span.filename == "s.wia"
    assert expr("(a)").span.column == 12  # parentheses leave no node


def test_range_is_a_plain_name_elsewhere():
    (s,) = body("range = tensor + f32;")
    assert s.target == "range"


def test_tokenize():
    toks = tokenize("kernel k() { x = a**2; } // done", "t.wia")
    assert toks[:3] == [("KERNEL", "kernel", 1, 1), ("NAME", "k", 1, 8), ("LPAR", "(", 1, 9)]
    assert ("POW", "**", 1, 19) in toks
    assert toks[-1] == ("RBRACE", "}", 1, 24)
    with pytest.raises(WiaSyntaxError, match="invalid character '#'"):
        tokenize("x # y")


@pytest.mark.parametrize("src", [
    "const X = " + "(" * 5000 + "1" + ")" * 5000 + ";",
    "const X = " + "[" * 5000 + "]" * 5000 + ";",
    "kernel k() " + "{" * 5000,
    "const X = " + "-" * 5000 + "1;",
    "const X = " + "**".join(["2"] * 3000) + ";",
    "kernel k() { " + " else ".join(["if a {}"] * 1000) + " }",
], ids=["parens", "brackets", "braces", "minus", "power", "else-if"])
def test_deep_nesting_is_a_clean_error(src):
    # A flat `1 + 1 + ... + 1` is no nesting: see tests/frontend/test_parse_chains.py.
    with pytest.raises(WiaSyntaxError, match="nesting too deep"):
        parse_source(src)


def test_moderate_nesting_is_accepted():
    assert expr("(" * 150 + "1" + ")" * 150) == ast.IntLit(1, span=None)
    assert sexp(expr("+".join(["1"] * 150))).count("+") == 149


def test_parse_bytes():
    assert parse_bytes("const PI = 3.14; // π\n".encode(), "u.wia").decls[0].name == "PI"
    assert parse_bytes(b"\xef\xbb\xbfimport nn;").decls[0].module == "nn"
    with pytest.raises(WiaSyntaxError) as info:
        parse_bytes(b"import nn;\nconst X = 1; \xff\n", "b.wia")
    assert str(info.value).splitlines()[0] == "b.wia:2:14: error: invalid UTF-8 byte 0xff"


def test_empty_program():
    assert parse_source("").decls == ()
    assert parse_source("// nothing\n/* at all */\n").decls == ()
