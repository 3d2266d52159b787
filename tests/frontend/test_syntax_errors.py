"""Syntax errors: exact messages and positions, recovery, and robustness on garbage."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wiadsl.diagnostics import WiaError, WiaErrors, WiaSyntaxError
from wiadsl.frontend.parser import parse_bytes, parse_source

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def render(src: str) -> str:
    with pytest.raises(WiaSyntaxError) as info:
        parse_source(src, "t.wia")
    return str(info.value)


def caret_case(src: str, line: int, col: int, message: str, width: int = 1) -> tuple:
    """(source, the exact rendering): header, the source line, a caret under line:col."""
    text = src.splitlines()[line - 1]
    expected = (f"t.wia:{line}:{col}: error: {message}\n    {text}\n"
                f"    {' ' * (col - 1)}{'^' * width}")
    return src, expected


CASES = [
    caret_case("kernel k() { x = 1 }", 1, 20, "expected ';' after statement"),
    caret_case("kernel k() {\n    x = 1\n    y = 2;\n}", 3, 5, "expected ';' after statement"),
    caret_case("kernel k() { x = ; }", 1, 18, "expected an expression"),
    caret_case("}", 1, 1, "unexpected '}'"),
    caret_case("kernel k() { x = 1; } }", 1, 23, "unexpected '}'"),
    caret_case("kernel k() { x = a < b < c; }", 1, 24,
               "comparison operators cannot be chained; combine them with '&&'"),
    caret_case("kernel k() { x = if; }", 1, 18,
               "expected an expression, found keyword 'if'", 2),
    caret_case("kernel k() { input = 3; }", 1, 14,
               "expected a statement or '}', found keyword 'input'", 5),
    caret_case("kernel k() {\n    x = 1;\n", 2, 11, "unexpected end of file; expected '}'"),
    caret_case("kernel k() {}\n/* never closed\n", 2, 1, "unterminated block comment", 2),
    caret_case("kernel k() { x = $; }", 1, 18, "invalid character '$'"),
    caret_case("kernel k() { x = a & b; }", 1, 20, "invalid character '&'"),
    caret_case("kernel k() { x = é; }", 1, 18, "invalid character 'é'"),
    caret_case("kernel k() { x = 99999999999999999999; }", 1, 18,
               "integer literal out of range for i64", 20),
    caret_case("kernel k(A: f32) {}", 1, 10,
               "expected 'input' or 'output' before the parameter name"),
    caret_case("kernel k(input A: f33) {}", 1, 19,
               "unknown dtype 'f33' (expected one of bool, i8, i32, i64, f16, bf16, f32, f64)", 3),
    caret_case("kernel k() { for i in foo(3) {} }", 1, 23,
               "expected 'range' after 'in', found 'foo'", 3),
    caret_case("kernel k() { for i in range(1, 2, 3, 4) {} }", 1, 38,
               "range() takes 1 to 3 arguments, got 4"),
    caret_case("kernel k() { y = f(axis=1, x); }", 1, 28,
               "positional argument after keyword argument"),
    caret_case("kernel k() { y = f(x, axis=1, axis=2); }", 1, 31,
               "keyword argument 'axis' repeated", 6),
    caret_case("import nn", 1, 10, "unexpected end of file; expected ';' after import"),
    caret_case("const X = 1\nkernel k() {}", 2, 1,
               "expected ';' after const, found keyword 'kernel'", 6),
    caret_case("kernel k() { if x y { a = 1; } }", 1, 19, "expected '{'"),
    caret_case("kernel k() { x = A[]; }", 1, 20, "expected an expression or ':'"),
    caret_case("kernel k(input A: f32[M,]) {}", 1, 25, "expected a name or an integer"),
    caret_case("kernel k() { C[i] += 1; }", 1, 19, "expected '='", 2),
    caret_case("func 3() {}", 1, 6, "expected a name"),
    caret_case("kernel k() { 3 = x; }", 1, 14, "expected a statement or '}'"),
    caret_case("kernel k() { x = (a + b; }", 1, 24, "expected ')'"),
    caret_case("kernel k() { x = [1, 2; }", 1, 23, "expected ',' or ']'"),
    caret_case("x = 1;", 1, 1, "expected a declaration ('import', 'const', 'func' or 'kernel')"),
    caret_case("kernel k() { x = nn.; }", 1, 21, "expected a name"),
    caret_case("func f(a, b { return a; }", 1, 13, "expected ',', '=' or ')'"),
    caret_case("kernel k() { for i in range() {} }", 1, 29, "expected an expression"),
]


@pytest.mark.parametrize("src, expected", CASES, ids=[c[0][:40] for c in CASES])
def test_message_and_position(src, expected):
    assert render(src) == expected


def test_three_bad_statements_give_three_errors():
    src = "kernel k() {\n    a = 1 +;\n    b = 2;\n    c = (3;\n    d = ;\n}\n"
    with pytest.raises(WiaErrors) as info:
        parse_source(src, "m.wia")
    heads = [e.render().splitlines()[0] for e in info.value.errors]
    assert heads == [
        "m.wia:2:12: error: expected an expression",
        "m.wia:4:11: error: expected ')'",
        "m.wia:5:9: error: expected an expression",
    ]
    assert str(info.value).count("error:") == 3


def test_errors_in_several_declarations_and_kinds():
    src = ("const A = 1\n"                     # parse error in a declaration
           "kernel k(input X: f99) { y = $; }\n"  # builder error, lexical error
           "func f(a) { if a { return 1 } }\n")   # parse error in a nested block
    with pytest.raises(WiaErrors) as info:
        parse_source(src, "m.wia")
    heads = [e.render().splitlines()[0] for e in info.value.errors]
    assert heads == [
        "m.wia:2:1: error: expected ';' after const, found keyword 'kernel'",
        "m.wia:2:19: error: unknown dtype 'f99' (expected one of bool, i8, i32, i64, f16, bf16, "
        "f32, f64)",
        "m.wia:2:30: error: invalid character '$'",
        "m.wia:3:29: error: expected ';' after statement",
    ]


def test_missing_brace_after_a_bad_statement_is_reported_too():
    with pytest.raises(WiaErrors) as info:
        parse_source("kernel k() {\n    x = ;\n", "m.wia")
    assert [e.render().splitlines()[0] for e in info.value.errors] == [
        "m.wia:2:9: error: expected an expression",
        "m.wia:2:10: error: unexpected end of file; expected '}'",
    ]


def test_garbage_to_the_end_of_file_is_one_error():
    assert render("kernel k() { x = a b c").count("error:") == 1


def test_lexical_error_is_not_repeated_as_a_parse_error():
    # Blanking '#' leaves `x = ;`; that parse error would only repeat the first one.
    assert render("kernel k() { x = #; }").splitlines()[0] == \
        "t.wia:1:18: error: invalid character '#'"


def test_deep_nesting_message():
    assert render("const X = " + "(" * 5000 + "1" + ")" * 5000 + ";").splitlines()[0] == \
        "t.wia:1:211: error: nesting too deep (more than 200 levels)"


def test_invalid_utf8():
    with pytest.raises(WiaSyntaxError) as info:
        parse_bytes("kernel k() {\n    x = 'é\xff';\n}".encode("latin-1"), "b.wia")
    assert str(info.value).splitlines()[0] == "b.wia:2:10: error: invalid UTF-8 byte 0xe9"


# ---------------------------------------------------------------- never another exception

TOKENS = (
    "kernel func const import input output if else for in while return true false range "
    "tensor f32 i8 bool x A nn . 0 7 1.5 .5 3. 1e-5 99999999999999999999 ( ) [ ] { } , ; : "
    "= += -= *= /= || && == != < <= > >= + - * / % @ ** ! // /* */ $ & |"
).split() + ["\n", "/* c */", "// c\n"]


def _parse_or_wia_error(parse, data) -> None:
    try:
        parse(data)
    except WiaError as e:
        assert e.render()  # renders without failing, whatever the span


@FUZZ
@given(st.binary(max_size=200))
def test_random_bytes_raise_only_wia_errors(data):
    _parse_or_wia_error(parse_bytes, data)


@FUZZ
@given(st.lists(st.sampled_from(TOKENS), max_size=60).map(" ".join))
def test_random_token_sequences_raise_only_wia_errors(src):
    _parse_or_wia_error(parse_source, src)


@FUZZ
@given(st.text(st.sampled_from("kernel(){}[]x=1;:.,+-*/<>!&|@% \n\t"), max_size=120))
def test_random_text_raises_only_wia_errors(src):
    _parse_or_wia_error(parse_source, src)
