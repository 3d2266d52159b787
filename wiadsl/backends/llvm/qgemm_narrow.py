"""The int8 GEMM on an AVX2 host without VNNI, for a B packed once (a model's weights)
whose values all lie in [-64, 64]: ``vpmaddubsw``, 32 u8 x s8 products per
instruction, where qgemm.py's exact ``pmaddwd`` does 16.

Why narrow: ``vpmaddubsw`` sums each *pair* of u8 x s8 products into an i16 that
saturates. With A as u8 (``a + 128``, qgemm_vnni.py's compensation) a pair sum is at
most 2 * 255 * |b| in magnitude, which fits i16 (32767) exactly when |b| <= 64. That
is the 7-bit weight range ONNX Runtime advises (``reduce_range``) because its own
AVX2 u8s8 kernel saturates 8-bit ones; ours stays exact for every B by looking:

    prepack(B, P, n, k, ldb):     P[0] = all of B in [-64, 64]; B packed after a
                                  64-byte header: as qgemm_vnni.py's quads when narrow
                                  (with the column sums), else as qgemm.py's i16 pairs
    qgemm.packed(A, P, ...):      the quads' kernel (vpmaddubsw, then vpmaddwd with
                                  ones into i32) when P[0] says narrow, else pmaddwd

A B given per call (not prepacked) keeps qgemm.py's kernel: checking its range every
call would cost a pass over B, and B's values are unknown when the code is chosen.

Invariants:
- Exact like qgemm.py: the narrow kernel runs only on a B that ``prepack`` checked;
  its column sums (128 * b per pair: at most 2 * 128 * 128 = 32768 in magnitude, and
  only -32768 reaches it) never saturate, whatever B holds.
- Chosen only on a host with AVX2 and no VNNI (``qgemm_builder``): VNNI's ``vpdpbusd``
  sums in i32 and needs none of this.
"""

from __future__ import annotations

from llvmlite import ir

from .gemm import _i, imax, k_loop
from .qgemm import ARGS, I16, QGemmBuilder, _declare
from .qgemm_vnni import VnniQGemmBuilder
from .runtime import vector_load
from .types import I8, I32, I64, PREPACK_TYPE, zeros

#: the largest |b| the narrow kernel is exact for (2 * 255 * 64 <= 32767)
NARROW_LIMIT = 64
#: bytes before the packed B: its first i64 says which layout follows (1: narrow)
HEADER = 64

V32B = ir.VectorType(I8, 32)
V16S = ir.VectorType(I16, 16)


class MaddubsQGemmBuilder(VnniQGemmBuilder):
    """qgemm_vnni.py's 256-bit kernel with each ``vpdpbusd`` as ``vpmaddubsw`` (pairs
    into i16) and ``vpmaddwd`` with ones (pairs of pairs into i32), added."""

    def __init__(self, mod: ir.Module, libraries: list | None = None):
        super().__init__(mod, 256, libraries)
        self.tag = "maddubs256"

    def dot_add(self, b: ir.IRBuilder, acc: ir.Value, x: ir.Value, y: ir.Value) -> ir.Value:
        ubsw = _declare(self.mod, "llvm.x86.avx2.pmadd.ub.sw", V16S, [V32B, V32B])
        wd = _declare(self.mod, "llvm.x86.avx2.pmadd.wd", self.vt, [V16S, V16S])
        pairs = b.call(ubsw, [b.bitcast(x, V32B), b.bitcast(y, V32B)])
        return b.add(acc, b.call(wd, [pairs, ir.Constant(V16S, [1] * 16)]))


