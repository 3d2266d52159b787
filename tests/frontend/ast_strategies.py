"""Hypothesis strategies for random well-formed WIA ASTs (reusable by fuzzers).

Invariant: every AST drawn here is one the parser can produce: names are never
keywords, literals are non-negative (a minus is a ``UnaryOp``), ``else if`` is an
``If`` alone in the else block, ``for`` has ``start`` whenever it has ``step``,
keyword arguments are unique and follow the positional ones. So
``parse_source(unparse(p)) == p`` must hold for all of them. Nesting is bounded
(``depth``), far below the parser's nesting limit.
"""

from __future__ import annotations

import functools

from hypothesis import strategies as st

from wiadsl.diagnostics import SourceFile, Span
from wiadsl.dtypes import DTYPE_NAMES
from wiadsl.frontend import ast

#: The span given to generated nodes (spans take no part in equality).
SPAN = Span(SourceFile("<generated>", ""), 1, 1, 1, 1)

KEYWORDS = frozenset(
    "kernel func const import input output if else for in while return true false".split()
)
BINARY_OPS = ("||", "&&", "==", "!=", "<", "<=", ">", ">=", "+", "-", "*", "/", "%", "@", "**")
UNARY_OPS = ("-", "!")
AUG_OPS = ("+", "-", "*", "/")
I64_MAX = 2**63 - 1


def names() -> st.SearchStrategy[str]:
    """Identifiers that are not keywords (``range``, ``tensor``, ``f32`` are allowed)."""
    common = st.sampled_from(["x", "y", "A", "B", "i", "n", "range", "tensor", "f32", "_t0"])
    first = st.sampled_from("abcxyzABCXYZ_")
    rest = st.text("abcfinorstuwxyz_019", max_size=5)
    generated = st.builds(lambda a, b: a + b, first, rest).filter(lambda s: s not in KEYWORDS)
    return st.one_of(common, generated)


def _leaf_exprs() -> st.SearchStrategy[ast.Expr]:
    floats = st.floats(min_value=0.0, allow_nan=False, allow_infinity=False).map(abs)
    return st.one_of(
        st.integers(0, I64_MAX).map(lambda v: ast.IntLit(v, span=SPAN)),
        floats.map(lambda v: ast.FloatLit(v, span=SPAN)),
        st.booleans().map(lambda v: ast.BoolLit(v, span=SPAN)),
        names().map(lambda v: ast.Name(v, span=SPAN)),
        st.builds(lambda m, n: ast.QualifiedName(m, n, span=SPAN), names(), names()),
    )


def _slices(e: st.SearchStrategy[ast.Expr]) -> st.SearchStrategy[ast.Slice]:
    part = st.none() | e
    return st.builds(lambda a, b, c: ast.Slice(a, b, c, span=SPAN), part, part, part)


def _index_items(e: st.SearchStrategy[ast.Expr]) -> st.SearchStrategy[tuple]:
    return st.lists(e | _slices(e), min_size=1, max_size=3).map(tuple)


def _calls(e: st.SearchStrategy[ast.Expr]) -> st.SearchStrategy[ast.Call]:
    def keywords_named(ns: list[str]) -> st.SearchStrategy[tuple[ast.Keyword, ...]]:
        return st.tuples(*(e.map(lambda v, n=n: ast.Keyword(n, v, span=SPAN)) for n in ns))

    # Uniqueness is drawn on the names alone: a filtered draw of a whole keyword
    # would make Hypothesis print the (huge) repr of the expression strategy.
    keywords = st.lists(names(), max_size=2, unique=True).flatmap(keywords_named)
    args = st.lists(e, max_size=3).map(tuple)
    return st.builds(lambda n, a, k, m: ast.Call(n, a, k, m, span=SPAN),
                     names(), args, keywords, st.none() | names())


def _compound_exprs(e: st.SearchStrategy[ast.Expr]) -> st.SearchStrategy[ast.Expr]:
    return st.one_of(
        st.builds(lambda op, a, b: ast.BinOp(op, a, b, span=SPAN),
                  st.sampled_from(BINARY_OPS), e, e),
        st.builds(lambda op, a: ast.UnaryOp(op, a, span=SPAN), st.sampled_from(UNARY_OPS), e),
        _calls(e),
        st.builds(lambda b, i: ast.Index(b, i, span=SPAN), e, _index_items(e)),
        st.lists(e, max_size=3).map(lambda xs: ast.ArrayLit(tuple(xs), span=SPAN)),
    )


