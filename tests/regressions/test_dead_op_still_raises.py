"""Fuzz finding (seed 7001155, passes/cpu-O3): an unused ``reduce_max`` over zero
elements raised at -O0 but canonicalize/dce deleted it at -O1+, so the optimized
kernel returned a result. Ops that may fail now survive DCE (``Operation.may_trap``)."""

import numpy as np
import pytest

import wiadsl
from wiadsl.diagnostics import WiaRuntimeError

SRC = """kernel fz(input in0: i32[K, N], input in3: f16[K, N], output out0: f16[K, N]) {
    cv3 = reduce_max(in0);
    out0 = in3;
}"""

INDEX_SRC = """kernel g(input x: f32[N], input i: i64, output y: f32[N]) {
    unused = x[i];
    y = x;
}"""


#: (target, options): the interpreter runs the IR as lowered; the CPU backend optimizes.
TARGETS = [("interp", {}), ("cpu", {"opt_level": 0}), ("cpu", {"opt_level": 1}),
           ("cpu", {"opt_level": 3})]


@pytest.mark.parametrize(("target", "options"), TARGETS)
def test_unused_empty_reduction_raises_at_every_level(target: str, options: dict) -> None:
    k = wiadsl.jit(SRC, kernel="fz", target=target, **options)
    with pytest.raises(WiaRuntimeError, match="empty"):
        k(np.zeros((3, 0), np.int32), np.zeros((3, 0), np.float16))
    got = k(np.ones((3, 2), np.int32), np.full((3, 2), 2, np.float16))
    np.testing.assert_array_equal(got, np.full((3, 2), 2, np.float16))


@pytest.mark.parametrize(("target", "options"), TARGETS)
def test_unused_out_of_range_index_raises_at_every_level(target: str, options: dict) -> None:
    k = wiadsl.jit(INDEX_SRC, kernel="g", target=target, **options)
    x = np.arange(4, dtype=np.float32)
    with pytest.raises(WiaRuntimeError, match="out of range"):
        k(x, np.int64(7))
    np.testing.assert_array_equal(k(x, np.int64(-1)), x)
