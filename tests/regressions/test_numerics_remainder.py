"""Float ``%`` is ``np.remainder`` on every target, bit for bit (issue 17, defects 3 and 6).

Found: the PTX backend computed ``a - trunc(a/b)*b``, which is wrong once ``a/b``
does not fit the mantissa (``1e10 % 3`` gave 256, ``1e38 % 3`` 2.5e30) and NaN for an
infinite divisor (``5.5 % inf``); the CPU backend's zero results had the dividend's
sign (``-4.0 % 2.0`` gave -0.0) where NumPy gives the divisor's. LANGUAGE.md §3:
"`%` is `np.remainder` (the result has the divisor's sign), including the sign of a
zero result." f16 and bf16 are computed in f32 and rounded, as NumPy does for f16.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.e2e.numerics import (
    FLOAT_DTYPES,
    SIZES,
    TARGETS,
    as_dtype,
    assert_same_bits,
    edges,
    kernel,
    random_values,
)

SRC = "kernel k(input a: {t}[N], input b: {t}[N], output c: {t}[N]) {{ c = a % b; }}"


def numpy_remainder(a: np.ndarray, b: np.ndarray, dtype: str) -> np.ndarray:
    """NumPy's result; bf16 (no NumPy type) is f32's result rounded to bf16."""
    with np.errstate(all="ignore"):
        return as_dtype(np.remainder(a, b), "bf16") if dtype == "bf16" else np.remainder(a, b)


def every_pair(dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """Each edge value against each edge value (an odd count: vector body and tail)."""
    e = edges(dtype)
    a, b = np.meshgrid(e, e, indexing="ij")
    return np.ascontiguousarray(a.reshape(-1)), np.ascontiguousarray(b.reshape(-1))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_remainder_of_edge_values_is_numpys(target: str, dtype: str) -> None:
    a, b = every_pair(dtype)
    got = kernel(SRC.format(t=dtype), target)(a, b)
    assert_same_bits(got, numpy_remainder(a, b, dtype), f"{target} {dtype} %")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("n", SIZES)
def test_remainder_of_random_values_is_numpys(target: str, dtype: str, n: int) -> None:
    a = random_values(dtype, n, seed=n)
    b = random_values(dtype, n, seed=n + 1000)
    b[::3] = as_dtype(np.round(b[::3].astype(np.float64)), dtype)  # exact quotients: zeros
    a[::3] = as_dtype(b[::3].astype(np.float64) * -3, dtype)
    got = kernel(SRC.format(t=dtype), target)(a, b)
    assert_same_bits(got, numpy_remainder(a, b, dtype), f"{target} {dtype} % (n={n})")


@pytest.mark.parametrize("target", TARGETS)
def test_issue_examples(target: str) -> None:
    a = np.array([1e10, 5.5, -5.5, -4.0, 4.0, 1e38], np.float32)
    b = np.array([3.0, np.inf, np.inf, 2.0, -2.0, 3.0], np.float32)
    got = kernel(SRC.format(t="f32"), target)(a, b)
    assert_same_bits(got, np.remainder(a, b), f"{target} f32 %")
