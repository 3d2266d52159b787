"""f64 transcendentals of the PTX backend (software, ``scalar_math_f64``) against NumPy.

Errors are counted in ulps of NumPy's float64 result; the bounds are the ones the
module's docstring states. Special values (0, -0, +-inf, NaN, overflow,
underflow, subnormals) must match exactly.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from wiadsl.backends.ptx.emit import emit_ptx
from wiadsl.backends.ptx.scalar_math_f64 import machin_pi

from .helpers import corpus_module, jit_kernel

pytest.importorskip("wiadsl.backends.ptx.sim")

RNG = np.random.default_rng(2026)
SPECIAL = [0.0, -0.0, 1.0, -1.0, math.inf, -math.inf, math.nan, 5e-324, -5e-324, 1e-310]


def _inputs(*parts) -> np.ndarray:
    return np.concatenate([np.asarray(p, np.float64) for p in parts] + [SPECIAL])


CASES = {
    # name: (DSL expression of x, NumPy reference, inputs, max ulps)
    "exp": ("exp(x)", np.exp, _inputs(RNG.uniform(-20, 20, 129), RNG.uniform(-746, 710, 129),
                                      [709.78, 709.79, -745.13, -745.14, -708.5]), 2),
    "log": ("log(x)", np.log, _inputs(np.exp(RNG.uniform(-700, 700, 129)), RNG.uniform(0.5, 2, 129),
                                      [1 + 2**-52, 1 - 2**-53, 2.0**-1074, 2.0**-1022, 2**0.5]), 1),
    "tanh": ("tanh(x)", np.tanh, _inputs(RNG.uniform(-3, 3, 129), RNG.uniform(-30, 30, 33),
                                         10.0 ** RNG.uniform(-300, -1, 33), [21.9, 22.0, 1e-8]), 4),
    "sigmoid": ("sigmoid(x)", lambda x: 1 / (1 + np.exp(-x)),
                _inputs(RNG.uniform(-40, 40, 129), [-745.0, -746.0, 800.0, -800.0]), 3),
    "sin": ("sin(x)", np.sin, _inputs(RNG.uniform(-10, 10, 129), RNG.uniform(-1e6, 1e6, 33),
                                      10.0 ** RNG.uniform(-300, 15, 33), [math.pi, 355.0, 2.0**49]), 2),
    "cos": ("cos(x)", np.cos, _inputs(RNG.uniform(-10, 10, 129), RNG.uniform(-1e6, 1e6, 33),
                                      10.0 ** RNG.uniform(-300, 15, 33), [math.pi / 2, 2.0**49]), 2),
    "erf": ("erf(x)", np.vectorize(math.erf, otypes=[np.float64]),
            _inputs(RNG.uniform(-7, 7, 129), 10.0 ** RNG.uniform(-300, 0, 33),
                    [0.99999, 1.0, 1.99999, 2.0, 3.49999, 3.5, 5.89, 5.9, 6.0]), 2),
}


def ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """|got - want| in units of want's spacing; 0 where both are equal or both NaN."""
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    with np.errstate(invalid="ignore"):
        err = np.abs(got - want) / np.spacing(np.abs(want))
    return np.where(same, 0.0, np.nan_to_num(err, nan=np.inf))


@pytest.mark.parametrize("name", sorted(CASES))
def test_f64_function_within_stated_ulps(name: str) -> None:
    expr, ref, x, bound = CASES[name]
    src = f"kernel k(input x: f64[N], output y: f64[N]) {{ y = {expr}; }}"
    got = jit_kernel(src, "k", "ptxsim")(x)
    with np.errstate(all="ignore"):
        want = ref(x)
    err = ulps(got, want)
    worst = int(np.argmax(err))
    assert err.max() <= bound, f"{name}({x[worst]!r}) = {got[worst]!r}, NumPy {want[worst]!r}"


HUGE = np.concatenate([10.0 ** RNG.uniform(15, 308, 129), -(2.0 ** RNG.uniform(49, 60, 33)),
                       [2.0**50, 2.0**50 * (1 - 2**-53), 1.7976931348623157e308]])


