"""Fuzz finding (seeds 9300000000665, 9300000000700, cpu-O0/O3): an output declared
``f16[1, 1]`` assigned a ``f16[1, N]`` value lowers to ``tensor.cast`` to the static
shape; called with N = 5 the CPU backend failed to compile (an internal 'loop.retype'
error) instead of raising the shape error the interpreter raises."""

import numpy as np
import pytest

import wiadsl
from wiadsl.diagnostics import WiaRuntimeError

SRC = """kernel fz(input x: f16[1, N], output y: f16[1, 1]) {
    t = x;
    y = t;
}"""


@pytest.mark.parametrize("level", [0, 3])
def test_cast_to_a_static_shape_is_checked_at_run_time(level: int) -> None:
    k = wiadsl.jit(SRC, kernel="fz", target="cpu", opt_level=level)
    with pytest.raises(WiaRuntimeError, match="axis 1 must have extent 1"):
        k(np.ones((1, 5), np.float16))
    np.testing.assert_array_equal(k(np.full((1, 1), 3, np.float16)), np.full((1, 1), 3, np.float16))
