"""``dim(x, axis)`` (LANGUAGE.md §7) on every target: static, symbolic and call-time
(``tensor``) extents, negative axes, inside a func, as a size, a loop bound and an index."""

from __future__ import annotations

import numpy as np
import pytest

from tests.e2e.harness import assert_matches, rand
from tests.e2e.numerics import SIZES, TARGETS, kernel

SRC = """
func mean_last(x, axis=-1) { return reduce_sum(x, axis=axis) / dim(x, axis); }

kernel k(input x: f32[M, N], input t: tensor, output n: i64, output s: f32[M],
         output last: f32[N], output z: f32[N], output c: i64) {
    n = dim(x, 0) * 1000 + dim(x, -1) + dim(t, -1) * 1000000;
    s = mean_last(x);
    last = x[dim(x, 0) - 1, :];
    z = zeros([dim(x, 1)], f32) + mean_last(x, axis=0);
    c = 0;
    for i in range(dim(t, 0)) { c += 1; }
}
"""


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("size", SIZES)
def test_dim_reads_each_extent(target: str, size: int) -> None:
    m = (size + 3) // 2
    x, t = rand((m, size), seed=size), rand((size, 3), np.float64, size + 1)
    n, s, last, z, c = kernel(SRC, target)(x, t)
    assert_matches(n, np.int64(m * 1000 + size + 3 * 1000000))
    assert_matches(s, x.sum(axis=-1) / np.float32(size))
    assert_matches(last, x[-1])
    assert_matches(z, x.sum(axis=0) / np.float32(m))
    assert_matches(c, np.int64(size))
