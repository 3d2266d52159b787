"""Long flat operator chains are not nesting; real nesting is still capped (issue 17, item 8).

``a + a + ... + a`` is left-associated: the AST is as deep as the chain is long,
but every consumer folds such a chain in a loop, so the parser must not refuse it
as "nesting too deep", and no later stage may recurse once per operand.
"""

from __future__ import annotations

import pytest

from wiadsl.diagnostics import WiaShapeError, WiaSyntaxError
from wiadsl.frontend import ast
from wiadsl.frontend.astdump import dump_program
from wiadsl.frontend.compile import compile_source, compile_to_ir
from wiadsl.frontend.exprtext import TEXT_LIMIT, expr_text
from wiadsl.frontend.parser import parse_source
from wiadsl.frontend.tokens import MAX_DEPTH
from wiadsl.frontend.unparse import unparse


def kernel(expr: str) -> str:
    return f"kernel k(input a: f32[4], input b: f32[3], output y: f32[4]) {{\n    y = {expr};\n}}\n"


def chain(terms: int, op: str = "+") -> str:
    return f" {op} ".join(["a"] * terms)


def value_of(program: ast.Program) -> ast.Expr:
    (decl,) = program.decls
    assert isinstance(decl, ast.Kernel)
    (stmt,) = decl.body.stmts
    assert isinstance(stmt, ast.Assign)
    return stmt.value


def test_a_199_term_sum_is_not_too_deep():
    compile_source(kernel(chain(199)), "c199.wia")  # no "nesting too deep"


def test_a_5000_term_sum_parses_checks_and_lowers():
    src = kernel(chain(5000))
    e = value_of(parse_source(src))
    n = 0
    while isinstance(e, ast.BinOp):
        n, e = n + 1, e.lhs
    assert n == 4999
    checked = compile_source(src, "c5000.wia")
    assert "Assign target='y'" in dump_program(checked.checked.loaded.main)
    ops = [op.name for op in next(iter(compile_to_ir(src))).walk()]
    assert ops.count("tensor.add") == 4999


def test_a_long_mixed_chain_unparses_to_itself():
    terms = [f"a {op} 2.0" for op in "*/%"] * 1000
    text = " + ".join(terms) + " - a @ a"
    program = parse_source(kernel(text))
    assert unparse(program) == kernel(text)
    assert unparse(parse_source(unparse(program))) == kernel(text)


def test_labels_of_long_chains_stay_short():
    e = value_of(parse_source(kernel(chain(5000))))
    assert len(expr_text(e)) == TEXT_LIMIT
    assert expr_text(e).endswith("...")
    assert expr_text(value_of(parse_source(kernel("a + b * (a - b)")))) == "a + b * (a - b)"


def test_an_error_at_the_end_of_a_long_chain_points_at_its_operator():
    with pytest.raises(WiaShapeError) as info:
        compile_source(kernel(chain(3000) + " + b"), "end.wia")
    lines = str(info.value).splitlines()
    column = 9 + len(chain(3000)) + 1
    assert lines[0].startswith(f"end.wia:2:{column}: error: ")
    assert "a + a + a" in lines[0] and "..." in lines[0]
    # The 12,000-character line is shown as a window around the caret (issue 20): the
    # caret stands under the last '+' of that window.
    caret = lines[2].index("^")
    assert lines[2] == " " * caret + "^"
    assert lines[1][caret] == "+" and lines[1][caret + 1:].strip() == "b;"


@pytest.mark.parametrize("expr, at", [
    # The kernel's '{' is level 1: the caret is at the '(' of level MAX_DEPTH + 1.
    ("(" * 300 + "a" + ")" * 300, 8 + MAX_DEPTH),
    ("-" * 300 + "a", None),
    (" ** ".join(["a"] * 300), None),
    ("a" + "[0]" * 300, None),
], ids=["parens", "unary", "power", "index"])
def test_real_nesting_is_still_refused_with_a_caret(expr, at):
    with pytest.raises(WiaSyntaxError) as info:
        parse_source(kernel(expr), "deep.wia")
    head, line, caret = str(info.value).splitlines()[:3]
    assert head.startswith("deep.wia:2:")
    assert head.endswith(f"error: nesting too deep (more than {MAX_DEPTH} levels)")
    column = int(head.split(":")[2])
    if at is not None:
        assert column == at
    # The long line is shown as a window around the caret (issue 20): the caret stands
    # under the source character at the reported column.
    source_line = kernel(expr).splitlines()[1]
    assert line.strip(" .") in source_line
    assert line[caret.index("^")] == source_line[column - 1]
    assert set(caret.strip()) == {"^"}
