"""nvcc -O3 PTX of CUDA C kernels, simulated on small odd shapes and compared with NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from tests.reference.numpy_ref import round_to_tf32
from wiadsl.backends.ptx.sim import launch

RNG = np.random.default_rng(0)


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def blocks(n, bs):
    return max(1, (n + bs - 1) // bs)


@pytest.mark.parametrize("n", [1, 7, 33, 129])
def test_vadd(cuda_ptx, n):
    a, b, c = f32(n), f32(n), np.zeros(n, np.float32)
    launch(cuda_ptx, "vadd", blocks(n, 64), 64, [a, b, c, n])
    np.testing.assert_array_equal(c, a + b)


@pytest.mark.parametrize("n", [1, 7, 33, 130])
def test_vadd4_vector_loads(cuda_ptx, n):
    a, b, c = f32(n), f32(n), np.zeros(n, np.float32)
    launch(cuda_ptx, "vadd4", blocks((n + 3) // 4, 32), 32, [a, b, c, n])
    np.testing.assert_array_equal(c, a + b)


@pytest.mark.parametrize("n,grid,block", [(1, 1, 32), (7, 2, 32), (129, 2, 64), (1000, 3, 96)])
def test_relu_fma_grid_stride(cuda_ptx, n, grid, block):
    a, b, c, o = f32(n), f32(n), f32(n), np.zeros(n, np.float32)
    launch(cuda_ptx, "relu_fma", grid, block, [a, b, c, o, n])
    np.testing.assert_allclose(o, np.maximum(a * b + c, 0), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("rows,cols,block", [(1, 1, 32), (7, 33, 64), (3, 129, 128), (5, 1000, 96)])
def test_row_softmax(cuda_ptx, rows, cols, block):
    x, y = f32(rows, cols) * 3, np.zeros((rows, cols), np.float32)
    launch(cuda_ptx, "softmax", rows, block, [x, y, rows, cols])
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=2e-5, atol=1e-7)


@pytest.mark.parametrize("n,grid", [(1, 1), (33, 2), (129, 3), (5000, 4)])
def test_reduction_sum_with_atomics(cuda_ptx, n, grid):
    x, out = f32(n), np.zeros(1, np.float32)
    launch(cuda_ptx, "rsum", grid, 256, [x, out, n])
    np.testing.assert_allclose(out[0], x.astype(np.float64).sum(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (33, 65, 47), (64, 64, 64), (65, 33, 17)])
def test_tiled_matmul(cuda_ptx, m, n, k):
    a, b, c = f32(m, k), f32(k, n), np.zeros((m, n), np.float32)
    launch(cuda_ptx, "matmul", (blocks(n, 64), blocks(m, 64)), 256, [a, b, c, m, n, k])
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_matmul_speed(cuda_ptx):
    """The tiled matmul runs vectorized: each simulator step executes one instruction
    for many threads at once. Lane-instructions per step, not seconds, so the check
    holds on any machine under any load; a de-vectorised executor (a step per thread
    or per warp) falls far below the floor."""
    m = n = k = 129
    a, b, c = f32(m, k), f32(k, n), np.zeros((m, n), np.float32)
    st = launch(cuda_ptx, "matmul", (3, 3), 256, [a, b, c, m, n, k])
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    assert st.thread_instructions > 10_000_000
    assert st.thread_instructions / st.steps > 256, st


@pytest.mark.parametrize("n", [1, 7, 33, 129])
def test_f16_bf16_conversions(cuda_ptx, n):
    x = (f32(n) * 1000).astype(np.float32)
    x[0] = 70000.0  # overflows f16 → inf
    h = np.zeros(n, np.float16)
    back, bfback = np.zeros(n, np.float32), np.zeros(n, np.float32)
    bf = np.zeros(n, np.uint16)
    launch(cuda_ptx, "f16conv", blocks(n, 64), 64, [x, h, back, bf, bfback, n])
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(h, x.astype(np.float16))
        np.testing.assert_array_equal(back, (x.astype(np.float16) * np.float16(2)).astype(np.float32))
    u = x.view(np.uint32).astype(np.uint64)
    ref = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    np.testing.assert_array_equal(bf, ref)
    np.testing.assert_array_equal(bfback, (ref.astype(np.uint32) << 16).view(np.float32) * 2)


@pytest.mark.parametrize("n", [1, 7, 33, 129])
def test_int8_dot_and_quantize(cuda_ptx, n):
    a = RNG.integers(-128, 128, 4 * n).astype(np.int8)
    b = RNG.integers(-128, 128, 4 * n).astype(np.int8)
    out, q = np.zeros(n, np.int32), np.zeros(n, np.int8)
    f = f32(n) * 20
    launch(cuda_ptx, "i8dot", blocks(n, 32), 32, [a, b, out, f, q, n])
    ref = (a.reshape(n, 4).astype(np.int32) * b.reshape(n, 4)).sum(1) + a[:n].astype(np.int32) * b[:n]
    np.testing.assert_array_equal(out, ref)
    np.testing.assert_array_equal(q, np.clip(np.rint(f * np.float32(10)), -128, 127).astype(np.int8))


def _diverge_ref(v: int) -> int:
    def wrap(x):
        x &= 0xFFFFFFFF
        return x - (1 << 32) if x >= 1 << 31 else x

    r = int(np.fmod(v, 3))
    if r == 0:
        k = 0
        while k < int(np.fmod(v, 7)):
            v, k = wrap(v * 3 + 1), k + 1
        return v
    if r == 1:
        return wrap(-v)
    u = v & 0xFFFFFFFF
    return wrap(bin(u).count("1") + (32 - u.bit_length()) + int(f"{u:032b}"[::-1], 2))


@pytest.mark.parametrize("n", [1, 7, 33, 129])
def test_divergent_branches(cuda_ptx, n):
    x = RNG.integers(-1000, 1000, n).astype(np.int32)
    y = np.zeros(n, np.int32)
    launch(cuda_ptx, "diverge", blocks(n, 96), 96, [x, y, n])
    np.testing.assert_array_equal(y, [_diverge_ref(int(v)) for v in x])


def test_warp_shuffles_and_votes(cuda_ptx):
    n, nt = 100, 128
    x = RNG.integers(-1000, 1000, n).astype(np.int32)
    outs = [np.zeros(nt, np.int32) for _ in range(4)]
    ballot, votes = np.zeros(nt, np.uint32), np.zeros(nt, np.int32)
    launch(cuda_ptx, "warp_ops", 2, 64, [x, *outs, ballot, votes, n])
    v = np.zeros(nt, np.int64)
    v[:n] = x
    lane = np.arange(nt) % 32
    base = np.arange(nt) - lane
    seg16 = lane % 16
    up = np.where(seg16 >= 3, v[np.arange(nt) - 3 * (seg16 >= 3)], v)
    down = np.where(lane + 5 < 32, v[np.minimum(np.arange(nt) + 5, nt - 1)], v)
    idx = v[base + (lane // 8) * 8 + ((lane * 7) % 32) % 8]
    xr = v[base + (lane ^ 9)]
    for got, ref in zip(outs, (up, down, idx, xr)):
        np.testing.assert_array_equal(got, ref)
    warps = v.reshape(-1, 32)
    bal = [(sum(1 << i for i in range(32) if w[i] > 0)) for w in warps]
    np.testing.assert_array_equal(ballot, np.repeat(bal, 32))
    vo = [2 * int((w > 900).any()) + int((w > -900).all()) for w in warps]
    np.testing.assert_array_equal(votes, np.repeat(vo, 32))


@pytest.mark.parametrize("n,bs", [(1, 32), (77, 32), (200, 64)])
def test_shared_atomics(cuda_ptx, n, bs):
    x = RNG.integers(-10_000, 10_000, n).astype(np.int32)
    g = blocks(n, bs)
    out = np.zeros(3 + g, np.int32)
    out[0], out[1] = np.iinfo(np.int32).min, np.iinfo(np.int32).max
    launch(cuda_ptx, "shared_atomics", g, bs, [x, out, n])
    assert (out[0], out[1], out[2]) == (x.max(), x.min(), x.sum())
    for b in range(g):
        assert b * bs + 1 <= out[3 + b] <= min(n, (b + 1) * bs)


@pytest.mark.parametrize("trans_b", [0, 1])
def test_mma_f16_with_ldmatrix_and_cp_async(cuda_ptx, trans_b):
    a = f32(16, 16).astype(np.float16)
    b = f32(16, 8).astype(np.float16)
    c = np.zeros((16, 8), np.float32)
    launch(cuda_ptx, "mma_f16", 1, 32, [a, b, c, trans_b])
    np.testing.assert_allclose(c, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-5, atol=1e-5)


def _bf16(x):
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def test_mma_bf16_m16n8k8(cuda_ptx):
    a, bt = _bf16(f32(16, 8)), _bf16(f32(8, 8))
    cin = f32(16, 8)
    c = np.zeros((16, 8), np.float32)
    launch(cuda_ptx, "mma_bf16", 1, 32, [a, bt, cin, c])

    def val(u):
        return (u.astype(np.uint32) << 16).view(np.float32)

    np.testing.assert_allclose(c, val(a) @ val(bt).T + cin, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("sat", [0, 1])
def test_mma_s8_m16n8k32_exact(cuda_ptx, sat):
    a = RNG.integers(-128, 128, (16, 32)).astype(np.int8)
    bt = RNG.integers(-128, 128, (8, 32)).astype(np.int8)
    cin = RNG.integers(-2**20, 2**20, (16, 8)).astype(np.int32)
    a[0], bt[0], bt[1] = 127, 127, -128  # C[0, 0] += 32 * 127^2, C[0, 1] -= 32 * 127 * 128
    cin[0, :2] = [2**31 - 100, -2**31 + 100]  # past the s32 range: wraps, or saturates
    c = np.zeros((16, 8), np.int32)
    launch(cuda_ptx, "mma_s8", 1, 32, [a, bt, cin, c, sat])
    full = a.astype(np.int64) @ bt.T.astype(np.int64) + cin
    want = np.clip(full, -2**31, 2**31 - 1) if sat else (full + 2**31) % 2**32 - 2**31
    assert (full[0, :2] != want[0, :2]).all()  # the corner case did leave the range
    np.testing.assert_array_equal(c, want)


def test_mma_tf32_m16n8k8(cuda_ptx):
    a, b, cin = f32(16, 8), f32(8, 8), f32(16, 8)
    c = np.zeros((16, 8), np.float32)
    launch(cuda_ptx, "mma_tf32", 1, 32, [a, b, cin, c])
    want = round_to_tf32(a).astype(np.float64) @ round_to_tf32(b) + cin
    np.testing.assert_allclose(c, want, rtol=1e-6, atol=1e-6)
    assert np.abs(c - (a.astype(np.float64) @ b + cin)).max() > 1e-5  # inputs were rounded


def test_cvt_rnaround_to_tf32(cuda_ptx):
    bits = np.array([0x3F800FFF, 0x3F801000, 0xBF801000, 0x3F802FFF, 0x7F7FFFFF, 0x00001000,
                     0x7F800000, 0xFF800000], np.uint32)
    x = np.concatenate([bits.view(np.float32), f32(33)])
    y = np.zeros(len(x), np.uint32)
    launch(cuda_ptx, "to_tf32", 2, 32, [x, y, len(x)])
    # ties away from zero, a carry into the exponent, overflow to inf, subnormals, infinities
    assert list(y[:8]) == [0x3F800000, 0x3F802000, 0xBF802000, 0x3F802000, 0x7F800000,
                           0x00002000, 0x7F800000, 0xFF800000]
    np.testing.assert_array_equal(y[8:].view(np.float32), round_to_tf32(x[8:]))
    y2 = np.zeros(1, np.uint32)
    launch(cuda_ptx, "to_tf32", 1, 32, [np.array([np.nan], np.float32), y2, 1])
    assert np.isnan(y2.view(np.float32)[0])


def test_big_grid_vector_add_runs_all_threads_in_lockstep(cuda_ptx):
    """A 4×64 grid of 128 threads (32768 threads) takes as many simulator steps as one
    block does: every thread advances in the same NumPy step (the structure that makes
    it fast; no wall-clock assertion, which would depend on the machine's load)."""
    n = 4 * 64 * 128 - 5
    a, b, c = f32(n), f32(n), np.zeros(n, np.float32)
    st = launch(cuda_ptx, "vadd", (64, 4), 128, [a, b, c, n])
    one = launch(cuda_ptx, "vadd", 1, 128, [a, b, np.zeros(n, np.float32), n])
    assert st.steps <= 2 * one.steps
    assert st.thread_instructions > 200 * one.thread_instructions
    np.testing.assert_array_equal(c[: 64 * 128], (a + b)[: 64 * 128])
