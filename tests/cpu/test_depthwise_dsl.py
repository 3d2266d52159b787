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


def test_the_plane_kernel_is_a_helper_compiled_for_its_extents() -> None:
    """CHECK: the kernel module declares the depthwise plane kernel, a library helper
    (backends/llvm/library.py ``PLANE_KINDS``) named by its geometry, its static plane
    extents (h, wd, ho, wo) and, when the blocks of planes divide the channels, their
    size; it defines no plane kernel of its own."""
    from wiadsl.backends.llvm.compile import lower_kernel, tensor_passes
    text = window_sum(16, 8, 8, 3, 1, 1, (1, 1, 1, 1))  # a block of 16 planes of 64 pixels
    lowered = lower_kernel(tensor_passes(compile_to_ir(text), 3), "dw", [(2, 16, 8, 8), (9, 16, 1, 1),
                                                                          (16, 1, 1)])
    symbol = "wia.lib.depthwise.f32."
    declared = [line for line in lowered.llvm_ir.splitlines() if line.startswith("declare") and symbol in line]
    assert len(declared) == 1 and '.k3x3.s1x1.d1x1.p1x1.e8x8x8x8.n16"' in declared[0], declared
    assert not [line for line in lowered.llvm_ir.splitlines() if line.startswith("define") and symbol in line]
    assert [s["geometry"]["planes"] for s in lowered.libraries if s["kind"] == "depthwise"] == [16]
    args = _inputs(text, 2)
    want = run_func(compile_to_ir(text), "dw", args)[0]
    np.testing.assert_allclose(wiadsl.jit(text).dw(*args), want, rtol=1e-5, atol=1e-5)
