"""The ``loop.qgemm`` kernel on a VNNI host: ``vpdpbusd``, four int8 products per
int32 lane per instruction (``pmaddwd`` does two, after widening to i16).

``vpdpbusd`` multiplies *unsigned* bytes by signed ones. A is signed, so it is
packed as ``a + 128`` (``a xor 0x80``, exact in u8), and each column's result is
corrected by ``-128 * sum_k b[k, j]`` (the "compensation" of oneDNN's and MLAS's
u8s8 kernels), which the micro-kernel subtracts from its accumulators' start value:

    sum_k (a + 128) * b  -  128 * sum_k b  ==  sum_k a * b

Structure (as qgemm.py, on k *quads*):
    pack A rows into i32 words, one per k quad: bytes a[i, 4q + t] + 128 (t = 0..3)
    for pc in quads by KCQ:            pack B[4pc:4pc+4KCQ, :] into NR-wide panels, each
                                       panel row the NR columns' 4 bytes b[4p + t, j];
                                       comp[j] = 128 * sum over the block's k of b[k, j],
                                       summed while packing: vpdpbusd of each packed row
                                       with bytes of 128 (two instructions per row)
      for jr in N by NR:
        for ir in M by MR:             micro-kernel: MR x NV <W x i32> accumulators,
                                       started at C (or 0 in the first block) - comp

Invariants:
- Exact: a u8 * s8 product and the sum of four fit in i32 (|4 * 255 * 128| < 2**31);
  accumulation wraps modulo 2**32 like NumPy's int32 matmul, and so does the
  compensation (each block's own, subtracted by that block's micro-kernels), so the
  corrected sum is exact modulo 2**32 too.
- k padded to a multiple of 4 with zero rows of B (and the bytes of a = 0 in A):
  a padded product is 0 and adds nothing to the compensation.
- Chosen only where the host has the instruction (``vnni_bits``): 512-bit vectors
  with AVX512-VNNI, 256-bit with AVX-VNNI; elsewhere qgemm.py's ``pmaddwd`` code.
"""

from __future__ import annotations

from collections.abc import Callable

from llvmlite import ir

from .gemm import _i, imin, k_loop, tail_rows
from .qgemm import PACK_BYTES, QGemmBuilder, _declare
from .runtime import for_range, vector_load, vector_store
from .scratch import SLOT_QGEMM_A, scratch, scratch_done
from .types import I1, I8, I32, I64, PTR, splat, zeros

I16 = ir.IntType(16)
NV = 2  # vectors per micro-kernel row


def vnni_bits(features: str) -> int:
    """The vector width of ``vpdpbusd`` on a host with these LLVM features (0: none)."""
    have = set(features.split(","))
    if {"+avx512vnni", "+avx512bw"} <= have:
        return 512
    if "+avxvnni" in have or {"+avx512vnni", "+avx512vl"} <= have:
        return 256
    return 0