def test_f64_sin_cos_of_huge_arguments_payne_hanek() -> None:
    src = "kernel k(input x: f64[N], output s: f64[N], output c: f64[N]) { s = sin(x); c = cos(x); }"
    s, c = jit_kernel(src, "k", "ptxsim")(HUGE)
    assert ulps(s, np.sin(HUGE)).max() <= 2
    assert ulps(c, np.cos(HUGE)).max() <= 2


def _exact_cos(x: float) -> float:
    """cos(x) from x - k*pi/2 in exact rational arithmetic (pi to 1500 bits; the
    backend's pi itself is checked against NumPy by the tests above)."""
    half_pi = machin_pi(1500) / 2
    k = round(Fraction(x) / half_pi)
    r = float(Fraction(x) - k * half_pi)
    return [math.cos(r), -math.sin(r), -math.cos(r), math.sin(r)][k % 4]


def test_f64_cos_near_a_multiple_of_half_pi_is_exactly_reduced() -> None:
    # x is within 5e-19 of a multiple of pi/2: reduction needs ~120 bits of 2/pi
    x = np.array([5.319372648326541e255, -5.319372648326541e255])
    src = "kernel k(input x: f64[N], output y: f64[N]) { y = cos(x); }"
    got = jit_kernel(src, "k", "ptxsim")(x)
    want = np.array([_exact_cos(float(v)) for v in x])
    assert ulps(got, want).max() <= 2


POW_X = np.concatenate([RNG.uniform(-5, 5, 33), RNG.uniform(0.5, 2, 33), SPECIAL, [2.0, -2.0, 0.5]])
POW_Y = np.concatenate([RNG.uniform(-5, 5, 33), RNG.uniform(-1074, 1023, 33).round(),
                        [0.0, -0.0, 1.0, 3.0, -3.0, 0.5, 2.5, math.inf, -math.inf, math.nan, 1023.9]])


@pytest.mark.parametrize("dtype,bound", [("f64", 16), ("f32", 2)])
def test_pow_matches_numpy_including_special_cases(dtype: str, bound: int) -> None:
    np_dtype = np.float64 if dtype == "f64" else np.float32
    xx, yy = (a.ravel().astype(np_dtype) for a in np.meshgrid(POW_X, POW_Y))
    src = f"kernel k(input x: {dtype}[N], input y: {dtype}[N], output z: {dtype}[N]) {{ z = x ** y; }}"
    got = jit_kernel(src, "k", "ptxsim")(xx, yy)
    with np.errstate(all="ignore"):
        want = np.power(xx, yy)
    # NaN, infinities, zeros (and their signs) and ones must be exact in both dtypes
    exact = ~np.isfinite(want) | (want == 0) | (np.abs(want) == 1)
    np.testing.assert_array_equal(got[exact], want[exact])
    signed = exact & ~np.isnan(want)  # a NaN's sign bit means nothing
    np.testing.assert_array_equal(np.signbit(got[signed]), np.signbit(want[signed]))
    # f32 pow is computed in f64 and rounded once (<= 1 ulp); NumPy's f32 power adds its own
    assert ulps(got, want).max() <= bound


def test_trig_table_is_declared_once_per_module() -> None:
    # sin fused into the matmul's operand load and cos into a reduction: two device
    # kernels use the 2/pi table, the module declares it once
    src = ("kernel k(input x: f64[M, N], output y: f64[M, M], output z: f64[M]) {"
           " y = sin(x) @ transpose(x); z = reduce_sum(cos(x * 1e20), axis=1); }")
    text, _ = emit_ptx(corpus_module(src), "k")
    assert text.count(".const .align 8 .b64 __wia_two_over_pi") == 1
    x = RNG.standard_normal((7, 33))
    got = jit_kernel(src, "k", "ptxsim")(x)
    want = jit_kernel(src, "k", "interp")(x)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)