@functools.cache
def exprs(depth: int = 3) -> st.SearchStrategy[ast.Expr]:
    """Random expressions of every kind, nested at most ``depth`` levels."""
    # deferred: keeps the strategy's repr (which Hypothesis may print) short
    if depth == 0:
        return st.deferred(_leaf_exprs)
    return st.deferred(lambda: st.one_of(_leaf_exprs(), _compound_exprs(exprs(depth - 1))))


def _simple_stmts(e: st.SearchStrategy[ast.Expr]) -> st.SearchStrategy[ast.Stmt]:
    return st.one_of(
        st.builds(lambda t, v: ast.Assign(t, v, span=SPAN), names(), e),
        st.builds(lambda t, op, v: ast.AugAssign(t, op, v, span=SPAN),
                  names(), st.sampled_from(AUG_OPS), e),
        st.builds(lambda t, i, v: ast.SliceAssign(t, i, v, span=SPAN),
                  names(), _index_items(e), e),
        st.builds(lambda v: ast.Return(v, span=SPAN), e),
    )


def _blocks(s: st.SearchStrategy[ast.Stmt]) -> st.SearchStrategy[ast.Block]:
    return st.lists(s, max_size=2).map(lambda xs: ast.Block(tuple(xs), span=SPAN))


def _compound_stmts(s: st.SearchStrategy[ast.Stmt],
                    e: st.SearchStrategy[ast.Expr]) -> st.SearchStrategy[ast.Stmt]:
    block = _blocks(s)
    else_if = st.builds(lambda c, t, o: ast.Block((ast.If(c, t, o, span=SPAN),), span=SPAN),
                        e, block, st.none() | block)
    bounds = st.one_of(
        st.tuples(st.none(), e, st.none()),
        st.tuples(e, e, st.none()),
        st.tuples(e, e, e),
    )
    return st.one_of(
        st.builds(lambda c, t, o: ast.If(c, t, o, span=SPAN), e, block,
                  st.none() | block | else_if),
        st.builds(lambda v, b, body: ast.For(v, *b, body, span=SPAN), names(), bounds, block),
        st.builds(lambda c, body: ast.While(c, body, span=SPAN), e, block),
    )


@functools.cache
def stmts(depth: int = 2) -> st.SearchStrategy[ast.Stmt]:
    """Random statements of every kind, blocks nested at most ``depth`` levels."""
    e = exprs(2)
    if depth == 0:
        return st.deferred(lambda: _simple_stmts(e))
    return st.deferred(lambda: st.one_of(_simple_stmts(e), _compound_stmts(stmts(depth - 1), e)))


def types() -> st.SearchStrategy[ast.TypeExpr]:
    dtype = st.sampled_from(sorted(DTYPE_NAMES))
    dim = st.one_of(st.integers(0, I64_MAX), names()).map(lambda v: ast.Dim(v, span=SPAN))
    return st.one_of(
        dtype.map(lambda d: ast.ScalarType(d, span=SPAN)),
        st.just(ast.AnyTensorType(span=SPAN)),
        st.builds(lambda d, ds: ast.TensorType(d, tuple(ds), span=SPAN),
                  dtype, st.lists(dim, min_size=1, max_size=3)),
    )


@functools.cache
def decls() -> st.SearchStrategy[ast.Decl]:
    body = st.lists(stmts(), max_size=4).map(lambda xs: ast.Block(tuple(xs), span=SPAN))
    param = st.builds(lambda d, n, t: ast.Param(d, n, t, span=SPAN),
                      st.sampled_from(["input", "output"]), names(), types())
    func_params = st.lists(names().map(lambda n: ast.FuncParam(n, span=SPAN)), max_size=3)
    return st.one_of(
        names().map(lambda n: ast.Import(n, span=SPAN)),
        st.builds(lambda n, v: ast.Const(n, v, span=SPAN), names(), exprs()),
        st.builds(lambda n, p, b: ast.Func(n, tuple(p), b, span=SPAN), names(), func_params, body),
        st.builds(lambda n, p, b: ast.Kernel(n, tuple(p), b, span=SPAN),
                  names(), st.lists(param, max_size=3), body),
    )


def programs(max_decls: int = 3) -> st.SearchStrategy[ast.Program]:
    """Random programs mixing imports, consts, funcs and kernels."""
    return st.deferred(lambda: st.lists(decls(), max_size=max_decls)
                       .map(lambda ds: ast.Program(tuple(ds))))
