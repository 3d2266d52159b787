"""``wiadsl.jit(..., target="cpu", loop_pipeline=...)``: the loop transformations run
natively (after the default loop passes, outlined parallel bodies included) and the
kernels still match NumPy; bad pipelines fail when the kernel is compiled."""

from __future__ import annotations

import numpy as np
import pytest

import wiadsl
from wiadsl.diagnostics import WiaUsageError

SRC = """
import nn;
kernel chain(input a: f32[M, N], input b: f32[N], output y: f32[M, N]) { y = relu(a * b + 1.0); }
kernel rowsum(input x: f32[T, D], output y: f32[T]) { y = reduce_sum(x, axis=1); }
kernel softmax(input x: f32[T, D], output y: f32[T, D]) { y = nn.softmax(x); }
kernel mm(input A: f32[M, K], input B: f32[K, N], output C: f32[M, N]) { C = A @ B; }
kernel imm(input A: i32[M, K], input B: i32[K, N], output C: i32[M, N]) { C = A @ B; }
kernel tr(input x: f32[M, N], output y: f32[N, M]) { y = exp(transpose(x)); }
kernel dot(input a: f32[N], input b: f32[N], output s: f32) {
    acc = 0.0;
    for i in range(N) { acc = acc + a[i] * b[i]; }
    s = acc;
}
kernel imax(input a: i32[N], output s: i32) {
    best = -1000;
    for i in range(N) { best = max(best, a[i]); }
    s = best;
}
"""

PIPELINES = [
    "unroll{factor=4}",
    "tile{size=8}",
    "tile{size=4,interchange=true}",
    "split-accumulators{count=4}",
    "pipeline-loads",
    "pipeline-loads,split-accumulators{count=2},tile{size=16},unroll{factor=3}",
]
TOL = {"rtol": 1e-4, "atol": 1e-4}


@pytest.fixture(scope="module", params=PIPELINES)
def mod(request):
    return wiadsl.jit(SRC, target="cpu", loop_pipeline=request.param)


rng = np.random.default_rng(0)


@pytest.mark.parametrize("m,n", [(7, 33), (1, 129), (3, 0)])
def test_elementwise_and_transpose(mod, m, n):
    a = rng.standard_normal((m, n)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    np.testing.assert_allclose(mod.chain(a, b), np.maximum(a * b + 1, 0), **TOL)
    np.testing.assert_allclose(mod.tr(a), np.exp(a.T), **TOL)


@pytest.mark.parametrize("t,d", [(5, 129), (3, 7), (4, 0)])
def test_row_reductions(mod, t, d):
    x = rng.standard_normal((t, d)).astype(np.float32)
    np.testing.assert_allclose(mod.rowsum(x), x.sum(axis=1), **TOL)
    if d:
        e = np.exp(x - x.max(axis=1, keepdims=True))
        np.testing.assert_allclose(mod.softmax(x), e / e.sum(axis=1, keepdims=True), **TOL)


def test_matmul_small(mod):
    a = rng.standard_normal((5, 7)).astype(np.float32)
    b = rng.standard_normal((7, 3)).astype(np.float32)
    np.testing.assert_allclose(mod.mm(a, b), a @ b, **TOL)
    ia = rng.integers(-9, 10, (5, 33)).astype(np.int32)
    ib = rng.integers(-9, 10, (33, 6)).astype(np.int32)
    np.testing.assert_array_equal(mod.imm(ia, ib), ia @ ib)


@pytest.mark.parametrize("n", [0, 1, 7, 33, 129, 1000])
def test_user_loops_with_carried_values(mod, n):
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    np.testing.assert_allclose(mod.dot(a, b), np.dot(a.astype(np.float64), b), rtol=1e-4, atol=1e-4)
    ia = rng.integers(-500, 500, n).astype(np.int32)
    assert mod.imax(ia) == max([-1000, *ia.tolist()])


def test_pipelines_do_not_share_a_cache_entry(fresh_cache):
    from wiadsl.backends.llvm.backend import CpuKernel
    from wiadsl.frontend.compile import compile_source

    def kernel(pipeline: str) -> CpuKernel:
        return CpuKernel(compile_source(SRC, "<t>").lower_kernel("dot", {}), "dot", loop_pipeline=pipeline)
    a = np.arange(9, dtype=np.float32)
    sources = []
    for pipeline in ("", "unroll{factor=4}", "split-accumulators{count=4}", "unroll{factor=4}"):
        k = kernel(pipeline)
        assert k.run([a, a])[0] == np.float32(204)
        sources.append(k.stats["cache"])
    assert sources[:3] == ["compiled"] * 3 and sources[3] != "compiled"


def test_bad_pipelines_are_usage_errors():
    x = np.ones((2, 3), np.float32)
    with pytest.raises(WiaUsageError, match="unknown loop pass 'unrol'"):
        wiadsl.jit(SRC, target="cpu", loop_pipeline="unrol").rowsum(x)
    with pytest.raises(WiaUsageError, match="factor"):
        wiadsl.jit(SRC, target="cpu", loop_pipeline="unroll{factor=0}").rowsum(x)
    with pytest.raises(WiaUsageError, match="loop_pipeline"):
        wiadsl.jit(SRC, target="cpu", loop_pipeline=4).rowsum(x)
