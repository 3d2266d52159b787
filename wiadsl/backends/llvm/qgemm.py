"""The ``loop.qgemm`` kernel: int8 x int8 -> int32, packed into i16 pairs for ``pmaddwd``.

Structure (the f32 ``gemm.py`` loop order, on k *pairs*):
    pack A rows into i32 words, one per k pair: lo16 = a[i, 2p], hi16 = a[i, 2p + 1]
    for pc in pairs by KCP:            pack B[2pc:2pc+2KCP, :] into NR-wide panels of
                                       interleaved pairs (b[2p, j], b[2p+1, j]) as i16
      for jr in N by NR:
        for ir in M by MR:             micro-kernel: MR x (NR / 8) <8 x i32> accumulators
The micro-kernel splats one A word per row (two i16) and multiplies it with a
panel row of 16 i16: ``sext`` both to i32, multiply, add even and odd lanes.
LLVM's x86 backend matches exactly that shape to ``vpmaddwd`` (16 MACs per
instruction on AVX2); the assembly check lives in tests/quant. A host with VNNI
gets qgemm_vnni.py's ``vpdpbusd`` kernel instead (``qgemm_builder``): four
products per lane, 2-3x this one's speed there. An AVX2 host without it runs a
prepacked B of 7-bit values (a model's weights) with ``vpmaddubsw`` (qgemm_narrow.py).
Each variant (``qgemm_variant``) is a helper compiled once per host (library.py);
kernels call it.

Invariants:
- Exact integer arithmetic: i8 * i8 products and their pair sums fit in i32 (and
  ``pmaddwd`` cannot saturate: |2 * 128 * 128| < 2**31); accumulation wraps
  modulo 2**32, as NumPy's int32 matmul does.
- An odd k is padded with a zero column in A (and a zero row in B): exact.
- Column tails use masked loads/stores; leftover rows run the 1-row kernel.
- One row of A with B given per call (``gemv``) reads B in place: packing it would
  cost more than the product.
- Above ``PARALLEL_MACS`` rows are split over the thread pool (parallel.py),
  one chunk per thread, each packing its own A rows and B panels.
- A frozen B (prepacked.py) is packed once by ``prepack``: every k block in the
  layout ``rows`` packs per call, the blocks one after another; the ``packed``
  driver reads them in place.
"""

from __future__ import annotations

from collections.abc import Callable

from llvmlite import ir

from .gemm import GEMV_COLS, GEMV_ROWS, _i, imin, k_loop
from .parallel import THREADS, new_worker, parallel_for
from .runtime import for_range, offset_align, vector_load, vector_store
from .scratch import SLOT_QGEMM_A, SLOT_QGEMM_B, scratch, scratch_done
from .types import I1, I8, I32, I64, PREPACK_TYPE, PTR, splat, zeros

I16 = ir.IntType(16)
MR, NV, W = 4, 2, 8          # 4 rows x 2 vectors of 8 i32 lanes: NR = 16 columns
NR = NV * W
KCP = 256                    # k pairs per packed B block (a panel is KCP x 16 x 2 x i16 = 16 KiB)
PACK_BYTES = 32              # bytes of a row of A packed at a time
PARALLEL_MACS = 64 ** 3
V8 = ir.VectorType(I32, W)
V16S = ir.VectorType(I16, 2 * W)
V16W = ir.VectorType(I32, 2 * W)
V16B = ir.VectorType(I8, NR)
ARGS = [PTR, PTR, PTR] + [I64] * 6


