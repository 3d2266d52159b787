"""The int8 GEMM on a B packed once (backends/llvm/prepacked.py, qgemm.py ``prepack``):
a kernel whose B is a frozen input (the ``frozen`` option; ``load_onnx`` freezes a
QDQ model's int8 weights) packs every k block of B (VNNI: with each block's column
sums) on the first call and the ``packed`` driver reads them. Every kernel variant
this host can run (so a VNNI host checks the AVX2 layouts too) through ctypes on odd
shapes and several k blocks, exactly against NumPy, with B of full 8-bit range and
B of 7-bit weights (AVX2: qgemm_narrow.py's ``vpmaddubsw`` kernel, chosen at packing
time, and its range check at the edges); then through ``wiadsl.jit``."""

from __future__ import annotations

import ctypes
from itertools import product

import numpy as np
import pytest
from llvmlite import ir

import wiadsl
from wiadsl.backends.llvm.library import ensure_loaded
from wiadsl.backends.llvm.loader import symbol_address
from wiadsl.backends.llvm.qgemm import ARGS, qgemm_builder
from wiadsl.backends.llvm.qgemm_vnni import vnni_bits
from wiadsl.backends.llvm.target import host, load_module, optimize, parse_and_verify

VARIANTS = {"avx2": "+avx2"}
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


def random_b(rng: np.random.Generator, k: int, ldb: int, n: int, weights: str) -> np.ndarray:
    """B of ``weights``: "full" 8-bit values (-128 in its first row), "narrow" ones in
    [-64, 64] with both ends present (the widest the narrow kernel takes: its i16 pair
    sums reach +-32640), or "one_wide": narrow but for one -65 (and junk outside n)."""
    if weights == "full":
        b = rng.integers(-128, 128, (k, ldb), dtype=np.int8)
        b[:1, :] = -128
        return b
    b = rng.integers(-64, 65, (k, ldb), dtype=np.int8)
    b[:, n:] = -128  # past column n: never read, so it must not make B wide
    if k:
        b[0, :n], b[-1, :n] = 64, -64
        if weights == "one_wide":
            b[k // 2, n - 1] = -65
    return b


@pytest.mark.parametrize("weights", ["full", "narrow", "one_wide"])
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_prepacked_qgemm_against_numpy(variant: str, weights: str) -> None:
    size, prepack, qgemm = probe(variant)
    rng = np.random.default_rng(23)
    for m, n, k in [(1, 1, 1), (1, 19, 4), (7, 33, 129), (33, 7, 3), (70, 129, 33),
                    (5, 40, 2100), (4, 16, 0)]:  # 2100: several k blocks of either layout
        lda, ldb, ldc = k + 3, n + 5, n + 1
        a = rng.integers(-128, 128, (m, lda), dtype=np.int8)
        b = random_b(rng, k, ldb, n, weights)
        a[:, :1], a[:, 1:2] = -128, 127  # the ends of A (u8 0 and 255 once shifted)
        nbytes = size(n, k)
        packed = np.full(nbytes + 64, 0x55, np.uint8)  # junk the packing must overwrite
        base = -packed.ctypes.data % 64
        prepack(b.ctypes.data, packed.ctypes.data + base, n, k, ldb)
        c = np.full((m, ldc), -7, np.int32)
        qgemm(a.ctypes.data, packed.ctypes.data + base, c.ctypes.data, m, n, k, lda, ldb, ldc)
        want = a[:, :k].astype(np.int32) @ b[:, :n].astype(np.int32)
        np.testing.assert_array_equal(c[:, :n], want, err_msg=f"{variant} m={m} n={n} k={k}")
        assert (c[:, n:] == -7).all()


def test_avx2_chooses_the_layout_from_the_weights() -> None:
    """The AVX2 prepack's header word: 1 (narrow: vpmaddubsw's quads) exactly when
    every value of B's k x n lies in [-64, 64]."""
    size, prepack, _ = probe("avx2")
    rng = np.random.default_rng(5)
    for weights, k, want in [("narrow", 33, 1), ("one_wide", 33, 0), ("full", 33, 0), ("narrow", 0, 1)]:
        b = random_b(rng, k, 24, 19, weights)
        packed = np.zeros(size(19, k) + 64, np.uint8)
        base = -packed.ctypes.data % 64
        prepack(b.ctypes.data, packed.ctypes.data + base, 19, k, 24)
        assert packed[base:base + 8].view(np.int64)[0] == want, (weights, k)


def test_avx2_narrow_kernel_is_vpmaddubsw() -> None:
    """CHECK: the AVX2 module's narrow micro-kernel multiplies with vpmaddubsw and sums
    pairs with vpmaddwd; the wide one keeps vpmaddwd on i16 pairs (no vpmaddubsw).
    Emitted for an AVX2 CPU without VNNI (Haswell), whatever this host is: with VNNI,
    LLVM may fuse a vpmaddwd and its add into vpdpwssd."""
    import llvmlite.binding as llvm
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    haswell = llvm.Target.from_triple(host().triple).create_target_machine(cpu="haswell", opt=3)
    mod = ir.Module(name="qgemm_narrow_asm")
    mod.triple = host().triple
    builder = qgemm_builder(mod, "+avx2", [])
    for kernel in (builder.ukernel(4), builder.narrow.ukernel(4)):
        kernel.linkage = "external"
    asm = haswell.emit_assembly(parse_and_verify(str(mod)))
    def body(name: str) -> str:  # from the function's label to its end
        return asm.split(f"\n{name}:")[1].split(".Lfunc_end")[0]
    narrow, wide = body("wia.qgemm.maddubs256.ukernel.4"), body("wia.qgemm.ukernel.4")
    assert narrow.count("vpmaddubsw") >= 8 and narrow.count("vpmaddwd") >= 8
    assert "vpmaddubsw" not in wide and wide.count("vpmaddwd") >= 8


def test_frozen_int8_weights_through_the_jit() -> None:
    src = ("kernel qm(input A: i8[M, K], input B: i8[K, N], output C: i32[M, N]) "
           "{ C = cast(A, i32) @ cast(B, i32); }")
    rng = np.random.default_rng(29)
    shapes = [(1, 4, 19), (7, 33, 129), (129, 7, 33), (64, 1100, 100)]
    for (m, k, n), (low, high) in product(shapes, [(-128, 128), (-64, 65)]):  # 8 or 7-bit weights
        f = wiadsl.jit(src, "qm", frozen=(1,))
        b = rng.integers(low, high, (k, n), dtype=np.int8)
        for _ in range(3):
            a = rng.integers(-128, 128, (m, k), dtype=np.int8)
            np.testing.assert_array_equal(f(a, b), a.astype(np.int32) @ b.astype(np.int32))
