"""Integer ``%`` agrees with NumPy on every target at the edges (issue 17, defect 6): a
zero divisor gives 0 (NumPy's result, without its warning), the minimum integer
modulo -1 is 0, and results take the divisor's sign."""

from __future__ import annotations

import numpy as np
import pytest

from tests.e2e.numerics import INT_DTYPES, TARGETS, assert_same_bits, host_numpy, kernel

SRC = "kernel k(input a: {t}[N], input b: {t}[N], output r: {t}[N]) {{ r = a % b; }}"


def edge_pairs(dtype: str) -> tuple[np.ndarray, np.ndarray]:
    t = host_numpy(dtype)
    lo, hi = int(np.iinfo(t).min), int(np.iinfo(t).max)
    e = np.array([0, 1, -1, 2, -2, 3, -7, 7, 100 % (hi + 1), lo, hi, lo + 1, hi - 1], dtype=t)
    a, b = np.meshgrid(e, e, indexing="ij")
    return a.reshape(-1), b.reshape(-1)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_integer_remainder_edges(target: str, dtype: str) -> None:
    a, b = edge_pairs(dtype)
    r = kernel(SRC.format(t=dtype), target)(a, b)
    with np.errstate(all="ignore"):
        assert_same_bits(r, np.remainder(a, b), f"{target} {dtype} %")
