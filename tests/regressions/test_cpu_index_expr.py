"""Fuzz finding (seed 9300000000002, cpu-O0): making the loop level's ``Expr`` an
abstract base class left ``arange``'s index expression uninstantiable (it has no
linear indexing), so every unoptimized ``arange`` failed to compile."""

import numpy as np
import pytest

import wiadsl


@pytest.mark.parametrize("level", [0, 3])
@pytest.mark.parametrize("n", [1, 3, 33])
def test_arange_plus_input(level: int, n: int) -> None:
    src = "kernel fz(input x: i64[N, 1], output y: i64[N]) { y = arange(N) + x[:, 0]; }"
    x = np.arange(n, dtype=np.int64).reshape(n, 1) * 10
    got = wiadsl.jit(src, kernel="fz", target="cpu", opt_level=level)(x)
    np.testing.assert_array_equal(got, np.arange(n) + x[:, 0])