class NarrowWeightQGemmBuilder(QGemmBuilder):
    """qgemm.py's kernel, with a prepacked B that ``prepack`` found narrow run by
    ``MaddubsQGemmBuilder``'s (module docstring)."""

    def __init__(self, mod: ir.Module, libraries: list | None = None):
        super().__init__(mod, libraries)
        self.narrow = MaddubsQGemmBuilder(mod, libraries)

    def packed_bytes(self, b: ir.IRBuilder, n: ir.Value, k: ir.Value) -> ir.Value:
        wide = super().packed_bytes(b, n, k)
        return b.add(_i(HEADER), imax(b, wide, self.narrow.packed_bytes(b, n, k)))

    def prepack(self) -> ir.Function:
        name = "wia.qgemm.narrowable.prepack"
        if name in self.mod.globals:
            return self.mod.globals[name]
        wide_prepack, narrow_prepack = super().prepack(), self.narrow.prepack()
        fn = ir.Function(self.mod, PREPACK_TYPE, name)
        fn.linkage = "internal"
        bm, packed, n, k, ldb = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        narrow = self.all_narrow(b, bm, n, k, ldb)
        b.store(b.zext(narrow, I64), packed)
        body = b.gep(packed, [_i(HEADER)], source_etype=I8)
        with b.if_else(narrow) as (then, other):
            with then:
                b.call(narrow_prepack, [bm, body, n, k, ldb])
            with other:
                b.call(wide_prepack, [bm, body, n, k, ldb])
        b.ret_void()
        return fn

    def all_narrow(self, b: ir.IRBuilder, bm: ir.Value, n: ir.Value, k: ir.Value,
                   ldb: ir.Value) -> ir.Value:
        """Whether every b[i, j] lies in [-NARROW_LIMIT, NARROW_LIMIT]: an OR over the
        rows of each row's out-of-range bytes (``b + 64`` above 128 as u8), 32 bytes a
        step (the last ones of a row masked)."""
        limit, span = (ir.Constant(V32B, [v] * 32) for v in (NARROW_LIMIT, 2 * NARROW_LIMIT))
        whole = b.sub(n, b.srem(n, _i(32)))

        def out_of_range(x: ir.Value) -> ir.Value:
            return b.zext(b.icmp_unsigned(">", b.add(x, limit), span), V32B)

        def row(i: ir.Value, acc: list[ir.Value], _count: int) -> list[ir.Value]:
            src = b.gep(bm, [b.mul(i, ldb)], source_etype=I8)
            _, (wide,) = k_loop(b, _i(0), acc, whole, 32, lambda j, w, _c: [b.or_(
                w[0], out_of_range(vector_load(b, b.gep(src, [j], source_etype=I8), V32B, 1)))], "nc")
            rest = self.load_first(b, b.gep(src, [whole], source_etype=I8),
                                   self.first_lanes(b, b.sub(n, whole), 32))
            return [b.or_(wide, out_of_range(rest))]  # masked-off lanes load 0: in range
        _, (wide,) = k_loop(b, _i(0), [zeros(V32B)], k, 1, row, "nr")
        lanes = [b.extract_element(wide, ir.Constant(I32, j)) for j in range(32)]
        any_wide = lanes[0]
        for lane in lanes[1:]:
            any_wide = b.or_(any_wide, lane)
        return b.icmp_unsigned("==", any_wide, ir.Constant(I8, 0))

    def driver(self, prepacked: bool = False) -> ir.Function:
        if not prepacked:
            return super().driver(False)
        name = "wia.qgemm.narrowable.packed"
        if name in self.mod.globals:
            return self.mod.globals[name]
        wide, narrow = super().driver(True), self.narrow.driver(True)
        fn = ir.Function(self.mod, ir.FunctionType(ir.VoidType(), ARGS), name)
        fn.linkage = "internal"
        a, packed, *rest = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        body = b.gep(packed, [_i(HEADER)], source_etype=I8)
        is_narrow = b.icmp_signed("!=", b.load(packed, typ=I64), _i(0))
        with b.if_else(is_narrow) as (then, other):
            with then:
                b.call(narrow, [a, body, *rest])
            with other:
                b.call(wide, [a, body, *rest])
        b.ret_void()
        return fn


def narrow_capable(features: str) -> bool:
    """Whether a host with these LLVM features runs ``vpmaddubsw`` on 256 bits."""
    return "+avx2" in features.split(",")


__all__ = ["HEADER", "NARROW_LIMIT", "MaddubsQGemmBuilder", "NarrowWeightQGemmBuilder",
           "narrow_capable"]