def _declare(mod: ir.Module, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
    fn = mod.globals.get(name)
    return fn if fn is not None else ir.Function(mod, ir.FunctionType(ret, args), name)


def madd_pairs(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    """<16 x i16> x <16 x i16> -> <8 x i32>: lane j = x[2j]*y[2j] + x[2j+1]*y[2j+1] (pmaddwd)."""
    prod = b.mul(b.sext(x, V16W), b.sext(y, V16W))
    even = b.shuffle_vector(prod, prod, ir.Constant(V8, list(range(0, 2 * W, 2))))
    odd = b.shuffle_vector(prod, prod, ir.Constant(V8, list(range(1, 2 * W, 2))))
    return b.add(even, odd)


class QGemmBuilder:
    """Emits ``wia.qgemm(A, B, C, m, n, k, lda, ldb, ldc)`` into one LLVM module."""

    def __init__(self, mod: ir.Module, libraries: list | None = None):
        self.mod = mod
        #: the kernel module's helper specs (its packing buffers come from scratch.py's)
        self.libraries = libraries
        self.mr = MR  # rows of the micro-kernel (the unit of a thread's row chunk)
        self.nr, self.tag = NR, "pmaddwd"
        self.k_group, self.kc = 2, KCP  # k values per packed unit (a pair), units per block
        self.gemv_lanes = W  # i32 lanes of the one-row product's vectors

    # ------------------------------------------------------------ tails
    # Written vectorized, as every loop here: the helpers compile without IR passes
    # (library.py's ``pipeline``), so nothing vectorizes them afterwards.

    def first_lanes(self, b: ir.IRBuilder, count: ir.Value, lanes: int) -> ir.Value:
        """<lanes x i1>: lane l set for l < ``count``."""
        vi = ir.VectorType(I64, lanes)
        return b.icmp_signed(">", splat(b, count, vi), ir.Constant(vi, list(range(lanes))))

    def load_first(self, b: ir.IRBuilder, at: ir.Value, mask: ir.Value) -> ir.Value:
        """The bytes at ``at`` of the lanes ``mask`` sets, zero in the others."""
        vb = ir.VectorType(I8, mask.type.count)
        load = _declare(self.mod, f"llvm.masked.load.v{vb.count}i8.p0", vb,
                        [PTR, I32, mask.type, vb])
        return b.call(load, [at, ir.Constant(I32, 1), mask, zeros(vb)])

    def store_first(self, b: ir.IRBuilder, x: ir.Value, at: ir.Value, mask: ir.Value) -> None:
        """The integer lanes of ``x`` that ``mask`` sets to ``at`` (aligned to an element)."""
        bits = x.type.element.width
        store = _declare(self.mod, f"llvm.masked.store.v{x.type.count}i{bits}.p0", ir.VoidType(),
                         [x.type, PTR, I32, mask.type])
        b.call(store, [x, at, ir.Constant(I32, bits // 8), mask])

    def clear(self, b: ir.IRBuilder, at: ir.Value, size: ir.Value) -> None:
        """``size`` bytes at ``at`` set to zero."""
        memset = self.mod.declare_intrinsic("llvm.memset", [PTR, I64])
        b.call(memset, [at, ir.Constant(I8, 0), size, ir.Constant(I1, 0)])

    # ------------------------------------------------------------ micro-kernel

    def ukernel(self, mr: int) -> ir.Function:
        """``uk(apack, kp, panel, c, ldc, kcp, valid, load_c)``: C[mr x 16] (+)= A.B."""
        name = f"wia.qgemm.ukernel.{mr}"
        if name in self.mod.globals:
            return self.mod.globals[name]
        fn = ir.Function(self.mod, ir.FunctionType(ir.VoidType(), [PTR, I64, PTR, PTR, I64, I64, I64, I1]), name)
        fn.linkage = "internal"
        ap, kp, panel, c, ldc, kcp, valid, load_c = fn.args
        for p in (ap, panel, c):
            p.add_attribute("noalias")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        mask_t = ir.VectorType(I1, W)
        vi = ir.VectorType(I64, W)
        sv = splat(b, valid, vi)
        masks = [b.icmp_signed(">", sv, ir.Constant(vi, [v * W + j for j in range(W)])) for v in range(NV)]
        mload = _declare(self.mod, "llvm.masked.load.v8i32.p0", V8, [PTR, I32, mask_t, V8])
        mstore = _declare(self.mod, "llvm.masked.store.v8i32.p0", ir.VoidType(), [V8, PTR, I32, mask_t])
        zero = zeros(V8)

        def c_ptr(r: int, v: int) -> ir.Value:
            return b.gep(c, [b.add(b.mul(_i(r), ldc), _i(v * W))], source_etype=I32)
        init = []
        for r in range(mr):
            for v in range(NV):
                loaded = b.call(mload, [c_ptr(r, v), ir.Constant(I32, 4), masks[v], zero])
                init.append(b.select(load_c, loaded, zero))
        def step(p: ir.Value, accs: list[ir.Value], _count: int) -> list[ir.Value]:
            row = b.gep(panel, [b.mul(p, _i(2 * NR))], source_etype=I16)
            # the panel is 64-byte aligned (aligned_alloc), a row is 2NR i16 = 64 bytes
            bvecs = [vector_load(b, b.gep(row, [_i(2 * W * v)], source_etype=I16), V16S,
                                 offset_align(64, 2 * W * v * 2)) for v in range(NV)]
            nexts = []
            for r in range(mr):
                word = b.load(b.gep(ap, [b.add(b.mul(_i(r), kp), p)], source_etype=I32), typ=I32)
                xs = b.bitcast(splat(b, word, V8), V16S)
                for v in range(NV):
                    nexts.append(b.add(accs[r * NV + v], madd_pairs(b, xs, bvecs[v])))
            return nexts
        _, accs = k_loop(b, _i(0), init, kcp, 1, step, "k")
        for r in range(mr):
            for v in range(NV):
                b.call(mstore, [accs[r * NV + v], c_ptr(r, v), ir.Constant(I32, 4), masks[v]])
        b.ret_void()
        return fn

    # ------------------------------------------------------------ packing

    def pack_a(self, b: ir.IRBuilder, a: ir.Value, m: ir.Value, k: ir.Value, lda: ir.Value,
               kp: ir.Value, out: ir.Value) -> None:
        """out[i * kp + p] = (i16 a[i, 2p]) | (i16 a[i, 2p+1]) << 16 (0 past column k):
        ``PACK_BYTES`` of a row at a time (sign-extended to i16, they are its words),
        the rest with one masked load and store (pair by pair all along, the packing
        took ~10 % of a 64 x 512 x 512 product)."""
        vb, vs = ir.VectorType(I8, PACK_BYTES), ir.VectorType(I16, PACK_BYTES)
        whole = b.sub(k, b.srem(k, _i(PACK_BYTES)))

        def row(i: ir.Value) -> None:
            src = b.gep(a, [b.mul(i, lda)], source_etype=I8)
            dst = b.gep(out, [b.mul(i, kp)], source_etype=I32)

            def chunk(t: ir.Value) -> None:  # rows of A are byte-aligned only
                x = vector_load(b, b.gep(src, [t], source_etype=I8), vb, 1)
                vector_store(b, b.sext(x, vs), b.gep(dst, [b.sdiv(t, _i(2))], source_etype=I32), 4)
            for_range(b, _i(0), whole, PACK_BYTES, chunk, "pv")

            # the rest of the row, k - whole < PACK_BYTES bytes, and the pad to kp pairs
            rest = b.sub(k, whole)
            x = self.load_first(b, b.gep(src, [whole], source_etype=I8), self.first_lanes(b, rest, PACK_BYTES))
            at = b.gep(dst, [b.sdiv(whole, _i(2))], source_etype=I32)
            fill = b.mul(b.sub(kp, b.sdiv(whole, _i(2))), _i(2))  # i16 words to write
            # (the zero lanes past k are the pad's zeros)
            self.store_first(b, b.sext(x, vs), at, self.first_lanes(b, fill, PACK_BYTES))
        for_range(b, _i(0), m, 1, row, "ra")

    def pack_b(self, b: ir.IRBuilder, bm: ir.Value, ldb: ir.Value, k: ir.Value, n: ir.Value,
               npad: ir.Value, pc: ir.Value, kcp: ir.Value, out: ir.Value) -> None:
        """out[(jr/NR * kcp + p) * 2NR + 2j + h] = b[2(pc+p) + h, jr + j] (0 past column n).

        Past an odd k the h = 1 half repeats row k - 1: finite data that meets A's zero
        padding, so the product stays exact."""
        def pair(p: ir.Value) -> None:
            k0 = b.mul(b.add(pc, p), _i(2))
            k1 = b.add(k0, _i(1))
            in1 = b.icmp_signed("<", k1, k)
            r0 = b.gep(bm, [b.mul(k0, ldb)], source_etype=I8)
            r1 = b.gep(bm, [b.mul(b.select(in1, k1, k0), ldb)], source_etype=I8)

            def panel(jr: ir.Value) -> None:
                dst = b.gep(out, [b.mul(b.add(b.mul(b.sdiv(jr, _i(NR)), kcp), p), _i(2 * NR))],
                            source_etype=I16)
                full = b.icmp_signed("<=", b.add(jr, _i(NR)), n)

                def interleave(load: Callable[[ir.Value], ir.Value]) -> None:
                    # rows of B start at B + k*ldb: byte-aligned only (issue 17)
                    v0, v1 = (b.sext(load(b.gep(r, [jr], source_etype=I8)), V16S) for r in (r0, r1))
                    inter = [x for j in range(NR) for x in (j, NR + j)]
                    both = b.shuffle_vector(v0, v1, ir.Constant(ir.VectorType(I32, 2 * NR), inter))
                    vector_store(b, both, dst, 2)
                with b.if_else(full) as (then, other):
                    with then:   # a whole panel row: two 16-byte loads, one interleave
                        interleave(lambda at: vector_load(b, at, V16B, 1))
                    with other:  # the column tail: masked loads, zero past n
                        mask = self.first_lanes(b, b.sub(n, jr), NR)
                        interleave(lambda at: self.load_first(b, at, mask))
            for_range(b, _i(0), npad, NR, panel, "pn")
        for_range(b, _i(0), kcp, 1, pair, "pp")

    # ------------------------------------------------------------ B blocks
    # B is packed a k block at a time (``kc`` units of ``k_group`` rows); each block
    # is ``block_bytes`` long at most: per call into one scratch block (``rows``),
    # or once for all calls (prepacked.py: ``prepack``, the blocks one after another).

    def npad(self, b: ir.IRBuilder, n: ir.Value) -> ir.Value:
        """n rounded up to whole panels."""
        return b.mul(b.sdiv(b.add(n, _i(self.nr - 1)), _i(self.nr)), _i(self.nr))

    def k_units(self, b: ir.IRBuilder, k: ir.Value) -> ir.Value:
        return b.sdiv(b.add(k, _i(self.k_group - 1)), _i(self.k_group))

    def block_bytes(self, b: ir.IRBuilder, npad: ir.Value) -> ir.Value:
        """The bytes of one whole k block of packed B (a multiple of 64)."""
        return b.mul(npad, _i(self.kc * 4))

    def packed_bytes(self, b: ir.IRBuilder, n: ir.Value, k: ir.Value) -> ir.Value:
        """The bytes of all of B packed (``prepack``)."""
        blocks = b.sdiv(b.add(self.k_units(b, k), _i(self.kc - 1)), _i(self.kc))
        return b.mul(blocks, self.block_bytes(b, self.npad(b, n)))

    def pack_block(self, b: ir.IRBuilder, bm: ir.Value, ldb: ir.Value, k: ir.Value, n: ir.Value,
                   npad: ir.Value, pc: ir.Value, kc: ir.Value, block: ir.Value) -> None:
        """The k block from unit ``pc`` (``kc`` units) of B into ``block``."""
        self.pack_b(b, bm, ldb, k, n, npad, pc, kc, block)

    def block_at(self, b: ir.IRBuilder, packed: ir.Value, npad: ir.Value, pc: ir.Value) -> ir.Value:
        """Where the k block from unit ``pc`` starts in all of B packed."""
        return b.gep(packed, [b.mul(b.sdiv(pc, _i(self.kc)), self.block_bytes(b, npad))],
                     source_etype=I8)

    def prepack(self) -> ir.Function:
        """``qgemm.prepack(B, P, n, k, ldb)``: every k block of B into P (``packed_bytes``
        long, 64-byte aligned), as ``rows(prepacked=True)`` reads them."""
        name = f"wia.qgemm.{self.tag}.prepack"
        if name in self.mod.globals:
            return self.mod.globals[name]
        fn = ir.Function(self.mod, PREPACK_TYPE, name)
        fn.linkage = "internal"
        bm, packed, n, k, ldb = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        units, npad = self.k_units(b, k), self.npad(b, n)
        for_range(b, _i(0), units, self.kc, lambda pc: self.pack_block(
            b, bm, ldb, k, n, npad, pc, imin(b, b.sub(units, pc), _i(self.kc)),
            self.block_at(b, packed, npad, pc)), "pb")
        b.ret_void()
        return fn

    def b_blocks(self, b: ir.IRBuilder, bm: ir.Value, ldb: ir.Value, k: ir.Value, n: ir.Value,
                 npad: ir.Value, prepacked: bool) -> tuple[Callable[[ir.Value, ir.Value], ir.Value],
                                                           list[ir.Value]]:
        """(block for (pc, kc), (slot, scratch buffer) pairs to give back): B's packed
        k blocks for ``rows``."""
        if prepacked:  # B is ``prepack``'s output
            return lambda pc, kc: self.block_at(b, bm, npad, pc), []
        block = scratch(self.mod, b, self.libraries, SLOT_QGEMM_B,
                        b.add(self.block_bytes(b, npad), _i(64)))

        def packed_block(pc: ir.Value, kc: ir.Value) -> ir.Value:
            self.pack_block(b, bm, ldb, k, n, npad, pc, kc, block)
            return block
        return packed_block, [(SLOT_QGEMM_B, block)]

    # ------------------------------------------------------------ blocked rows

    def rows(self, prepacked: bool = False) -> ir.Function:
        """``qgemm.rows(A, B, C, m, n, k, lda, ldb, ldc)``: one thread's rows
        (``prepacked``: B is ``prepack``'s output)."""
        name = f"wia.qgemm.{'packed.' if prepacked else ''}rows"
        if name in self.mod.globals:
            return self.mod.globals[name]
        fn = ir.Function(self.mod, ir.FunctionType(ir.VoidType(), ARGS), name)
        fn.linkage = "internal"
        a, bm, c, m, n, k, lda, ldb, ldc = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        kp = self.k_units(b, k)
        npad = self.npad(b, n)
        apack = scratch(self.mod, b, self.libraries, SLOT_QGEMM_A,
                        b.add(b.mul(b.mul(m, kp), _i(4)), _i(64)))
        block_for, buffers = self.b_blocks(b, bm, ldb, k, n, npad, prepacked)
        self.pack_a(b, a, m, k, lda, kp, apack)
        big, small = self.ukernel(MR), self.ukernel(1)
        full_end = b.sub(m, b.srem(m, _i(MR)))

        def per_pc(pc: ir.Value) -> None:
            kcp = imin(b, b.sub(kp, pc), _i(KCP))
            bpack = block_for(pc, kcp)
            load_c = b.icmp_signed(">", pc, _i(0))

            def per_jr(jr: ir.Value) -> None:
                panel = b.gep(bpack, [b.mul(jr, b.mul(kcp, _i(2)))], source_etype=I16)
                valid = b.sub(n, jr)

                def call(kernel: ir.Function, i: ir.Value) -> None:
                    arow = b.gep(apack, [b.add(b.mul(i, kp), pc)], source_etype=I32)
                    crow = b.gep(c, [b.add(b.mul(i, ldc), jr)], source_etype=I32)
                    b.call(kernel, [arow, kp, panel, crow, ldc, kcp, valid, load_c])
                for_range(b, _i(0), full_end, MR, lambda i: call(big, i), "ir")
                for_range(b, full_end, m, 1, lambda i: call(small, i), "tail")
            for_range(b, _i(0), n, NR, per_jr, "jr")
        for_range(b, _i(0), kp, KCP, per_pc, "pc")
        self.zero_when_empty(b, c, m, n, k, ldc)
        for slot, buf in [(SLOT_QGEMM_A, apack), *buffers]:
            scratch_done(self.mod, b, slot, buf)
        b.ret_void()
        return fn

    def zero_when_empty(self, b: ir.IRBuilder, c: ir.Value, m: ir.Value, n: ir.Value, k: ir.Value,
                        ldc: ir.Value) -> None:
        """k == 0: the empty sums are zeros."""
        with b.if_then(b.icmp_signed("==", k, _i(0))):
            for_range(b, _i(0), m, 1, lambda i: self.clear(
                b, b.gep(c, [b.mul(i, ldc)], source_etype=I32), b.mul(n, _i(4))), "zr")

    # ------------------------------------------------------------ one row

    def gemv(self) -> ir.Function:
        """``qgemm.gemv(a, B, c, n, k, ldb)``: ``c[0:n] = a[0:k] @ B[0:k, 0:n]``, one row of
        A with B given per call. Packing B for one row cost twice the product (1 x 512 x
        512 took 35-37 us, 0.6x NumPy's f32 product, on AMD Zen 3; now 24-27): B is read
        in place instead, ``GEMV_ROWS`` rows at a time into C, whose columns go in blocks
        of ``GEMV_COLS`` (in L1; the f32 gemv's blocking, gemm.py), ``gemv_lanes`` columns
        a step, then the block's last columns one by one. An i8 x i8 product is exact in
        i16 (|p| <= 2**14), so the multiplies are i16 (``vpmullw``) and only the sums
        widen to i32. Written vectorized: the helper compiles without IR passes
        (library.py's ``pipeline``)."""
        name = "wia.qgemm.gemv"
        if name in self.mod.globals:
            return self.mod.globals[name]
        fn = ir.Function(self.mod, ir.FunctionType(ir.VoidType(), [PTR, PTR, PTR, I64, I64, I64]), name)
        fn.linkage = "internal"
        a, bm, c, n, k, ldb = fn.args
        for p in (a, bm, c):
            p.add_attribute("noalias")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        lanes = self.gemv_lanes
        vb, vs, vw = (ir.VectorType(t, lanes) for t in (I8, I16, I32))
        self.clear(b, c, b.mul(n, _i(4)))
        whole = b.sub(k, b.srem(k, _i(GEMV_ROWS)))

        def block(jc: ir.Value) -> None:
            jend = imin(b, b.add(jc, _i(GEMV_COLS)), n)
            vend = b.sub(jend, b.srem(b.sub(jend, jc), _i(lanes)))

            def rows_from(p: ir.Value, count: int) -> None:
                xs = [b.sext(b.load(b.gep(a, [b.add(p, _i(t))], source_etype=I8), typ=I8), I16)
                      for t in range(count)]
                rows = [b.gep(bm, [b.mul(b.add(p, _i(t)), ldb)], source_etype=I8) for t in range(count)]
                splats = [splat(b, x, vs) for x in xs]

                def columns(j: ir.Value) -> None:
                    at = b.gep(c, [j], source_etype=I32)
                    total = vector_load(b, at, vw, 4)
                    for x, row in zip(splats, rows, strict=True):
                        y = b.sext(vector_load(b, b.gep(row, [j], source_etype=I8), vb, 1), vs)
                        total = b.add(total, b.sext(b.mul(x, y), vw))
                    vector_store(b, total, at, 4)

                def column(j: ir.Value) -> None:
                    at = b.gep(c, [j], source_etype=I32)
                    total = b.load(at, typ=I32)
                    for x, row in zip(xs, rows, strict=True):
                        y = b.sext(b.load(b.gep(row, [j], source_etype=I8), typ=I8), I16)
                        total = b.add(total, b.sext(b.mul(x, y), I32))
                    b.store(total, at)
                for_range(b, jc, vend, lanes, columns, "gv")
                for_range(b, vend, jend, 1, column, "gj")
            for_range(b, _i(0), whole, GEMV_ROWS, lambda p: rows_from(p, GEMV_ROWS), "g4")
            for_range(b, whole, k, 1, lambda p: rows_from(p, 1), "g1")
        for_range(b, _i(0), n, GEMV_COLS, block, "gc")
        b.ret_void()
        return fn

    # ------------------------------------------------------------ threads

    def driver(self, prepacked: bool = False) -> ir.Function:
        """``qgemm(A, B, C, m, n, k, lda, ldb, ldc)``, rows split over the pool when
        large (``prepacked``: B is ``prepack``'s output)."""
        name = f"wia.qgemm.{self.tag}.packed" if prepacked else "wia.qgemm"
        if name in self.mod.globals:
            return self.mod.globals[name]
        rows = self.rows(prepacked)
        fn = ir.Function(self.mod, ir.FunctionType(ir.VoidType(), ARGS), name)
        fn.linkage = "internal"
        a, bm, c, m, n, k, lda, ldb, ldc = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        if not prepacked:  # one row: B read in place, not packed
            with b.if_then(b.icmp_signed("==", m, _i(1))):
                b.call(self.gemv(), [a, bm, c, n, k, ldb])
                b.ret_void()
        macs = b.mul(b.mul(m, n), k)
        parallel = b.and_(b.icmp_signed(">=", macs, _i(PARALLEL_MACS)),
                          b.icmp_signed(">=", m, _i(2 * self.mr * THREADS)))
        serial_bb, par_bb = fn.append_basic_block("serial"), fn.append_basic_block("parallel")
        b.cbranch(b.and_(parallel, ir.Constant(I1, int(THREADS > 1))), par_bb, serial_bb)
        b.position_at_end(serial_bb)
        b.call(rows, [a, bm, c, m, n, k, lda, ldb, ldc])
        b.ret_void()
        b.position_at_end(par_bb)
        ctx = b.alloca(I64, size=9)
        for j, v in enumerate(fn.args):
            b.store(b.ptrtoint(v, I64) if j < 3 else v, b.gep(ctx, [_i(j)], source_etype=I64))
        # one chunk per thread: every chunk packs all of B (unless prepacked)
        b.call(parallel_for(self.mod), [self.worker(rows), ctx, _i(0), m, _i(self.mr), _i(THREADS)])
        b.ret_void()
        return fn

    def worker(self, rows: ir.Function) -> ir.Function:
        """``i32 worker(ptr ctx, i64 lo, i64 hi)`` for ``parallel_for``: rows [lo, hi)."""
        name = f"{rows.name}.worker"
        if name in self.mod.globals:
            return self.mod.globals[name]
        fn, b, vals, lo, hi = new_worker(self.mod, name, 9)
        a, bm, c = (b.inttoptr(v, PTR) for v in vals[:3])
        lda, ldc = vals[6], vals[8]
        b.call(rows, [b.gep(a, [b.mul(lo, lda)], source_etype=I8), bm,
                      b.gep(c, [b.mul(lo, ldc)], source_etype=I32), b.sub(hi, lo), *vals[4:]])
        b.ret(ir.Constant(I32, 0))
        return fn


#: The int8 GEMMs, by the host features that choose them (``qgemm_variant``)
QGEMM_VARIANTS = ("vnni512", "vnni256", "narrowable", "pmaddwd")


def qgemm_variant(features: str | None = None) -> str:
    """Which int8 GEMM a host with these LLVM ``features`` (default: this host's) runs:
    ``vpdpbusd`` of 512 or 256 bits where it has VNNI (qgemm_vnni.py); else ``pmaddwd``
    pairs, and on an AVX2 host ``vpmaddubsw`` for a prepacked B of 7-bit values
    ("narrowable", qgemm_narrow.py)."""
    from .qgemm_narrow import narrow_capable
    from .qgemm_vnni import vnni_bits
    if features is None:
        from .host import host
        features = host().features
    bits = vnni_bits(features)
    if bits:
        return f"vnni{bits}"
    return "narrowable" if narrow_capable(features) else "pmaddwd"


def qgemm_builder(mod: ir.Module, features: str | None = None,
                  libraries: list | None = None, variant: str | None = None) -> QGemmBuilder:
    """The builder of the int8 GEMM ``variant`` (default: the one for these
    ``features``, ``qgemm_variant``). Its packing buffers come from the scratch helper
    (scratch.py), added to ``libraries`` (a kernel module's helper specs; without a
    list the caller loads it)."""
    from .qgemm_narrow import NarrowWeightQGemmBuilder
    from .qgemm_vnni import VnniQGemmBuilder
    variant = variant or qgemm_variant(features)
    if variant.startswith("vnni"):
        return VnniQGemmBuilder(mod, int(variant[len("vnni"):]), libraries)
    return NarrowWeightQGemmBuilder(mod, libraries) if variant == "narrowable" else QGemmBuilder(mod, libraries)