class VnniQGemmBuilder(QGemmBuilder):
    """Emits ``wia.qgemm(A, B, C, m, n, k, lda, ldb, ldc)`` with ``vpdpbusd`` of ``bits``."""

    def __init__(self, mod: ir.Module, bits: int, libraries: list | None = None):
        super().__init__(mod, libraries)
        self.bits = bits
        self.w = bits // 32               # i32 lanes per vector
        self.nr = NV * self.w             # columns per panel (32 or 16)
        self.mr = 8 if bits == 512 else 4  # 8 x 2 zmm or 4 x 2 ymm accumulators
        self.kcq = 16384 // (4 * self.nr)  # k quads per panel block: a 16 KiB panel
        self.vt = ir.VectorType(I32, self.w)
        self.tag = f"vnni{bits}"
        self.k_group, self.kc = 4, self.kcq
        self.gemv_lanes = self.w

    # ------------------------------------------------------------ micro-kernel

    def dot_add(self, b: ir.IRBuilder, acc: ir.Value, x: ir.Value, y: ir.Value) -> ir.Value:
        """acc + the sums of four u8 (bytes of ``x``) x s8 (bytes of ``y``) products per
        i32 lane: one ``vpdpbusd``."""
        dot = _declare(self.mod, f"llvm.x86.avx512.vpdpbusd.{self.bits}", self.vt, [self.vt] * 3)
        return b.call(dot, [acc, x, y])

    def ukernel(self, mr: int) -> ir.Function:
        """``uk(apack, kq, panel, c, ldc, kcq, valid, load_c, comp)``: C[mr x NR] = C (when
        ``load_c``, else 0) - comp + A.B over ``kcq`` quads."""
        name = f"wia.qgemm.{self.tag}.ukernel.{mr}"
        if name in self.mod.globals:
            return self.mod.globals[name]
        fn = ir.Function(self.mod, ir.FunctionType(
            ir.VoidType(), [PTR, I64, PTR, PTR, I64, I64, I64, I1, PTR]), name)
        fn.linkage = "internal"
        ap, kq, panel, c, ldc, kcq, valid, load_c, comp = fn.args
        for p in (ap, panel, c, comp):
            p.add_attribute("noalias")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        w, vt = self.w, self.vt
        mask_t, vi = ir.VectorType(I1, w), ir.VectorType(I64, w)
        sv = splat(b, valid, vi)
        masks = [b.icmp_signed(">", sv, ir.Constant(vi, [v * w + j for j in range(w)])) for v in range(NV)]
        mload = _declare(self.mod, f"llvm.masked.load.v{w}i32.p0", vt, [PTR, I32, mask_t, vt])
        mstore = _declare(self.mod, f"llvm.masked.store.v{w}i32.p0", ir.VoidType(), [vt, PTR, I32, mask_t])
        zero = zeros(vt)
        full = b.icmp_signed(">=", valid, _i(self.nr))

        def c_ptr(r: int, v: int) -> ir.Value:
            return b.gep(c, [b.add(b.mul(_i(r), ldc), _i(v * w))], source_etype=I32)
        # comp is padded to whole panels and 64-byte aligned: plain loads
        start = [vector_load(b, b.gep(comp, [_i(v * w)], source_etype=I32), vt, 4) for v in range(NV)]
        init = []
        for r in range(mr):
            for v in range(NV):
                loaded = b.call(mload, [c_ptr(r, v), ir.Constant(I32, 4), masks[v], zero])
                init.append(b.sub(b.select(load_c, loaded, zero), start[v]))

        def step(p: ir.Value, accs: list[ir.Value], _count: int) -> list[ir.Value]:
            row = b.gep(panel, [b.mul(p, _i(self.nr))], source_etype=I32)  # a row: NR words
            bvecs = [vector_load(b, b.gep(row, [_i(v * w)], source_etype=I32), vt, 64 if w == 16 else 32)
                     for v in range(NV)]
            nexts = []
            for r in range(mr):
                word = b.load(b.gep(ap, [b.add(b.mul(_i(r), kq), p)], source_etype=I32), typ=I32)
                xs = splat(b, word, vt)
                for v in range(NV):
                    nexts.append(self.dot_add(b, accs[r * NV + v], xs, bvecs[v]))
            return nexts
        _, accs = k_loop(b, _i(0), init, kcq, 1, step, "k")
        with b.if_else(full) as (plain, ragged):
            with plain:
                for r in range(mr):
                    for v in range(NV):
                        vector_store(b, accs[r * NV + v], c_ptr(r, v), 4)
            with ragged:
                for r in range(mr):
                    for v in range(NV):
                        b.call(mstore, [accs[r * NV + v], c_ptr(r, v), ir.Constant(I32, 4), masks[v]])
        b.ret_void()
        return fn

    # ------------------------------------------------------------ packing

    def pack_a_quads(self, b: ir.IRBuilder, a: ir.Value, m: ir.Value, k: ir.Value, lda: ir.Value,
                     kq: ir.Value, out: ir.Value) -> None:
        """Bytes out[i * 4kq + t] = a[i, t] xor 0x80 (a + 128 as u8), 0x80 (a = 0) past k:
        ``PACK_BYTES`` at a time, the rest of each row with one masked load and store
        (byte by byte all along, the packing took ~10 % of a 64 x 512 x 512 product)."""
        vb = ir.VectorType(I8, PACK_BYTES)
        flip = ir.Constant(vb, [0x80 - 256] * PACK_BYTES)
        whole = b.sub(k, b.srem(k, _i(PACK_BYTES)))

        def row(i: ir.Value) -> None:
            src = b.gep(a, [b.mul(i, lda)], source_etype=I8)
            dst = b.gep(out, [b.mul(i, b.mul(kq, _i(4)))], source_etype=I8)

            def chunk(t: ir.Value) -> None:  # rows of A are byte-aligned only
                x = vector_load(b, b.gep(src, [t], source_etype=I8), vb, 1)
                vector_store(b, b.xor(x, flip), b.gep(dst, [t], source_etype=I8), 1)
            for_range(b, _i(0), whole, PACK_BYTES, chunk, "qv")
            # the rest of the row (k - whole < PACK_BYTES bytes) and its pad to 4kq bytes
            x = self.load_first(b, b.gep(src, [whole], source_etype=I8),
                                self.first_lanes(b, b.sub(k, whole), PACK_BYTES))
            self.store_first(b, b.xor(x, flip), b.gep(dst, [whole], source_etype=I8),
                             self.first_lanes(b, b.sub(b.mul(kq, _i(4)), whole), PACK_BYTES))
        for_range(b, _i(0), m, 1, row, "ra")

    def pack_b_quads(self, b: ir.IRBuilder, bm: ir.Value, ldb: ir.Value, k: ir.Value, n: ir.Value,
                     npad: ir.Value, pc: ir.Value, kcq: ir.Value, out: ir.Value,
                     comp: ir.Value) -> None:
        """Bytes out[((jr/NR) * kcq + p) * 4NR + 4j + t] = b[4(pc+p) + t, jr + j] (0 past k
        or n). A whole panel row: four unaligned NR-byte loads (rows past k read row 0
        and are zeroed) and two interleaves; the column tail alike from masked loads. Each packed
        row adds 128 * its quads' sums to comp[jr:jr + NR] (zeroed by the caller)."""
        nr = self.nr
        vb = ir.VectorType(I8, nr)

        def quad(p: ir.Value) -> None:
            k0 = b.mul(b.add(pc, p), _i(4))
            rows, inside = [], []
            for t in range(4):
                kt = b.add(k0, _i(t))
                ok = b.icmp_signed("<", kt, k)
                inside.append(ok)
                rows.append(b.gep(bm, [b.mul(b.select(ok, kt, _i(0)), ldb)], source_etype=I8))

            def panel(jr: ir.Value) -> None:
                dst = b.gep(out, [b.mul(b.add(b.mul(b.sdiv(jr, _i(nr)), kcq), p), _i(4 * nr))],
                            source_etype=I8)
                def interleave(load: Callable[[ir.Value], ir.Value]) -> None:
                    vs = [b.select(ok, load(b.gep(r, [jr], source_etype=I8)), zeros(vb))
                          for r, ok in zip(rows, inside, strict=True)]
                    pairs = [x for j in range(nr) for x in (j, nr + j)]
                    lo = b.shuffle_vector(vs[0], vs[1], ir.Constant(ir.VectorType(I32, 2 * nr), pairs))
                    hi = b.shuffle_vector(vs[2], vs[3], ir.Constant(ir.VectorType(I32, 2 * nr), pairs))
                    wt = ir.VectorType(I16, nr)
                    quads = b.shuffle_vector(b.bitcast(lo, wt), b.bitcast(hi, wt),
                                             ir.Constant(ir.VectorType(I32, 2 * nr), pairs))
                    vector_store(b, quads, dst, 64 if nr == 32 else 32)
                with b.if_else(b.icmp_signed("<=", b.add(jr, _i(nr)), n)) as (then, other):
                    with then:
                        interleave(lambda at: vector_load(b, at, vb, 1))
                    with other:  # the column tail: masked loads, zero past n
                        mask = self.first_lanes(b, b.sub(n, jr), nr)
                        interleave(lambda at: self.load_first(b, at, mask))
                self.add_column_sums(b, dst, b.gep(comp, [jr], source_etype=I32))
            for_range(b, _i(0), npad, nr, panel, "pn")
        for_range(b, _i(0), kcq, 1, quad, "pq")

    def add_column_sums(self, b: ir.IRBuilder, row: ir.Value, comp: ir.Value) -> None:
        """comp[j] += 128 * (sum of column j's four bytes in the packed ``row``): one
        vpdpbusd per vector with unsigned bytes of 128 (the packed row is in L1)."""
        w, vt = self.w, self.vt
        bytes128 = ir.Constant(vt, [0x80808080 - (1 << 32)] * w)
        for v in range(NV):
            quads = vector_load(b, b.gep(row, [_i(v * w)], source_etype=I32), vt, 64 if w == 16 else 32)
            dst = b.gep(comp, [_i(v * w)], source_etype=I32)
            vector_store(b, self.dot_add(b, vector_load(b, dst, vt, 4), bytes128, quads), dst, 4)

    # ------------------------------------------------------------ B blocks
    # A block is the k block's compensation (npad i32) followed by its panels.

    def block_bytes(self, b: ir.IRBuilder, npad: ir.Value) -> ir.Value:
        return b.mul(npad, _i(4 * (self.kcq + 1)))

    def pack_block(self, b: ir.IRBuilder, bm: ir.Value, ldb: ir.Value, k: ir.Value, n: ir.Value,
                   npad: ir.Value, pc: ir.Value, kc: ir.Value, block: ir.Value) -> None:
        self.clear(b, block, b.mul(npad, _i(4)))
        self.pack_b_quads(b, bm, ldb, k, n, npad, pc, kc, b.gep(block, [npad], source_etype=I32),
                          block)

    # ------------------------------------------------------------ blocked rows

    def rows(self, prepacked: bool = False) -> ir.Function:
        """``qgemm.rows(A, B, C, m, n, k, lda, ldb, ldc)``: one thread's rows
        (``prepacked``: B is ``prepack``'s output)."""
        name = f"wia.qgemm.{self.tag}.{'packed.' if prepacked else ''}rows"
        if name in self.mod.globals:
            return self.mod.globals[name]
        fn = ir.Function(self.mod, ir.FunctionType(ir.VoidType(), [PTR, PTR, PTR] + [I64] * 6), name)
        fn.linkage = "internal"
        a, bm, c, m, n, k, lda, ldb, ldc = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        nr = self.nr
        kq = self.k_units(b, k)
        npad = self.npad(b, n)
        apack = scratch(self.mod, b, self.libraries, SLOT_QGEMM_A,
                        b.add(b.mul(b.mul(m, kq), _i(4)), _i(64)))
        block_for, buffers = self.b_blocks(b, bm, ldb, k, n, npad, prepacked)
        self.pack_a_quads(b, a, m, k, lda, kq, apack)
        big = self.ukernel(self.mr)
        full_end = b.sub(m, b.srem(m, _i(self.mr)))

        def per_pc(pc: ir.Value) -> None:
            kcq = imin(b, b.sub(kq, pc), _i(self.kcq))
            comp = block_for(pc, kcq)
            bpack = b.gep(comp, [npad], source_etype=I32)
            load_c = b.icmp_signed(">", pc, _i(0))

            def per_jr(jr: ir.Value) -> None:
                panel = b.gep(bpack, [b.mul(jr, kcq)], source_etype=I32)
                valid = b.sub(n, jr)
                cj = b.gep(comp, [jr], source_etype=I32)

                def call(kernel: ir.Function, i: ir.Value) -> None:
                    arow = b.gep(apack, [b.add(b.mul(i, kq), pc)], source_etype=I32)
                    crow = b.gep(c, [b.add(b.mul(i, ldc), jr)], source_etype=I32)
                    b.call(kernel, [arow, kq, panel, crow, ldc, kcq, valid, load_c, cj])
                for_range(b, _i(0), full_end, self.mr, lambda i: call(big, i), "ir")
                tail_rows(b, full_end, m, self.mr, self.ukernel, call)
            for_range(b, _i(0), n, nr, per_jr, "jr")
        for_range(b, _i(0), kq, self.kcq, per_pc, "pc")
        self.zero_when_empty(b, c, m, n, k, ldc)
        for slot, buf in [(SLOT_QGEMM_A, apack), *buffers]:
            scratch_done(self.mod, b, slot, buf)
        b.ret_void()
        return fn


__all__ = ["VnniQGemmBuilder", "vnni_bits"]
