"""The int8 GEMM on a B packed once (backends/llvm/prepacked.py, qgemm.py ``prepack``):
a kernel whose B is a frozen input (the ``frozen`` option; ``load_onnx`` freezes a
QDQ model's int8 weights) packs every k block of B (VNNI: with each block's column
sums) on the first call and the ``packed`` driver reads them. Both kernel variants
this host can run (so a VNNI host checks the pmaddwd layout too) through ctypes on
odd shapes and several k blocks, exactly against NumPy; then through ``wiadsl.jit``."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from llvmlite import ir

import wiadsl
from wiadsl.backends.llvm.library import ensure_loaded
from wiadsl.backends.llvm.loader import symbol_address
from wiadsl.backends.llvm.qgemm import ARGS, qgemm_builder
from wiadsl.backends.llvm.qgemm_vnni import vnni_bits
from wiadsl.backends.llvm.target import host, load_module, optimize, parse_and_verify

VARIANTS = {"pmaddwd": "+avx2"}
if vnni_bits(host().features) >= 256:
    VARIANTS["vnni256"] = "+avx512vnni,+avx512vl"
if vnni_bits(host().features) == 512:
    VARIANTS["vnni512"] = "+avx512vnni,+avx512bw"
PREPACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, *([ctypes.c_int64] * 3))
QGEMM = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * 3), *([ctypes.c_int64] * 6))
SIZE = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)


def probe(variant: str):
    """(packed bytes, prepack, packed qgemm) of ``variant``, compiled in one module."""
    mod = ir.Module(name=f"qgemm_prepacked_{variant}")
    mod.triple = host().triple
    libraries: list = []  # the helpers it calls (its packing buffers: scratch.py)
    builder = qgemm_builder(mod, VARIANTS[variant], libraries)
    names = [f"wia_probe_{variant}_{what}" for what in ("size", "prepack", "qgemm")]
    size = ir.Function(mod, ir.FunctionType(ir.IntType(64), [ir.IntType(64)] * 2), names[0])
    b = ir.IRBuilder(size.append_basic_block("entry"))
    b.ret(builder.packed_bytes(b, *size.args))
    for name, callee, types in ((names[1], builder.prepack(), [ir.PointerType(ir.IntType(8))] * 2
                                 + [ir.IntType(64)] * 3), (names[2], builder.driver(True), ARGS)):
        fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), types), name)
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        b.call(callee, list(fn.args))
        b.ret_void()
    llmod = parse_and_verify(str(mod))
    optimize(llmod, 3)
    ensure_loaded(libraries)
    first = load_module(llmod, names[0])
    return SIZE(first), PREPACK(symbol_address(names[1])), QGEMM(symbol_address(names[2]))


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_prepacked_qgemm_against_numpy(variant: str) -> None:
    size, prepack, qgemm = probe(variant)
    rng = np.random.default_rng(23)
    for m, n, k in [(1, 1, 1), (1, 19, 4), (7, 33, 129), (33, 7, 3), (70, 129, 33),
                    (5, 40, 2100), (4, 16, 0)]:  # 2100: several k blocks of either layout
        lda, ldb, ldc = k + 3, n + 5, n + 1
        a = rng.integers(-128, 128, (m, lda), dtype=np.int8)
        b = rng.integers(-128, 128, (k, ldb), dtype=np.int8)
        a[:, :1], b[:1, :] = -128, -128
        nbytes = size(n, k)
        packed = np.full(nbytes + 64, 0x55, np.uint8)  # junk the packing must overwrite
        base = -packed.ctypes.data % 64
        prepack(b.ctypes.data, packed.ctypes.data + base, n, k, ldb)
        c = np.full((m, ldc), -7, np.int32)
        qgemm(a.ctypes.data, packed.ctypes.data + base, c.ctypes.data, m, n, k, lda, ldb, ldc)
        want = a[:, :k].astype(np.int32) @ b[:, :n].astype(np.int32)
        np.testing.assert_array_equal(c[:, :n], want, err_msg=f"{variant} m={m} n={n} k={k}")
        assert (c[:, n:] == -7).all()


def test_frozen_int8_weights_through_the_jit() -> None:
    src = ("kernel qm(input A: i8[M, K], input B: i8[K, N], output C: i32[M, N]) "
           "{ C = cast(A, i32) @ cast(B, i32); }")
    rng = np.random.default_rng(29)
    for m, k, n in [(1, 4, 19), (7, 33, 129), (129, 7, 33), (64, 1100, 100)]:
        f = wiadsl.jit(src, "qm", frozen=(1,))
        b = rng.integers(-128, 128, (k, n), dtype=np.int8)
        for _ in range(3):
            a = rng.integers(-128, 128, (m, k), dtype=np.int8)
            np.testing.assert_array_equal(f(a, b), a.astype(np.int32) @ b.astype(np.int32))
