"""Fuzz finding (seed 9500000002140, ptxsim): ``x * reduce_min(x, keepdims=true)`` on an
empty ``x`` returned a result: the reduction ran as a stage of the multiply's row
kernel, and only the stand-alone reduction kernel checked for zero elements."""

import numpy as np
import pytest

import wiadsl
from wiadsl.diagnostics import WiaRuntimeError

SRC = """kernel k(input x: f32[1, M], output y: f32[1, M]) {
    y = x * reduce_min(x, keepdims=true);
}"""


def test_stage_reduction_over_zero_elements_raises() -> None:
    k = wiadsl.jit(SRC, kernel="k", target="ptxsim")
    with pytest.raises(WiaRuntimeError, match="empty"):
        k(np.ones((1, 0), np.float32))
    x = np.array([[2.0, 3.0]], np.float32)
    np.testing.assert_array_equal(k(x), x * x.min(keepdims=True))
