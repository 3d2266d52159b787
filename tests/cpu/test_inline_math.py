"""Issue 19: f32 ``erf`` is an inline rational approximation, ``x ** n`` for a small
constant integer ``n`` a product and ``x ** 0.5`` a square root, so GELU loops vectorize instead of calling ``erff``
or ``powf`` per element. Checked against ``math.erf`` / NumPy on every float class
(zero signs, subnormals, inf, NaN) and in the emitted LLVM IR (no libm call left)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import wiadsl
from wiadsl.backends.llvm import emit_llvm
from wiadsl.frontend.compile import compile_to_ir

ERF = "kernel e(input x: f32[N], output y: f32[N]) { y = erf(x); }"


def _points() -> np.ndarray:
    tiny = 10.0 ** np.linspace(-45, 0, 4001)
    return np.concatenate([np.linspace(-6, 6, 120001), tiny, -tiny,
                           [0.0, 5e-324, 1e-45, 1e-39, 3.9, 4.0, 4.1, 1e30]]).astype(np.float32)


def test_erf_within_8_ulp_of_math_erf_everywhere():
    x = _points()
    got = wiadsl.jit(ERF, kernel="e")(x).astype(np.float64)
    ref = np.array([math.erf(float(v)) for v in x])
    ulp = np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64)
    assert np.max(np.abs(got - ref) / ulp) <= 8
    assert np.max(np.abs(got - ref)) <= 5e-7


def test_erf_special_values():
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 7.0, -7.0], np.float32)
    got = wiadsl.jit(ERF, kernel="e")(x)
    np.testing.assert_array_equal(got[:4], [0.0, -0.0, 1.0, -1.0])
    assert np.signbit(got[1]) and not np.signbit(got[0])
    assert np.isnan(got[4]) and got[5] == 1.0 and got[6] == -1.0


@pytest.mark.parametrize("n", [-4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 2.5, 0.5, -0.5, "inf", "-inf",
                               "nan"])
def test_power_by_constant_matches_numpy(n):
    exponent = {"inf": "(1.0 / 0.0)", "-inf": "(-1.0 / 0.0)", "nan": "(0.0 / 0.0)"}.get(
        str(n), str(float(n)))  # fuzz seed 20000000000531: x ** (1.0 / 0.0) crashed
    n = float(n)
    src = f"kernel p(input x: f32[N], output y: f32[N]) {{ y = x ** {exponent}; }}"
    x = np.array([0.0, -0.0, 1.5, -2.25, np.nan, np.inf, -np.inf, 1e-20, 3e38, 7.0, 1e-45, -3.0,
                  *np.random.default_rng(7).standard_normal(37)], np.float32)
    with np.errstate(all="ignore"):
        want = x ** np.float32(n)
    got = wiadsl.jit(src, kernel="p")(x)
    np.testing.assert_allclose(got, want, rtol=3e-7, equal_nan=True)
    zero = np.isfinite(want) & (want == 0)
    np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(want[zero]))


def _llvm(src: str, kernel: str, shapes) -> str:
    return emit_llvm(compile_to_ir(src, kernel=kernel), {kernel: shapes})


def test_gelu_loops_call_no_libm():
    gelu = """import nn;
kernel erf_form(input x: f32[N], output y: f32[N]) { y = 0.5 * x * (1.0 + erf(x * 0.7071)); }
kernel tanh_form(input x: f32[N], output y: f32[N]) { y = nn.gelu(x); }
"""
    for kernel in ("erf_form", "tanh_form"):
        text = _llvm(gelu, kernel, [(1000,)])
        assert "@erff" not in text and "@llvm.pow" not in text and "@powf" not in text, kernel
        assert "<8 x float>" in text or "<16 x float>" in text or "<4 x float>" in text


def test_a_half_power_is_a_square_root():
    """NumPy computes ``x ** 0.5`` as ``sqrt(x)``: -inf gives NaN and -0.0 gives -0.0,
    where C's pow gives inf and 0.0 (fuzz seed 8800000000225, a scalar -inf)."""
    text = _llvm("kernel p(input x: f32[N], output y: f32[N]) { y = x ** 0.5; }", "p", [(64,)])
    assert "sqrt" in text and "pow" not in text
    scalar = "kernel s(input x: f32, output y: f32) { y = x ** 0.5; }"
    assert np.isnan(wiadsl.jit(scalar, kernel="s")(np.float32(-np.inf)))


def test_other_powers_still_call_pow():
    text = _llvm("kernel p(input x: f32[N], output y: f32[N]) { y = x ** 2.5; }", "p", [(64,)])
    assert "pow" in text
