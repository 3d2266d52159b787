"""Frozen inputs (backends/llvm/prepacked.py): a gemm whose B is an input that never
changes (the ``frozen`` option; ``load_onnx`` passes its weights) packs B once, on
the first call, into the entry's state and reads the panels from there after.

The helpers (``gemm_prepack`` then ``gemm_packed``) through ctypes for both configs
against NumPy; the lowering as LLVM text (which products get a state cell); and
``wiadsl.jit`` on odd shapes, repeated calls, one and two threads, concurrent first
calls, and two kernels of the same code with different weights."""

from __future__ import annotations

import ctypes
import threading

import numpy as np
import pytest

import wiadsl
from wiadsl.backends.llvm.compile import lower_kernel
from wiadsl.backends.llvm.gemm_config import GemmConfig
from wiadsl.backends.llvm.library import ensure_loaded, loaded_address, symbol
from wiadsl.backends.llvm.target import host
from wiadsl.diagnostics import WiaUsageError
from wiadsl.ir import parse_module

CONFIGS = {bits: GemmConfig(mr=8 if bits == 512 else 6, nv=2, vector_bits=bits)
           for bits in (512, 256) if bits <= host().vector_bits}
GEMM = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * 3), *([ctypes.c_int64] * 6), ctypes.c_bool)
PREPACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, *([ctypes.c_int64] * 3))

MATMUL = "kernel mm(input A: f32[M, K], input B: f32[K, N], output C: f32[M, N]) { C = A @ B; }"


