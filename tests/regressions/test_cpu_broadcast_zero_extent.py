"""Fuzz finding (seed 7001657, cpu): broadcasting an extent 1 against an extent 0 gave
1 (the max), so the runtime check refused shapes NumPy accepts; 1 and 0 give 0."""

import numpy as np
import pytest

import wiadsl

SRC = """kernel fz(input a: i8[1, M], input b: f32[1], input c: f32[K, 1, M],
                  output y: f32[K, 1, M]) {
    y = where(a < 2, c, b);
}"""


@pytest.mark.parametrize("m", [0, 1, 3])
@pytest.mark.parametrize("level", [0, 3])
def test_where_broadcasts_a_zero_extent(m: int, level: int) -> None:
    a = np.ones((1, m), np.int8)
    b = np.array([5.0], np.float32)
    c = np.arange(2 * m, dtype=np.float32).reshape(2, 1, m)
    got = wiadsl.jit(SRC, kernel="fz", target="cpu", opt_level=level)(a, b, c)
    np.testing.assert_array_equal(got, np.where(a < 2, c, b))
