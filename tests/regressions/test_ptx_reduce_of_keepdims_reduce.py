"""Fuzz finding (seed 9200000000969, ptxsim): ``reduce_min(reduce_min(x, keepdims=true) + 2)``
on a 1x1 ``x`` returned the inner minimum without the ``+ 2``. The inner keepdims
reduction joined the outer one's row kernel as a stage, and the outer reduction's
output then named stage 0 (the inner one) instead of its own."""

import numpy as np
import pytest

import wiadsl

SRC = """kernel k(input x: f32[1, M], output s: f32, output t: f32) {
    s = reduce_min(reduce_min(x, keepdims=true) + 2);
    t = reduce_sum(reduce_max(x, keepdims=true) * 3);
}"""


@pytest.mark.parametrize("m", [1, 3])
def test_reduction_of_a_keepdims_reduction(m: int) -> None:
    x = np.arange(m, dtype=np.float32).reshape(1, m) - 1
    s, t = wiadsl.jit(SRC, kernel="k", target="ptxsim")(x)
    assert s == np.min(np.min(x, keepdims=True) + 2)
    assert t == np.sum(np.max(x, keepdims=True) * 3)
