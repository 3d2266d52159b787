"""Fuzz findings (seeds 7000632 and 7000671, ptxsim): with a zero extent, the PTX plan
neither checked a constant index against the (empty) axis nor refused a min/max over
zero elements; the interpreter and the CPU backend raise, as NumPy does."""

import numpy as np
import pytest

import wiadsl

INDEX = """kernel fz(input in0: f32[M, M], output out0: f32[M]) {
    out0 = in0[1];
}"""
REDUCE_MIN = """kernel fz(input in0: i64[M, N], output out0: i64[M, N]) {
    out0 = max(in0, reduce_min(in0));
}"""
ROW_MAX = """kernel fz(input x: f32[M, N], output y: f32[M]) {
    y = reduce_max(x, axis=1);
}"""


@pytest.mark.parametrize("target", ["interp", "cpu", "ptxsim"])
def test_constant_index_into_an_empty_axis_raises(target: str) -> None:
    fn = wiadsl.jit(INDEX, kernel="fz", target=target)
    with pytest.raises(wiadsl.WiaRuntimeError, match="out of range"):
        fn(np.zeros((0, 0), np.float32))
    np.testing.assert_array_equal(fn(np.eye(3, dtype=np.float32)), np.eye(3)[1])


@pytest.mark.parametrize("target", ["interp", "cpu", "ptxsim"])
def test_min_over_zero_elements_raises(target: str) -> None:
    fn = wiadsl.jit(REDUCE_MIN, kernel="fz", target=target)
    with pytest.raises(wiadsl.WiaRuntimeError, match="empty"):
        fn(np.zeros((0, 1), np.int64))


@pytest.mark.parametrize("target", ["interp", "cpu", "ptxsim"])
def test_max_over_nonempty_rows_of_an_empty_batch_is_empty(target: str) -> None:
    # NumPy: max over axis 1 of a [0, 3] array is an empty result, not an error
    out = wiadsl.jit(ROW_MAX, kernel="fz", target=target)(np.zeros((0, 3), np.float32))
    assert out.shape == (0,)
