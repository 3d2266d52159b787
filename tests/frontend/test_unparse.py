"""The unparser: canonical layout, minimal parentheses, and the parse round-trip."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from wiadsl.diagnostics import SourceFile, Span
from wiadsl.frontend import ast
from wiadsl.frontend.parser import parse_source
from wiadsl.frontend.unparse import unparse, unparse_expr

from .ast_strategies import exprs, programs
from .test_parser import BLOCK, expr

ROUND_TRIP = settings(max_examples=150, deadline=None,
                      suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SPAN = Span(SourceFile("<test>", ""), 1, 1, 1, 1)

CANONICAL_BLOCK = """\
import nn;

const EPS = 1e-05;

func scale_shift(x, s, b) {
    return x * s + b;
}

kernel block(input X: f32[T, D], input W: f32[D, D], input g: f32[D], input b: f32[D], \
output Y: f32[T, D]) {
    h = X @ W;
    h = scale_shift(h, g, b);
    if reduce_max(abs(h)) > 100.0 {
        h = h / reduce_max(abs(h));
    }
    Y = nn.gelu(h);
}
"""


def test_canonical_layout():
    assert unparse(parse_source(BLOCK)) == CANONICAL_BLOCK
    assert unparse(parse_source(CANONICAL_BLOCK)) == CANONICAL_BLOCK


def test_statements_layout():
    src = """kernel k(output C: tensor) { if (a) { x = 1; } else if b { } else { if c {} }
        for i in range(n) { C[i, ::2] = 0.5; } for j in range(1, n, 2) { x -= j; }
        while x > 0 { x /= 2; } }"""
    assert unparse(parse_source(src)) == """\
kernel k(output C: tensor) {
    if a {
        x = 1;
    } else if b {} else if c {}
    for i in range(n) {
        C[i, ::2] = 0.5;
    }
    for j in range(1, n, 2) {
        x -= j;
    }
    while x > 0 {
        x /= 2;
    }
}
"""


@pytest.mark.parametrize("src, canonical", [
    ("(a + b) * c", "(a + b) * c"),
    ("a + (b * c)", "a + b * c"),
    ("(a - b) - c", "a - b - c"),
    ("a - (b - c)", "a - (b - c)"),
    ("(-x) ** 2", "(-x) ** 2"),
    ("-(x ** 2)", "-x ** 2"),
    ("(a ** b) ** c", "(a ** b) ** c"),
    ("a ** (b ** c)", "a ** b ** c"),
    ("2 ** (-1)", "2 ** -1"),
    ("(a < b) == c", "(a < b) == c"),
    ("!(a && b) || (c || d)", "!(a && b) || (c || d)"),
    ("((a || b) && c)", "(a || b) && c"),
    ("(f(x))[0]", "f(x)[0]"),
    ("(a + b)[0]", "(a + b)[0]"),
    ("(-a)[0]", "(-a)[0]"),
    ("- - x", "--x"),
    ("A[(1):(n), :, ::2, 1:]", "A[1:n, :, ::2, 1:]"),
    ("nn.softmax(x, axis=-1)", "nn.softmax(x, axis=-1)"),
    ("[[1.0, 2.0], [3., .5]]", "[[1.0, 2.0], [3.0, 0.5]]"),
    ("A @ B + c", "A @ B + c"),
    ("true && !false", "true && !false"),
    ("nn.EPS * 2", "nn.EPS * 2"),
])
def test_minimal_parentheses(src, canonical):
    assert unparse_expr(expr(src)) == canonical


@pytest.mark.parametrize("value", [0.1, 1e-05, 1e16, 5e-324, 1.7976931348623157e308,
                                   123456789.125])
def test_floats_round_trip_exactly(value):
    text = unparse_expr(ast.FloatLit(value, span=SPAN))
    assert expr(text) == ast.FloatLit(value, span=SPAN)


def test_negative_literals_bind_like_unary_minus():
    node = ast.BinOp("**", ast.IntLit(-1, span=SPAN), ast.IntLit(2, span=SPAN), span=SPAN)
    assert unparse_expr(node) == "(-1) ** 2"
    assert unparse_expr(ast.FloatLit(float("-inf"), span=SPAN)) == "-1.0 / 0.0"
    inf_squared = ast.BinOp("**", ast.FloatLit(float("inf"), span=SPAN),
                            ast.IntLit(2, span=SPAN), span=SPAN)
    assert unparse_expr(inf_squared) == "(1.0 / 0.0) ** 2"  # no literal overflows to inf
    with pytest.raises(ValueError):
        unparse_expr(ast.FloatLit(float("nan"), span=SPAN))


def test_for_with_step_but_no_start_prints_zero_start():
    loop = ast.For("i", None, ast.Name("n", span=SPAN), ast.IntLit(2, span=SPAN),
                   ast.Block((), span=SPAN), span=SPAN)
    kernel = ast.Kernel("k", (), ast.Block((loop,), span=SPAN), span=SPAN)
    assert "for i in range(0, n, 2) {}" in unparse(ast.Program((kernel,)))


@ROUND_TRIP
@given(programs())
def test_round_trip_and_idempotence(program):
    text = unparse(program)
    reparsed = parse_source(text)
    assert reparsed == program
    assert unparse(reparsed) == text


@ROUND_TRIP
@given(exprs(3))
def test_expression_round_trip(e):
    assert expr(unparse_expr(e)) == e
