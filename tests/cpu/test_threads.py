"""Sizes that take the native threaded paths: outlined parallel loops (elementwise,
row reductions, softmax rows), the conv2d implicit GEMM split over output pixels,
the gemm column/row split with N blocking, errors raised inside worker threads, the
precompiled helper library in ahead-of-time output, and the native copy-out of
small results on repeated calls."""

from __future__ import annotations

import numpy as np
import pytest

import wiadsl
from wiadsl.backends.llvm import emit_llvm
from wiadsl.backends.llvm.parallel import THREADS
from wiadsl.diagnostics import WiaRuntimeError
from wiadsl.ir import parse_module

SRC = """
import nn;
kernel fused(input a: f32[N], input b: f32[N], input c: f32[N], output y: f32[N]) { y = relu(a * b + c); }
kernel softmax(input x: f32[T, D], output y: f32[T, D]) { y = nn.softmax(x); }
kernel rowsum(input x: f32[T, D], output y: f32[T]) { y = reduce_sum(x, axis=1); }
kernel ipow(input a: i32[N], input b: i32[N], output y: i32[N]) { y = a ** b; }
kernel conv(input x: f32[N, C, H, W], input w: f32[O, C, KH, KW], output y: f32[N, O, P, Q]) {
    y = conv2d(x, w, stride=1, padding=1);
}
kernel conv2(input x: f64[N, C, H, W], input w: f64[O, C, KH, KW], output y: f64[N, O, P, Q]) {
    y = conv2d(x, w, stride=2, padding=0);
}
kernel mm(input A: f32[M, K], input B: f32[K, N], output C: f32[M, N]) { C = A @ B; }
kernel add(input a: f32[N], input b: f32[N], output c: f32[N]) { c = a + b; }
"""

rng = np.random.default_rng(0)


@pytest.fixture(scope="module")
def mod():
    return wiadsl.jit(SRC, target="cpu")


def test_fused_elementwise_threaded(mod):
    n = (1 << 20) + 13  # not a multiple of the chunk alignment
    a, b, c = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
    np.testing.assert_allclose(mod.fused(a, b, c), np.maximum(a * b + c, 0), rtol=1e-6, atol=1e-6)


def test_softmax_and_row_reduction_threaded(mod):
    x = rng.standard_normal((515, 777)).astype(np.float32)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(mod.softmax(x), e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(mod.rowsum(x), x.sum(axis=1), rtol=1e-4, atol=1e-3)


def test_error_in_a_worker_thread_is_reported(mod):
    n = 1 << 20
    a = np.full(n, 2, np.int32)
    b = np.ones(n, np.int32)
    np.testing.assert_array_equal(mod.ipow(a, b), a)
    b[-5] = -1  # in the last chunk: a thread other than the caller's when threaded
    with pytest.raises(WiaRuntimeError, match="negative integer powers"):
        mod.ipow(a, b)


def _conv_ref(x, w, s, p):
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
    win = np.lib.stride_tricks.sliding_window_view(xp, w.shape[2:], axis=(2, 3))[:, :, ::s, ::s]
    return np.einsum("nchwij,ocij->nohw", win, w)


@pytest.mark.parametrize("shape,wshape", [((2, 16, 30, 37), (20, 16, 3, 3)), ((1, 64, 20, 20), (13, 64, 3, 3))])
def test_conv_implicit_gemm_threaded(mod, shape, wshape):
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal(wshape).astype(np.float32)
    np.testing.assert_allclose(mod.conv(x, w), _conv_ref(x, w, 1, 1), rtol=1e-4, atol=1e-3)


def test_conv_strided_f64(mod):
    x = rng.standard_normal((2, 8, 41, 33))
    w = rng.standard_normal((12, 8, 3, 5))
    np.testing.assert_allclose(mod.conv2(x, w), _conv_ref(x, w, 2, 0), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("m,k,n", [(131, 80, 97), (50, 600, 700), (300, 33, 257),
                                   (2000, 300, 40), (777, 129, 63), (97, 577, 1000)])
def test_gemm_row_split_and_column_blocks(mod, m, k, n):
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    np.testing.assert_allclose(mod.mm(a, b), a @ b, rtol=1e-4, atol=1e-3)


def test_threads_constant_is_sane():
    assert 1 <= THREADS <= 8


def test_ahead_of_time_ir_defines_the_library_helpers(mod):
    module = mod.kernels["mm"].ir_for({})
    text = emit_llvm(module, {"mm": [(8, 8), (8, 8)]})
    helpers = [line for line in text.splitlines() if "wia.lib.gemm" in line and line.startswith("define")]
    assert helpers, "the gemm helper must be linked into AOT output"


def test_small_results_are_fresh_arrays_on_every_call(mod):
    a, b = np.arange(5, dtype=np.float32), np.ones(5, np.float32)
    first = mod.add(a, b)
    second = mod.add(a, b)  # takes the native copy-out path
    third = mod.add(b, b)
    np.testing.assert_array_equal(first, a + 1)
    np.testing.assert_array_equal(second, a + 1)
    np.testing.assert_array_equal(third, b + 1)
    assert first is not second and not np.shares_memory(first, second)


def test_copy_out_with_a_parameter_result():
    k = wiadsl.jit("kernel ident(input a: f32[N], output b: f32[N]) { b = a; }", target="cpu")
    a = np.arange(3, dtype=np.float32)
    for _ in range(3):
        r = k.ident(a)
        np.testing.assert_array_equal(r, a)
        assert not np.shares_memory(r, a)


def test_loop_ir_of_a_large_kernel_is_outlined(mod):
    from wiadsl.backends.llvm.compile import lower_kernel, tensor_passes
    module = tensor_passes(mod.kernels["fused"].ir_for({}), 3)
    lowered = lower_kernel(module, "fused", [(1 << 20,)] * 3)
    names = [f.name for f in lowered.loop_ir]
    assert names[0] == "fused" and (THREADS == 1 or "fused.par0" in names)
    parse_module(str(lowered.loop_ir))  # the outlined module stays printable IR