def helpers(dtype: str, config: GemmConfig):
    specs = [{"kind": kind, "dtype": dtype, "config": config.as_dict()}
             for kind in ("gemm_prepack", "gemm_packed")]
    ensure_loaded(specs)
    return PREPACK(loaded_address(symbol(specs[0]))), GEMM(loaded_address(symbol(specs[1])))


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_the_packed_helpers_against_numpy(dtype: str, config: int) -> None:
    cfg = CONFIGS[config]
    prepack, gemm = helpers(dtype, cfg)
    np_dtype = np.float32 if dtype == "f32" else np.float64
    nr = cfg.nv * cfg.vector_bits // (8 * np.dtype(np_dtype).itemsize)
    rtol = 1e-4 if dtype == "f32" else 1e-12
    rng = np.random.default_rng(11)
    for m, n, k in [(1, 1, 1), (1, 129, 300), (7, 33, 7), (33, 7, 129), (129, 257, 33),
                    (9, 1000, 600), (2, 16, 0)]:
        pad, acc = (3, 5, 2), m % 2 == 1
        lda, ldb, ldc = k + pad[0], n + pad[1], n + pad[2]
        a = rng.standard_normal((m, lda)).astype(np_dtype)
        b = rng.standard_normal((k, ldb)).astype(np_dtype)
        c = rng.standard_normal((m, ldc)).astype(np_dtype)
        panels = -(-n // nr) * nr * max(k, 1)
        packed = np.full(panels + 16, np.nan, np_dtype)  # NaN: any element read unpacked shows
        base = -packed.ctypes.data % 64 // packed.itemsize  # the 64-byte alignment it promises
        prepack(b.ctypes.data, packed[base:].ctypes.data, n, k, ldb)
        before = c.copy()
        gemm(a.ctypes.data, packed[base:].ctypes.data, c.ctypes.data, m, n, k, lda, ldb, ldc, acc)
        want = a[:, :k] @ b[:, :n] + (before[:, :n] if acc else 0)
        np.testing.assert_allclose(c[:, :n], want, rtol=rtol, atol=rtol * 10,
                                   err_msg=f"m={m} n={n} k={k} acc={acc}")
        np.testing.assert_array_equal(c[:, n:], before[:, n:])  # nothing past n


PRODUCT = """
func @f(%a: tensor<7x33xf32>, %b: tensor<33x129xf32>) -> tensor<7x129xf32> attributes {kernel, outputs = ["y"]} {
^entry:
  %y = tensor.matmul %a, %b : (tensor<7x33xf32>, tensor<33x129xf32>) -> tensor<7x129xf32>
  return %y : tensor<7x129xf32>
}
"""


@pytest.mark.parametrize(("frozen", "cells"), [(frozenset(), 0), (frozenset({0}), 0),
                                                (frozenset({1}), 1)])
def test_only_a_frozen_b_gets_a_state_cell(frozen: frozenset[int], cells: int) -> None:
    lowered = lower_kernel(parse_module(PRODUCT), "f", [[7, 33], [33, 129]], frozen=frozen)
    assert lowered.state_cells == cells
    text = lowered.llvm_ir
    # CHECK (frozen B): the packing once, behind a compare-and-swap, then the packed gemm;
    # CHECK-NOT: the per-call packing gemm
    assert ("@\"wia.lib.gemm_prepack.f32." in text and "cmpxchg" in text) == bool(cells)
    assert ("@\"wia.lib.gemm_packed.f32." in text) == bool(cells)
    assert ("@\"wia.lib.gemm.f32." in text) != bool(cells)
    # CHECK (frozen B): the packing's allocation is checked before the packing writes
    packing = text[text.find("prepack:"):text.find("@\"wia.lib.gemm_prepack.f32.")]
    assert ("@\"aligned_alloc\"" in packing and "null" in packing) == bool(cells)
    assert ("out of memory packing a weight" in str(lowered.messages)) == bool(cells)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shapes", ["static", "generic"])
def test_frozen_weights_on_odd_shapes(threads: int, shapes: str) -> None:
    before = wiadsl.get_num_threads()
    wiadsl.set_num_threads(threads)
    try:
        rng = np.random.default_rng(threads)
        for m, k, n in [(1, 512, 512), (7, 33, 129), (33, 129, 7), (129, 7, 33), (1, 1, 1),
                        (64, 300, 1000)]:
            f = wiadsl.jit(MATMUL, "mm", frozen=(1,), shapes=shapes)
            b = rng.standard_normal((k, n), np.float32)
            for _ in range(3):  # the first call packs, the next ones read the packing
                a = rng.standard_normal((m, k), np.float32)
                np.testing.assert_allclose(f(a, b), a @ b, rtol=1e-4, atol=1e-4 * k,
                                           err_msg=f"m={m} k={k} n={n}")
    finally:
        wiadsl.set_num_threads(before)


def test_kernels_of_one_code_keep_their_own_weights() -> None:
    rng = np.random.default_rng(3)
    a = rng.standard_normal((5, 64), np.float32)
    weights = [rng.standard_normal((64, 48), np.float32) for _ in range(3)]
    kernels = [wiadsl.jit(MATMUL, "mm", frozen=(1,), shapes="static") for _ in weights]
    for _ in range(2):
        for f, w in zip(kernels, weights):
            np.testing.assert_allclose(f(a, w), a @ w, rtol=1e-4, atol=1e-3)


def test_concurrent_first_calls_share_one_packing() -> None:
    rng = np.random.default_rng(4)
    f = wiadsl.jit(MATMUL, "mm", frozen=(1,), shapes="static")
    b = rng.standard_normal((200, 300), np.float32)
    inputs = [rng.standard_normal((9, 200), np.float32) for _ in range(8)]
    results: list[np.ndarray | None] = [None] * len(inputs)
    barrier = threading.Barrier(len(inputs))

    def call(i: int) -> None:
        barrier.wait()
        for _ in range(5):
            results[i] = f(inputs[i], b)
    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads)
    for a, y in zip(inputs, results):
        np.testing.assert_allclose(y, a @ b, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("bad", ["1", (1.0,), (-1,), (True,)])
def test_a_bad_frozen_option_names_it(bad: object) -> None:
    f = wiadsl.jit(MATMUL, "mm", frozen=bad)
    with pytest.raises(WiaUsageError, match="option 'frozen'"):
        f(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32))
