"""A depthwise convolution written by hand in WIA DSL (a sum of per-channel-weighted
windows of a zero-padded input) takes the CPU's direct kernel: f32 and f64, against
the interpreter, at 1 and 2 threads."""

from __future__ import annotations

import numpy as np
import pytest

import wiadsl
from tests.passes.test_depthwise import _inputs, window_sum
from wiadsl.backends.llvm.compile import cpu_pipeline
from wiadsl.frontend.compile import compile_to_ir
from wiadsl.ir import print_module, run_func
from wiadsl.passes import optimize


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("geometry", [(33, 7, 7, 3, 2, 1, (1, 1, 1, 1)), (7, 9, 33, 3, 1, 1, (1, 1, 1, 1)),
                                      (1, 4, 4, 3, 1, 1, (1, 1, 1, 1))])
def test_hand_written_depthwise_runs_the_direct_kernel(dtype, geometry) -> None:
    text = window_sum(*geometry, dtype)
    module = compile_to_ir(text)
    optimize(module, pipeline=cpu_pipeline(2))
    assert "tensor.fused_depthwise_conv2d" in print_module(module)
    args = _inputs(text, 3)
    want = run_func(compile_to_ir(text), "dw", args)[0]
    mod = wiadsl.jit(text)
    before = wiadsl.get_num_threads()
    try:
        for threads in (1, 2):
            wiadsl.set_num_threads(threads)
            tol = 1e-5 if dtype == "f32" else 1e-12
            np.testing.assert_allclose(mod.dw(*args), want, rtol=tol, atol=tol)
    finally:
        wiadsl.set_num_threads(before)
