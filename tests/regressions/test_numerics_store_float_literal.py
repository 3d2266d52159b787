"""Fuzz finding (issue 17, round 2; seed 5000020, ptxsim): a weak float constant stored
into one element of an f16 tensor gave -inf instead of +inf.

``in1[1] = 2147483648.0`` folds to an f16 ``inf`` that the PTX plan writes from the
host (a ``write`` step). The step's literal entry carried no dtype, so the executor
read it as an index: through int64 (inf and 2**31 wrap negative, 1.5 truncates) before
the conversion to the tensor's dtype. Literal entries now name their dtype.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.e2e.numerics import TARGETS, as_dtype, assert_same_bits, host_numpy, kernel

LITERAL = "kernel k(input a: {t}[4], output b: {t}[4]) {{ a[1] = {v}; b = a; }}"
#: The same constant inside a kernel (a PTX immediate of the dtype) instead of a host write.
SELECT = "kernel k(input a: {t}[4], output b: {t}[4]) {{ b = where(a == a, {v}, a); }}"
#: The same store from a declared scalar input (a plan scalar, not a literal).
INPUT = "kernel k(input a: {t}[4], input s: f64, output b: {t}[4]) {{ a[1] = s; b = a; }}"

VALUES = [2147483648.0, -2147483648.0, 4294967296.0, 65504.0, 65520.0, 1e5, -1e5,
          math.inf, -math.inf, math.nan, 1.5, -0.0, 0.1, 3.0e38, 1e39, 9.3e18]
DTYPES = ["f16", "bf16", "f32", "f64"]


def literal(v: float) -> str:
    """``v`` as a weak float expression of the language (no inf/nan literals)."""
    if math.isnan(v):
        return "(0.0 / 0.0)"
    if math.isinf(v):
        return "(1.0 / 0.0)" if v > 0 else "(-1.0 / 0.0)"
    return repr(v)


def expected(dtype: str, v: float) -> np.ndarray:
    a = np.asarray([1.0, v, -2.0, 3.0], np.float64)
    return as_dtype(a, dtype)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_store_weak_float_literal(target: str, dtype: str) -> None:
    base = as_dtype([1.0, 0.0, -2.0, 3.0], dtype)
    for v in VALUES:
        k = kernel(LITERAL.format(t=dtype, v=literal(v)), target)
        assert_same_bits(k(base.copy()), expected(dtype, v), f"{target} {dtype} a[1] = {v!r}")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_store_scalar_input(target: str, dtype: str) -> None:
    base = as_dtype([1.0, 0.0, -2.0, 3.0], dtype)
    k = kernel(INPUT.format(t=dtype), target)
    for v in VALUES:
        got = k(base.copy(), np.float64(v))
        assert got.dtype == host_numpy(dtype)
        assert_same_bits(got, expected(dtype, v), f"{target} {dtype} a[1] = s ({v!r})")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_weak_float_literal_in_a_kernel(target: str, dtype: str) -> None:
    base = as_dtype([1.0, 0.0, -2.0, 3.0], dtype)
    for v in VALUES:
        k = kernel(SELECT.format(t=dtype, v=literal(v)), target)
        assert_same_bits(k(base), as_dtype([v] * 4, dtype), f"{target} {dtype} where(..., {v!r})")
