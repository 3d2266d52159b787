"""f64 transcendentals of the PTX backend (software, ``scalar_math_f64``) against NumPy.

Errors are counted in ulps of NumPy's float64 result; the bounds are the ones the
module's docstring states. Special values (0, -0, +-inf, NaN, overflow,
underflow, subnormals) must match exactly.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from .helpers import jit_kernel

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


def test_f64_sin_cos_beyond_reduction_range_give_nan() -> None:
    # no Payne-Hanek reduction (documented): NaN instead of a plausible wrong value
    x = np.array([2.0**50, -1e300, 1e20])
    src = "kernel k(input x: f64[N], output s: f64[N], output c: f64[N]) { s = sin(x); c = cos(x); }"
    s, c = jit_kernel(src, "k", "ptxsim")(x)
    assert np.isnan(s).all() and np.isnan(c).all()


POW_X = np.concatenate([RNG.uniform(-5, 5, 33), RNG.uniform(0.5, 2, 33), SPECIAL, [2.0, -2.0, 0.5]])
POW_Y = np.concatenate([RNG.uniform(-5, 5, 33), RNG.uniform(-1074, 1023, 33).round(),
                        [0.0, -0.0, 1.0, 3.0, -3.0, 0.5, 2.5, math.inf, -math.inf, math.nan, 1023.9]])


@pytest.mark.parametrize("dtype,bound", [("f64", 16), ("f32", None)])
def test_pow_matches_numpy_including_special_cases(dtype: str, bound: int | None) -> None:
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
    if bound is not None:
        assert ulps(got, want).max() <= bound
    else:  # f32 uses the ex2/lg2 approximations: relative accuracy, away from underflow
        normal = ~exact & (np.abs(want) > 1e-30) & (np.abs(want) < 1e30)
        np.testing.assert_allclose(got[normal], want[normal], rtol=5e-4)
