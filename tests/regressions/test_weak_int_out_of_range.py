"""A weak integer (a literal, a dim, a loop index) that the other operand's integer dtype
cannot hold (NumPy 2, NEP 50).

Found (issue 17 review): ``x == 300`` on an i8 tensor converted 300 to i8 (44) first, so
it was True where ``x`` held 44, on every target; NumPy compares a Python int by value
(False). And ``x + 300`` silently wrapped where NumPy raises OverflowError. Now a
comparison widens to i64 unless the literal fits, and arithmetic with a literal that
does not fit is a compile error at the literal.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.e2e.numerics import TARGETS, kernel
from wiadsl.diagnostics import WiaTypeError

X8 = np.array([44, 127, -128, 0, -84, 1, 100], np.int8)
CASES = [("x == 300", lambda x: x == 300), ("x != 300", lambda x: x != 300),
         ("x < 300", lambda x: x < 300), ("300 > x", lambda x: 300 > x),
         ("x >= -1000", lambda x: x >= -1000), ("x == -212", lambda x: x == -212),
         ("x == 44", lambda x: x == 44), ("x <= 127", lambda x: x <= 127)]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("expr,want", CASES, ids=[c[0] for c in CASES])
def test_a_comparison_with_an_int_literal_compares_by_value(target: str, expr: str, want) -> None:
    k = kernel(f"kernel k(input x: i8[N], output y: bool[N]) {{ y = {expr}; }}", target)
    np.testing.assert_array_equal(k(X8), want(X8))


@pytest.mark.parametrize("target", TARGETS)
def test_a_loop_index_compares_by_value(target: str) -> None:
    # i reaches 300 at run time (no static value): 300 must not meet x == 44.
    src = """kernel k(input x: i8[N], output y: i32[N]) {
        y = zeros([N], i32);
        for i in range(298, 302) { y = y + cast(x == i, i32); }
    }"""
    x = np.array([44, 45, 1, 0], np.int8)
    np.testing.assert_array_equal(kernel(src, target)(x), np.zeros(4, np.int32))


@pytest.mark.parametrize("expr", ["x + 300", "300 * x", "x - (200 + 100)", "x % 1000",
                                  "cast(x, i32) + 3000000000"])
def test_arithmetic_with_an_int_literal_out_of_range_is_an_error(expr: str) -> None:
    src = f"kernel k(input x: i8[N], output y: tensor) {{ y = {expr}; }}"
    with pytest.raises(WiaTypeError, match="is out of range for i(8|32), the dtype of the other"):
        kernel(src, "interp")


def test_the_error_points_at_the_literal() -> None:
    src = "kernel k(input x: i8[N], output y: i8[N]) { y = 300 * x; }"
    with pytest.raises(WiaTypeError) as info:
        kernel(src, "interp")
    lines = str(info.value).splitlines()
    assert lines[0].startswith("<string>:1:49: error: integer 300 is out of range for i8")
    assert lines[2].index("^^^") == lines[1].index("300")


def test_literals_that_fit_still_wrap_as_the_dtype_does() -> None:
    k = kernel("kernel k(input x: i8[N], output y: i8[N]) { y = x + 100; }", "interp")
    np.testing.assert_array_equal(k(X8[:2]), np.array([-112, -29], np.int8))
