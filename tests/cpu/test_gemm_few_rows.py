"""The float gemm helper (backends/llvm/gemm.py) for few rows of A: one row is a
matrix-vector product that streams B in place (``gemv``), fewer than DIRECT_ROW_TILES
x MR rows run the micro-kernel on B's own rows (``direct``) with only a ragged last panel
packed.
Driven through ctypes with leading dimensions past the extents and both values of
``acc``, for two configs (AVX-512- and AVX2-sized), f32 and f64, against NumPy;
and through ``wiadsl.jit`` on odd shapes and strided views."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import wiadsl
from wiadsl.backends.llvm.gemm_config import GemmConfig
from wiadsl.backends.llvm.library import ensure_loaded, loaded_address, symbol
from wiadsl.backends.llvm.target import host

#: the AVX-512- and AVX2-sized configs, where this host can emit them (an AVX2 host
#: refuses 512-bit vectors: ``GemmConfig.check``)
CONFIGS = {bits: GemmConfig(mr=8 if bits == 512 else 6, nv=2, vector_bits=bits)
           for bits in (512, 256) if bits <= host().vector_bits}
GEMM = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * 3), *([ctypes.c_int64] * 6), ctypes.c_bool)


def helper(dtype: str, config: GemmConfig):
    spec = {"kind": "gemm", "dtype": dtype, "config": config.as_dict()}
    ensure_loaded([spec])
    return GEMM(loaded_address(symbol(spec)))


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_few_rows_through_the_helper(dtype: str, config: int) -> None:
    gemm = helper(dtype, CONFIGS[config])
    np_dtype = np.float32 if dtype == "f32" else np.float64
    rtol = 1e-4 if dtype == "f32" else 1e-12
    rng = np.random.default_rng(5)
    cases = 0
    # fewer than DIRECT_ROW_TILES tiles of MR rows (18 and 24) read B in place, then packed;
    # k = 600: two k blocks (the second adds into C)
    # and every tail size below MR (one call of a kernel of exactly those rows)
    for m in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 16, 17, 18, 19, 23, 24, 25):
        for n in (1, 7, 16, 33, 129, 2051):
            for k in (1, 3, 4, 7, 33, 300, 600):
                if (n == 2051 and k > 33) or (k == 600 and n > 33):
                    continue
                for pad, acc in (((0, 0, 0), False), ((3, 5, 2), True)):
                    lda, ldb, ldc = k + pad[0], n + pad[1], n + pad[2]
                    a = rng.standard_normal((m, lda)).astype(np_dtype)
                    b = rng.standard_normal((k, ldb)).astype(np_dtype)
                    c = rng.standard_normal((m, ldc)).astype(np_dtype)
                    before = c.copy()
                    gemm(a.ctypes.data, b.ctypes.data, c.ctypes.data, m, n, k, lda, ldb, ldc, acc)
                    want = a[:, :k] @ b[:, :n] + (before[:, :n] if acc else 0)
                    np.testing.assert_allclose(c[:, :n], want, rtol=rtol, atol=rtol * 10,
                                               err_msg=f"m={m} n={n} k={k} acc={acc}")
                    np.testing.assert_array_equal(c[:, n:], before[:, n:])  # nothing past n
                    cases += 1
    assert cases > 500


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_few_rows_of_a_on_rows_of_b_in_one_l1_set(dtype: str, config: int) -> None:
    """B's rows a multiple of 4 KiB apart (``ldb`` of 1024 f32 or 512 f64, and twice
    that): a panel of more rows than the L1 keeps in one set, read by more than one
    tile, is copied first (``crowded``); fewer rows or one tile read it in place. Both
    sides of each, with ragged panels, two k blocks and ``acc``, against NumPy."""
    gemm = helper(dtype, CONFIGS[config])
    np_dtype = np.float32 if dtype == "f32" else np.float64
    rtol = 1e-4 if dtype == "f32" else 1e-12
    rows = 4096 // np.dtype(np_dtype).itemsize
    rng = np.random.default_rng(11)
    for ldb in (rows, 2 * rows):
        for m in (2, 5, 6, 7, 9, 13, 16, 17):
            for k in (3, 11, 64, 600):
                for n in (ldb, ldb - 5, 40):
                    for acc in (False, True):
                        a = rng.standard_normal((m, k)).astype(np_dtype)
                        b = rng.standard_normal((k, ldb)).astype(np_dtype)
                        c = rng.standard_normal((m, n + 3)).astype(np_dtype)
                        before = c.copy()
                        gemm(a.ctypes.data, b.ctypes.data, c.ctypes.data, m, n, k, k, ldb, n + 3, acc)
                        want = a @ b[:, :n] + (before[:, :n] if acc else 0)
                        np.testing.assert_allclose(c[:, :n], want, rtol=rtol, atol=rtol * 10,
                                                   err_msg=f"ldb={ldb} m={m} n={n} k={k} acc={acc}")
                        np.testing.assert_array_equal(c[:, n:], before[:, n:])


@pytest.mark.parametrize("k,n", [(4100, 70), (600, 1000), (17, 20000), (1030, 257)])
def test_a_long_matrix_vector_product_split_by_rows_of_b(k: int, n: int) -> None:
    """Above GEMV_PARALLEL one row of A splits B's rows over the threads (parts summed
    after): right with padding and ``acc``, and the same bits at 1 and 2 threads (the
    cut is fixed at compile time)."""
    gemm = helper("f32", CONFIGS[max(CONFIGS)])
    rng = np.random.default_rng(k + n)
    for pad, acc in (((0, 0, 0), False), ((3, 5, 2), True)):
        lda, ldb, ldc = k + pad[0], n + pad[1], n + pad[2]
        a = rng.standard_normal((1, lda)).astype(np.float32)
        b = rng.standard_normal((k, ldb)).astype(np.float32)
        start = rng.standard_normal((1, ldc)).astype(np.float32)
        outs = []
        before = wiadsl.get_num_threads()
        try:
            for threads in (1, 2):
                wiadsl.set_num_threads(threads)
                c = start.copy()
                gemm(a.ctypes.data, b.ctypes.data, c.ctypes.data, 1, n, k, lda, ldb, ldc, acc)
                outs.append(c)
        finally:
            wiadsl.set_num_threads(before)
        want = a[:, :k].astype(np.float64) @ b[:, :n] + (start[:, :n] if acc else 0)
        np.testing.assert_allclose(outs[0][:, :n], want, rtol=1e-4, atol=1e-3)
        np.testing.assert_array_equal(outs[0], outs[1])
        np.testing.assert_array_equal(outs[0][:, n:], start[:, n:])


def test_zero_depth_writes_zeros_or_leaves_c() -> None:
    gemm = helper("f32", CONFIGS[max(CONFIGS)])
    for m in (1, 4):
        c = np.full((m, 9), 3.0, np.float32)
        a, b = np.ones((m, 1), np.float32), np.ones((1, 9), np.float32)
        gemm(a.ctypes.data, b.ctypes.data, c.ctypes.data, m, 9, 0, 1, 9, 9, True)
        assert (c == 3.0).all()
        gemm(a.ctypes.data, b.ctypes.data, c.ctypes.data, m, 9, 0, 1, 9, 9, False)
        assert (c == 0.0).all()


MM = """
kernel mm(input A: f32[M, K], input B: f32[K, N], output C: f32[M, N]) { C = A @ B; }
kernel views(input A: f32[M, K], input B: f32[K, N], output C: f32[M, 5]) {
    C = A[:, 1:] @ B[1:, 2:7];
}
"""


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (1, 784, 512), (1, 7, 129), (3, 33, 7), (8, 129, 65),
                                   (1, 4099, 33), (6, 5, 2050), (16, 768, 129), (19, 33, 7)])
def test_few_rows_through_jit(m: int, k: int, n: int) -> None:
    mod = wiadsl.jit(MM, target="cpu")
    rng = np.random.default_rng(m * k + n)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    before = wiadsl.get_num_threads()
    try:
        for threads in (1, 2):  # a column split hands each thread part of the columns
            wiadsl.set_num_threads(threads)
            np.testing.assert_allclose(mod.mm(a, b), a @ b, rtol=1e-4, atol=1e-3)
    finally:
        wiadsl.set_num_threads(before)
    if k > 1 and n >= 7:
        np.testing.assert_allclose(mod.views(a, b), a[:, 1:] @ b[1:, 2:7], rtol=1e-4, atol=1e-3)
