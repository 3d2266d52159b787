"""Argument checking of kernel calls: every failure names the argument."""

import numpy as np
import pytest

from wiadsl.diagnostics import WiaCallError
from wiadsl.dtypes import DType
from wiadsl.runtime.binding import bind_call
from wiadsl.signature import KernelSignature, ParamSpec

MATMUL = KernelSignature("matmul", (
    ParamSpec("A", False, DType.F32, ("M", "K")),
    ParamSpec("B", False, DType.F32, ("K", "N")),
    ParamSpec("C", True, DType.F32, ("M", "N")),
))
SCALED = KernelSignature("scaled", (
    ParamSpec("x", False, DType.F32, (4,)),
    ParamSpec("alpha", False, DType.F32, ()),
    ParamSpec("n", False, DType.I32, ()),
    ParamSpec("t", False, None, None),
    ParamSpec("y", True, DType.F32, (4,)),
))


def f32(*shape):
    return np.zeros(shape, np.float32)


def test_positional_and_keyword_binding():
    bound = bind_call(MATMUL, (f32(2, 3),), {"B": f32(3, 5)})
    assert bound.dims == {"M": 2, "K": 3, "N": 5}
    assert bound.out_buffers == {"C": None}


def test_output_buffer_binds_dims():
    buf = f32(2, 5)
    bound = bind_call(MATMUL, (f32(2, 3), f32(3, 5)), {"C": buf})
    assert bound.out_buffers["C"] is buf


def test_strided_input_is_copied_to_contiguous():
    a = np.zeros((4, 6), np.float32)[:, ::2]
    bound = bind_call(MATMUL, (a, f32(3, 5)), {})
    assert bound.inputs["A"].flags.c_contiguous


@pytest.mark.parametrize("args, kwargs, message", [
    ((f32(2, 3),), {}, "matmul() is missing input(s) 'B'"),
    ((f32(2, 3), f32(3, 5), f32(2, 5)), {}, "takes 2 input(s) (A, B) but 3 positional"),
    ((f32(2, 3), f32(3, 5)), {"D": 1}, "unknown argument 'D'"),
    ((f32(2, 3), f32(3, 5)), {"A": f32(2, 3)}, "got argument 'A' twice"),
    ((np.zeros((2, 3)), f32(3, 5)), {}, "argument 'A': expected f32[M, K], got a float64 array"),
    ((f32(2, 3, 1), f32(3, 5)), {}, "argument 'A': expected f32[M, K] (rank 2), got a 3-D array"),
    ((f32(2, 3), f32(4, 5)), {}, "dim 'K' is 3 from argument 'A' (axis 1) but 4 from argument 'B' (axis 0)"),
    ((f32(2, 3), f32(3, 5)), {"C": f32(5, 2)}, "dim 'M' is 2 from argument 'A' (axis 0) but 5 from argument 'C' (axis 0)"),
    ((f32(2, 3), f32(3, 5)), {"C": np.zeros((2, 5))}, "output 'C': expected a buffer of f32[M, N], got a float64 array"),
    ((f32(2, 3), f32(3, 5)), {"C": np.zeros((5, 2), np.float32).T}, "output 'C': the buffer must be C-contiguous"),
    (([[1.0]], f32(3, 5)), {}, "argument 'A': expected a NumPy array or a scalar"),
    ((np.zeros((2, 3), np.complex64), f32(3, 5)), {}, "dtype complex64 is not supported"),
])
def test_bad_calls_name_the_argument(args, kwargs, message):
    with pytest.raises(WiaCallError) as info:
        bind_call(MATMUL, args, kwargs)
    assert message in str(info.value)


def test_scalars_and_any_tensor():
    bound = bind_call(SCALED, (f32(4), 2, 3, np.arange(6).reshape(2, 3)), {})
    assert bound.inputs["alpha"].dtype == np.float32
    assert bound.inputs["n"].dtype == np.int32
    assert bound.inputs["t"].shape == (2, 3)


@pytest.mark.parametrize("args, message", [
    ((f32(5), 1.0, 1, 0), "argument 'x': expected f32[4], got shape (5,): axis 0 must be 4"),
    ((f32(4), 1.0, 2.5, 0), "argument 'n': expected i32, got 2.5"),
    ((f32(4), 1.0, 2**40, 0), "argument 'n': 1099511627776 is out of range for i32"),
    ((1.0, 1.0, 1, 0), "argument 'x': expected f32[4], got the scalar 1.0"),
    ((f32(4), f32(2), 1, 0), "argument 'alpha': expected f32 (rank 0), got a 1-D array"),
    # a ``tensor`` takes a scalar's NumPy dtype: none for these (the fuzzer's 10**30
    # reached the type checker as a dtype of None)
    ((f32(4), 1.0, 1, 10**30), "argument 't': the scalar 10000000000"),
    ((f32(4), 1.0, 1, 2**63), "integers must fit int64"),
])
def test_bad_scalars(args, message):
    with pytest.raises(WiaCallError) as info:
        bind_call(SCALED, args, {})
    assert message in str(info.value)
