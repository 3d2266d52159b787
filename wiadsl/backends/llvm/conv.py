"""The ``loop.conv2d`` kernel: implicit GEMM on the ``loop.gemm`` micro-kernel.

The convolution of one image is the product W (O x K) @ P (K x HO*WO) with
K = C*KH*KW and P the im2col matrix; P is never materialized. The output
pixels are one flat index ``p = oh * wo + ow`` (the GEMM's N dimension, which
is ``y``'s contiguous one), so a micro-kernel tile is 16 consecutive pixels of
MR output channels, stored with plain vector stores even where it crosses from
one output row into the next (only the image's last tile can be ragged).
Loop order, per chunk of pixels (the unit ``parallel_for`` hands to a thread):
    for pb in pixels by NB:               a block whose packed patches stay in L2
      for pc in K by kc:                  kc = K split into equal blocks of <= KC
        pack P[pc:pc+kc, pb:pb+NB] into NR-wide panels (each element once)
        for ic in O by MC:
          for each NR-wide panel:
            for ir in ic..ic+MC by MR:    micro-kernel (gemm.py): W rows, C = y
The pixel dimension is the one split over threads: every chunk packs only its
own patches (no packing is duplicated, unlike a split over output channels), and
chunks are claimed dynamically by the pool (parallel.py), several per thread.

Packing: the source of K row ``q = (ci, i, j)`` for pixel ``p`` is
``x[base(q) + off(p)]`` with ``base(q) = (ci*hp + i)*wp + j`` (computed once per
K block) and ``off(p) = oh*sh*wp + ow*sw``. With ``sw == 1`` a W-lane vector of
pixels that stays in one output row is one contiguous (plain or, at the image's
end, masked) load; one that crosses into the next row is two masked loads and a
select (the input is pre-padded by the lowering: no clamping). With ``sw == 2``
a vector inside one row is two masked loads and an even-lane shuffle, one across two
rows that twice and a select. Otherwise
(other strides, rows narrower than a vector) each lane is loaded from its own
offset and inserted into the vector.
The loop over K rows is innermost, so each vector's case is decided once.
A 1x1 kernel at stride 1 on an unpadded input needs no gathering (K row ci is input
plane ci): its panels are read in place, or copied one at a time where their rows
would crowd one L1 set (``panel_reads``).

Direct (``direct_tiles``): at stride 1, where output rows are whole tiles of NR
pixels, a tile's K row ``(ci, i, j)`` is NR consecutive elements of the padded input
itself, so nothing is packed: ``direct_ukernel`` walks the window (input channels,
rows, columns) and reads them in place, for every row block of output channels
while the tile's rows are in L1 (``direct_applies``). Packing was a third of a small CNN's time (3 -> 8
and 8 -> 16 channels at 32x32 and 16x16, batch 8, one thread, Zen 3: 98 -> 56 and
84 -> 61 us per convolution). Where each output row is one vector of W pixels, a
tile is NR / W rows, each vector's K row W consecutive elements of its own input row
(Zen 5, one thread, batch 4, 3x3 with ReLU, packed -> direct: 8 -> 8 channels at 16x16
11.7 -> 7.0 us, 16 -> 16 30 -> 21.5; the exported ResNet-18 at 1/8 width 77 -> 73 us,
the small CNN model 54 -> 43.5).

Invariants: reads stay inside the padded image (loops/conv.py); every y element
of the image is written exactly once per K block (the first stores, later ones
accumulate), and K == 0 writes zeros.
"""

from __future__ import annotations

from collections.abc import Callable

from llvmlite import ir

from ...dtypes import DType
from ...loops.conv import DIRECT_WEIGHTS  # the weights ``direct_tiles`` takes, at most
from .caches import in_place_tiles, l1_data_bytes, set_rows
from .gemm import NO_EPILOGUE, GemmBuilder, _i, imax, imin, k_loop, one_set
from .gemm_config import direct_ukernel_symbol
from .parallel import THREADS, new_worker, parallel_for, worth_threads
from .runtime import for_range, vector_load, vector_store
from .scratch import SLOT_CONV_PACK, scratch, scratch_done
from .types import I1, I32, I64, PTR, Callee, splat, undef, zeros

NB = 256   # output pixels per packed block: at most KC x 256 floats = 512 KiB, in L2
ARGS = [PTR, PTR, PTR] + [I64] * 8  # x, w, y, c, hp, wp, o, kh, kw, ho, wo
#: pixels per chunk handed to a thread, at least (smaller images get fewer chunks)
CHUNK_PIXELS = 128


class ConvBuilder(GemmBuilder):
    def __init__(self, mod: ir.Module, dtype: DType, stride: tuple[int, int],
                 define_ukernels: bool = False):
        super().__init__(mod, dtype, define_ukernels=define_ukernels)
        self.sh, self.sw = stride
        self.tag = f"{self.suffix}.s{self.sh}x{self.sw}"
        self.nb = max(self.nr, NB // self.nr * self.nr)

    def lane_masks(self, b: ir.IRBuilder, lo: ir.Value, hi: ir.Value) -> ir.Value:
        """<W x i1>: lanes ``lo <= lane < hi``."""
        vi = ir.VectorType(I64, self.w)
        lanes = ir.Constant(vi, list(range(self.w)))
        return b.and_(b.icmp_signed("<=", splat(b, lo, vi), lanes),
                      b.icmp_signed(">", splat(b, hi, vi), lanes))

    def pack_vector(self, b: ir.IRBuilder, x: ir.Value, kbase: ir.Value, kc: ir.Value, dst: ir.Value,
                    offs: ir.Value, ows: ir.Value, valid: ir.Value, wo: ir.Value, wp: ir.Value) -> None:
        """dst[p * NR + jj] = x[kbase[p] + offs[jj]] for p < kc and jj < min(valid, W),
        zero for the other lanes; ``offs``/``ows`` hold the source offset and output
        column of the vector's pixels (``dst`` is W lanes into a panel row: aligned to
        ``vector_align``)."""
        zero = zeros(self.vt)
        mask_t = ir.VectorType(I1, self.w)
        mload = self.intrinsic(f"llvm.masked.load.v{self.w}{self.suffix}.p0", self.vt,
                               [PTR, I32, mask_t, self.vt])
        align = ir.Constant(I32, self.size)
        valid = imin(b, valid, _i(self.w))

        def rows(load: Callable[[ir.Value], ir.Value]) -> None:
            def body(p: ir.Value) -> None:
                base = b.load(b.gep(kbase, [p], source_etype=I64), typ=I64)
                # dst is a panel row plus a multiple of W lanes
                vector_store(b, load(base), b.gep(dst, [b.mul(p, _i(self.nr))], source_etype=self.et),
                             self.vector_align)
            for_range(b, _i(0), kc, 1, body, "pk")

        def lanes() -> None:  # any stride or row width: one scalar load per lane
            live = self.lane_masks(b, _i(0), valid)
            lane_offs = [b.select(b.icmp_signed(">", valid, _i(jj)),
                                  b.load(b.gep(offs, [_i(jj)], source_etype=I64), typ=I64), _i(0))
                         for jj in range(self.w)]

            def gather(base: ir.Value) -> ir.Value:
                vec: ir.Value = undef(self.vt)
                for jj, off in enumerate(lane_offs):
                    v = b.load(b.gep(x, [b.add(base, off)], source_etype=self.et), typ=self.et)
                    vec = b.insert_element(vec, v, ir.Constant(I32, jj))
                return b.select(live, vec, zero)
            rows(gather)

        def evens(off: ir.Value, first: ir.Value, last: ir.Value) -> Callable[[ir.Value], ir.Value]:
            """Lanes ``[first, last)`` of a vector whose lane jj is element ``off + 2 jj``
            (stride 2), zero in the others: two masked loads of the elements from
            ``2 first`` to ``2 last - 2``, then the even ones."""
            start, span = b.mul(first, _i(2)), b.sub(b.mul(last, _i(2)), _i(1))
            w = _i(self.w)
            lo, hi = self.lane_masks(b, start, span), self.lane_masks(b, b.sub(start, w), b.sub(span, w))
            even = ir.Constant(ir.VectorType(I32, self.w), [2 * jj for jj in range(self.w)])

            def pick(base: ir.Value) -> ir.Value:
                at = b.gep(x, [b.add(base, off)], source_etype=self.et)
                va = b.call(mload, [at, align, lo, zero])
                vb = b.call(mload, [b.gep(at, [w], source_etype=self.et), align, hi, zero])
                return b.shuffle_vector(va, vb, even)
            return pick

        def contiguous(off: ir.Value, first: ir.Value, last: ir.Value) -> Callable[[ir.Value], ir.Value]:
            """Lanes ``[first, last)`` of a vector whose lane jj is element ``off + jj``
            (stride 1), zero in the others: one masked load."""
            mask = self.lane_masks(b, first, last)
            return lambda base: b.call(mload, [b.gep(x, [b.add(base, off)], source_etype=self.et),
                                               align, mask, zero])
        if self.sw not in (1, 2):
            lanes()
            return
        off_a = b.load(offs, typ=I64)
        ow = b.load(ows, typ=I64)
        in_row = b.sub(wo, ow)  # lanes [0, in_row) are in the first pixel's output row
        one_row = b.icmp_signed(">=", in_row, valid)
        two_rows = b.icmp_signed("<=", b.sub(valid, in_row), wo)
        # lane jj >= in_row is column jj - in_row of the next output row
        off_b = b.sub(b.add(b.sub(off_a, b.mul(ow, _i(self.sw))), b.mul(_i(self.sh), wp)),
                      b.mul(in_row, _i(self.sw)))
        part = contiguous if self.sw == 1 else evens
        with b.if_else(one_row) as (within, other):
            with within:
                if self.sw == 1:  # a whole vector in one row: a plain load
                    with b.if_else(b.icmp_signed("==", valid, _i(self.w))) as (full, ragged):
                        with full:
                            rows(lambda base: vector_load(b, b.gep(x, [b.add(base, off_a)], source_etype=self.et),
                                                          self.vt, self.size))
                        with ragged:
                            rows(part(off_a, _i(0), valid))
                else:
                    rows(part(off_a, _i(0), valid))
            with other:
                # across two rows (at stride 2: ResNet-18's 28-wide layers, half their
                # vectors), each row part as within one, then a select
                with b.if_else(two_rows) as (split, scattered):
                    with split:
                        first, second = part(off_a, _i(0), in_row), part(off_b, in_row, valid)
                        mask_a = self.lane_masks(b, _i(0), in_row)
                        rows(lambda base: b.select(mask_a, first(base), second(base)))
                    with scattered:
                        lanes()

    def direct_ukernel(self, mr: int) -> ir.Function:
        """``duk(a, lda, x, c, ldc, ci, kh, kw, plane, wp, vstep, epi, row)``: the ``mr`` x NR
        tile of C at ``c`` (rows ``ldc`` apart, NR consecutive elements each) = A[mr x K]
        @ the tile's patches, read from the padded input itself: at stride 1, K row
        ``(ci, i, j)`` of the tile's W-pixel vector ``v`` is the W elements at
        ``x + ci*plane + i*wp + j + v*vstep``, where ``x`` is the tile's first pixel's
        window corner and ``vstep`` is W where a tile lies in one output row, ``wp``
        where each vector is a whole output row (``direct_applies``). No packing, no K
        blocks: the accumulators start at zero and are stored once, through the epilogue
        at ``epi`` if not null (gemm.py's ``tile_epilogue``; fewer than MR rows: applied
        to the stored tile, ``stored_tile_epilogue``). (gemm.py's ``ukernel`` reads a
        packed panel.)
        Declared unless ``define_ukernels``: the "dukernels" helper defines them once for
        both stride-1 drivers (``conv`` and ``conv_range``; a copy in each was a third of
        their code)."""
        name = direct_ukernel_symbol(self.suffix, self.config, mr)
        if name in self.mod.globals:
            return self.mod.globals[name]
        fn = ir.Function(self.mod, ir.FunctionType(ir.VoidType(), [PTR, I64, PTR, PTR] + [I64] * 7 + [PTR, I64]),
                         name)
        if not self.define_ukernels:
            return fn
        fn.attributes.add("noinline")  # linked into AOT output, still one copy
        a, lda, x, c, ldc, cin, kh, kw, plane, wp, vstep, epi, row = fn.args
        for p in (a, x, c):
            p.add_attribute("noalias")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        nv = self.nr // self.w
        fma = self.intrinsic(f"llvm.fmuladd.v{self.w}{self.suffix}", self.vt, [self.vt] * 3)
        zero = zeros(self.vt)
        # the weight rows' starts, once (the IR is compiled without IR passes: no LICM)
        rows = [b.gep(a, [b.mul(_i(r), lda)], source_etype=self.et) for r in range(mr)]
        vector_offsets = [b.mul(_i(v), vstep) for v in range(nv)]  # of the tile's vectors in x

        def per_ci(ci: ir.Value, accs: list[ir.Value], _: int) -> list[ir.Value]:
            x_ci = b.gep(x, [b.mul(ci, plane)], source_etype=self.et)

            def per_i(i: ir.Value, accs: list[ir.Value], _: int) -> list[ir.Value]:
                row = b.gep(x_ci, [b.mul(i, wp)], source_etype=self.et)
                q0 = b.mul(b.add(b.mul(ci, kh), i), kw)

                def per_j(j: ir.Value, accs: list[ir.Value], _: int) -> list[ir.Value]:
                    at = b.gep(row, [j], source_etype=self.et)
                    bvecs = [vector_load(b, b.gep(at, [off], source_etype=self.et) if v else at, self.vt, self.size)
                             for v, off in enumerate(vector_offsets)]
                    q = b.add(q0, j)
                    nexts = []
                    for r in range(mr):
                        xs = splat(b, b.load(b.gep(rows[r], [q], source_etype=self.et), typ=self.et), self.vt)
                        nexts += [b.call(fma, [xs, bvecs[v], accs[r * nv + v]]) for v in range(nv)]
                    return nexts
                return k_loop(b, _i(0), accs, kw, 1, per_j, "dj")[1]
            return k_loop(b, _i(0), accs, kh, 1, per_i, "di")[1]
        _, accs = k_loop(b, _i(0), [zero] * (mr * nv), cin, 1, per_ci, "dc")

        c_at = self.tile_vectors(b, c, ldc)
        if mr == self.config.mr:
            accs = self.tile_epilogue(b, epi, row, accs, mr, (c_at, ir.Constant(I1, 1), None))
        for r in range(mr):
            for v in range(nv):
                vector_store(b, accs[r * nv + v], c_at(r, v), self.size)
        if mr != self.config.mr:
            self.stored_tile_epilogue(b, (c, ldc, _i(self.nr)), epi, row, mr)
        b.ret_void()
        return fn

    def direct_applies(self, b: ir.IRBuilder, c: ir.Value, kh: ir.Value, kw: ir.Value,
                       o: ir.Value, ho: ir.Value, wo: ir.Value) -> ir.Value | None:
        """Whether ``direct_tiles`` computes the image (None: never, at this stride): stride
        1, a window wider than one pixel (a 1x1 kernel has ``panel_reads``), whole tiles
        whose vectors each stay in one output row (``row_vectors``: a vector's patch rows
        are contiguous and its reads stay in the padded row), a tile's patch rows (C x KH
        of them per output row the tile covers, in whole cache lines) and one row block of
        the weight (MR x K) in L1 together (each row block reads all those rows again),
        and a weight that stays in L2 (every tile reads all of it). Measured at one thread
        (Zen 3, 32 KiB L1), packed -> direct, 3x3: 48 -> 24 channels at 64x64 (28 KiB)
        1213-1459 -> 1116-1302 us, but 56 -> 32 at 32x32 (33 KiB) 446-526 -> 465-662."""
        if (self.sh, self.sw) != (1, 1):
            return None
        k = b.mul(c, b.mul(kh, kw))
        whole, per_row = self.row_vectors(b, ho, wo)
        segment = b.select(per_row, _i(self.w), _i(self.nr))  # a tile's pixels in one output row
        segments = b.select(per_row, _i(self.nr // self.w), _i(1))
        line_bytes = b.mul(b.sdiv(b.add(b.mul(b.add(kw, b.sub(segment, _i(1))), _i(self.size)), _i(63)),
                                  _i(64)), _i(64))
        in_l1 = b.add(b.mul(b.mul(b.mul(c, kh), segments), line_bytes), b.mul(k, _i(self.mr * self.size)))
        ok = b.and_(b.icmp_signed(">", b.mul(kh, kw), _i(1)), b.or_(whole, per_row))
        return b.and_(ok, b.and_(b.icmp_signed("<=", in_l1, _i(l1_data_bytes())),
                                 b.icmp_signed("<=", b.mul(o, k), _i(DIRECT_WEIGHTS))))

    def row_vectors(self, b: ir.IRBuilder, ho: ir.Value, wo: ir.Value) -> tuple[ir.Value, ir.Value]:
        """(whole, per_row): output rows are whole tiles of NR pixels; or each output row
        is one W-pixel vector and the image whole tiles of NR / W rows (16-pixel rows on
        AVX-512, 8-pixel ones on AVX2: ResNet-18's first stage at 64x64)."""
        whole = b.icmp_signed("==", b.srem(wo, _i(self.nr)), _i(0))
        if self.nr == self.w:
            return whole, ir.Constant(I1, 0)
        per_row = b.and_(b.icmp_signed("==", wo, _i(self.w)),
                         b.icmp_signed("==", b.srem(ho, _i(self.nr // self.w)), _i(0)))
        return whole, per_row

    def direct_tiles(self, b: ir.IRBuilder, x: ir.Value, w: ir.Value, y: ir.Value,
                     dims: tuple[ir.Value, ...], p_lo: ir.Value, p_hi: ir.Value, epi: ir.Value) -> None:
        """Output pixels ``[p_lo, p_hi)`` (whole tiles) of every channel by ``direct_ukernel``:
        per tile of NR pixels, its rows of output channels (``row_tiles``), which all read
        the tile's patch rows while they are in L1."""
        c, hp, wp, o, kh, kw, k, wo, ldc = dims
        # from a tile's vector to its next: W pixels on in one output row, or the next row
        vstep = b.select(b.icmp_signed("==", b.srem(wo, _i(self.nr)), _i(0)), _i(self.w), wp)

        def tile(col: ir.Value) -> None:
            corner = b.gep(x, [b.add(b.mul(b.sdiv(col, wo), wp), b.srem(col, wo))], source_etype=self.et)

            def call(kernel: ir.Function | Callee, row: ir.Value) -> None:
                b.call(kernel, [b.gep(w, [b.mul(row, k)], source_etype=self.et), k, corner,
                                b.gep(y, [b.add(b.mul(row, ldc), col)], source_etype=self.et), ldc,
                                c, kh, kw, b.mul(hp, wp), wp, vstep, epi, row])
            self.row_tiles(b, _i(0), o, self.direct_ukernel, call, "dt")
        for_range(b, p_lo, p_hi, self.nr, tile, "dp")

    def panel_reads(self, b: ir.IRBuilder, khw: ir.Value, hp: ir.Value, wp: ir.Value,
                    ho: ir.Value, wo: ir.Value, o: ir.Value, kcb: ir.Value) -> tuple[ir.Value, ir.Value]:
        """(in place, copied): how a 1x1 kernel at stride 1 on an unpadded input (K row
        ci of the patches is input plane ci) gets its patch panels; neither: packed with
        the block's other panels, as every other convolution. In place, unless the
        panel's rows all fall in one L1 set (planes a multiple of 4 KiB apart), there
        are more of them than the L1 keeps (a K block above caches.py's ``set_rows``)
        and more row tiles read them than ``in_place_tiles``: then each panel is copied
        right before its row tiles read it, while the output channels are one block of
        rows (at most MC: the tiles of all of them read the copy); more channels pack the
        block (their row blocks each read all of its panels). Measured at one thread (AMD Zen 5, a 12-way L1), packed -> in place:
        64 -> 16 channels at 32x32 90 -> 55 us, 16 -> 64 at 32x32 72 -> 52, 512 -> 128 at
        16x16 152 -> 136, 128 -> 128 at 56x56 425 -> 405; but 256 -> 256 at 32x32 589 ->
        689 and 64 -> 256 at 64x64 592 -> 711. On AMD Zen 3 (an 8-way L1), with a
        residual add, minimum of 9 batches in 3 alternating processes, in place or
        packed (stop 49's rule) -> copied: 64 -> 16 channels at 32x32, batch 4, 264-288
        -> 170-213 us (in place), 32 -> 16 102-139 -> 91-116 (in place), 64 -> 32 378-404
        -> 279-422 (packed), 128 -> 32 705-715 -> 521-585 (packed), 64 -> 16 at 64x64
        214-223 -> 189-195 (in place), 32 -> 24 at 64x64 204-214 -> 164-170 (in place);
        16 -> 64 the same; but 256 -> 256 at 32x32 6880-7237 -> 7569-7822 and 64 -> 256
        at 64x64 2216-2278 -> 2408-2606 (packed), so many channels still pack."""
        unit = b.and_(b.icmp_signed("==", khw, _i(1)),
                      b.and_(b.icmp_signed("==", hp, ho), b.icmp_signed("==", wp, wo)))
        crowded = b.and_(one_set(b, b.mul(b.mul(ho, wo), _i(self.size))),
                         b.icmp_signed(">", kcb, _i(set_rows())))
        # few row tiles read even a crowded panel in place (caches.py's in_place_tiles)
        crowded = b.and_(crowded, b.icmp_signed(">", o, _i(in_place_tiles() * self.mr)))
        in_place = b.and_(unit, b.not_(crowded))
        copied = b.and_(b.and_(unit, crowded), b.icmp_signed("<=", o, _i(self.mc)))
        return in_place, copied

    def pixels(self) -> ir.Function:
        """``conv.pixels(x, w, y, c, hp, wp, o, kh, kw, ho, wo, p_lo, p_hi, epi)``: output
        pixels ``[p_lo, p_hi)`` (flat ``oh * wo + ow``; ``p_lo`` a multiple of NR) of every
        output channel of one image, single-threaded; ``epi`` (null: none) is a
        ``TileEpilogue`` record (gemm.py) the micro-kernels apply to every tile as they
        store it for the last time (at the last K block: its channel affine and clamp
        cost no pass over the output)."""
        name = f"wia.conv.pixels.{self.tag}"
        if name in self.mod.globals:
            return self.mod.globals[name]
        fn = ir.Function(self.mod, ir.FunctionType(ir.VoidType(), ARGS + [I64, I64, PTR]), name)
        fn.linkage = "internal"
        x, w, y, c, hp, wp, o, kh, kw, ho, wo, p_lo, p_hi, epi = fn.args
        for p in (x, w, y):
            p.add_attribute("noalias")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        kbase = b.alloca(I64, size=self.kc)
        offs, ows = b.alloca(I64, size=self.nb), b.alloca(I64, size=self.nb)
        kci, ki, kj, koh, kow = (b.alloca(I64) for _ in range(5))
        khw = b.mul(kh, kw)
        k = b.mul(c, khw)
        ldc = b.mul(ho, wo)
        # K in equal blocks of at most KC (576 = 3 x 192, not 256 + 256 + 64)
        nkb = imax(b, b.sdiv(b.add(k, _i(self.kc - 1)), _i(self.kc)), _i(1))
        kcb = b.sdiv(b.add(k, b.sub(nkb, _i(1))), nkb)
        # pixels in equal blocks of at most NB, multiples of NR
        span = b.sub(p_hi, p_lo)
        nblk = imax(b, b.sdiv(b.add(span, _i(self.nb - 1)), _i(self.nb)), _i(1))
        blk = b.sdiv(b.add(span, b.sub(nblk, _i(1))), nblk)
        blk = self.round_up(b, blk)
        reads = None if (self.sh, self.sw) != (1, 1) else self.panel_reads(b, khw, hp, wp, ho, wo, o, kcb)
        # one block's panels at this K block (not NB x KC: see gemm's rows)
        packed = scratch(self.mod, b, None, SLOT_CONV_PACK,
                         b.add(b.mul(b.mul(blk, kcb), _i(self.size)), _i(64)))

        def per_block(pb: ir.Value) -> None:
            pe = imin(b, b.add(pb, blk), p_hi)
            # whole panels: lanes past pe (the image's end) are packed as zeros
            pend = b.add(pb, b.mul(b.sdiv(b.add(b.sub(pe, pb), _i(self.nr - 1)), _i(self.nr)), _i(self.nr)))
            # offs[r] / ows[r]: source offset and output column of pixel pb + r (one
            # division, then stepped) for the pixels that are packed: all of them,
            # with panels read in place only a ragged last panel's, and none with
            # panels copied (``pack`` reads planes, not offsets)
            whole = b.add(pb, b.mul(b.sdiv(b.sub(pe, pb), _i(self.nr)), _i(self.nr)))
            first: ir.Value = _i(0)
            if reads is not None:
                first = b.select(reads[0], b.sub(whole, pb), b.select(reads[1], b.sub(pend, pb), first))
            at = b.add(pb, first)
            b.store(b.sdiv(at, wo), koh)
            b.store(b.srem(at, wo), kow)

            def pixel(r: ir.Value) -> None:
                oh, ow = b.load(koh, typ=I64), b.load(kow, typ=I64)
                b.store(b.add(b.mul(b.mul(oh, _i(self.sh)), wp), b.mul(ow, _i(self.sw))),
                        b.gep(offs, [r], source_etype=I64))
                b.store(ow, b.gep(ows, [r], source_etype=I64))
                ow1 = b.add(ow, _i(1))
                wrap = b.icmp_signed("==", ow1, wo)
                b.store(b.select(wrap, _i(0), ow1), kow)
                b.store(b.select(wrap, b.add(oh, _i(1)), oh), koh)
            for_range(b, first, b.sub(pend, pb), 1, pixel, "px")

            def per_pc(pc: ir.Value) -> None:
                kc = imin(b, b.sub(k, pc), kcb)
                last = b.select(b.icmp_signed(">=", b.add(pc, kc), k), epi, NO_EPILOGUE)

                # kbase[p]: the offset of K row pc + p = (ci, i, j), stepped without divisions
                b.store(b.sdiv(pc, khw), kci)
                b.store(b.sdiv(b.srem(pc, khw), kw), ki)
                b.store(b.srem(pc, kw), kj)

                def decode(p: ir.Value) -> None:
                    ci, i, j = (b.load(v, typ=I64) for v in (kci, ki, kj))
                    b.store(b.add(b.mul(b.add(b.mul(ci, hp), i), wp), j), b.gep(kbase, [p], source_etype=I64))
                    j1 = b.add(j, _i(1))
                    wrap_j = b.icmp_signed("==", j1, kw)
                    i1 = b.select(wrap_j, b.add(i, _i(1)), i)
                    wrap_i = b.icmp_signed("==", i1, kh)
                    b.store(b.select(wrap_j, _i(0), j1), kj)
                    b.store(b.select(wrap_i, _i(0), i1), ki)
                    b.store(b.select(wrap_i, b.add(ci, _i(1)), ci), kci)
                if reads is None:
                    for_range(b, _i(0), kc, 1, decode, "kb")
                else:  # copied panels never read kbase
                    with b.if_then(b.not_(reads[1])):
                        for_range(b, _i(0), kc, 1, decode, "kb")

                def pack_v(p0: ir.Value) -> None:
                    rel = b.sub(p0, pb)
                    t, lane0 = b.sdiv(rel, _i(self.nr)), b.srem(rel, _i(self.nr))
                    dst = b.gep(packed, [b.add(b.mul(b.mul(t, kc), _i(self.nr)), lane0)], source_etype=self.et)
                    self.pack_vector(b, x, kbase, kc, dst, b.gep(offs, [rel], source_etype=I64),
                                     b.gep(ows, [rel], source_etype=I64), b.sub(pe, p0), wo, wp)
                load_c = b.icmp_signed(">", pc, _i(0))

                def pack_all() -> None:
                    for_range(b, pb, pend, self.w, pack_v, "pv")
                    self.multiply_panels(b, w, k, pc, kc, packed, pb, pe, pe, y, ldc, o, load_c, epi=last)
                if reads is None:
                    pack_all()
                    return

                def copy_each(col: ir.Value) -> None:  # one panel of planes, then its tiles
                    end = b.add(col, _i(self.nr))
                    self.pack(b, x, ldc, pc, kc, col, end, pe, packed)
                    self.multiply_panels(b, w, k, pc, kc, packed, col, end, pe, y, ldc, o, load_c, epi=last)
                # a 1x1 kernel at stride 1, unpadded: K row ci of the patches is input
                # plane ci itself, so whole panels are read in place (rows ldc apart; only
                # the ragged last one is packed) or copied one by one (``panel_reads``)
                in_place_reads, copied = reads
                with b.if_else(in_place_reads) as (in_place, other):
                    with other:
                        with b.if_else(copied) as (copying, packing):
                            with copying:
                                for_range(b, pb, pend, self.nr, copy_each, "pj")
                            with packing:
                                pack_all()
                    with in_place:
                        self.multiply_panels(
                            b, w, k, pc, kc, packed, pb, whole, pe, y, ldc, o, load_c,
                            panels=(b.gep(x, [b.mul(pc, ldc)], source_etype=self.et), _i(1)),
                            row_stride=ldc, epi=last)
                        with b.if_then(b.icmp_signed("<", whole, pe)):
                            for_range(b, whole, pend, self.w, pack_v, "pv")
                            self.multiply_panels(
                                b, w, k, pc, kc, packed, whole, pe, pe, y, ldc, o, load_c,
                                panels=(b.gep(packed, [b.neg(b.mul(pb, kc))], source_etype=self.et), kc),
                                epi=last)
            for_range(b, _i(0), k, kcb, per_pc, "pc")
        direct = self.direct_applies(b, c, kh, kw, o, ho, wo)
        with b.if_then(b.icmp_signed(">", k, _i(0))):
            if direct is None:
                for_range(b, p_lo, p_hi, blk, per_block, "pb")
            else:
                with b.if_else(direct) as (taps, packing):
                    with taps:
                        self.direct_tiles(b, x, w, y, (c, hp, wp, o, kh, kw, k, wo, ldc), p_lo, p_hi, epi)
                    with packing:
                        for_range(b, p_lo, p_hi, blk, per_block, "pb")
        with b.if_then(b.icmp_signed("==", k, _i(0))):  # no taps: the sum is empty
            # micro-kernels of no k steps: zero tiles, through the epilogue if any
            self.multiply_panels(b, w, k, _i(0), _i(0), packed, p_lo, p_hi, p_hi, y, ldc, o,
                                 ir.Constant(I1, 0), epi=epi)
        scratch_done(self.mod, b, SLOT_CONV_PACK, packed)
        b.ret_void()
        return fn

    def conv_worker(self, pixels: ir.Function) -> ir.Function:
        """``i32 worker(ptr ctx, i64 lo, i64 hi)`` for ``parallel_for``: ctx holds ARGS."""
        name = f"wia.conv.worker.{self.tag}"
        if name in self.mod.globals:
            return self.mod.globals[name]
        fn, b, vals, lo, hi = new_worker(self.mod, name, len(ARGS))
        b.call(pixels, [*(b.inttoptr(v, PTR) for v in vals[:3]), *vals[3:], lo, hi, NO_EPILOGUE])
        b.ret(ir.Constant(I32, 0))
        return fn

    def range_driver(self, name: str) -> ir.Function:
        """``conv_range(x, w, y, c, hp, wp, o, kh, kw, ho, wo, p_lo, p_hi, epi)``: output
        pixels ``[p_lo, p_hi)`` of every channel on the calling thread (``pixels``, with
        its ``epi``); a kernel that splits an image into chunks itself (loops/conv.py,
        with an epilogue per chunk or in ``epi``) calls it from its own parallel loop."""
        if name in self.mod.globals:
            return self.mod.globals[name]
        pixels = self.pixels()
        fn = ir.Function(self.mod, ir.FunctionType(ir.VoidType(), ARGS + [I64, I64, PTR]), name)
        fn.linkage = "internal"
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        b.call(pixels, list(fn.args))
        b.ret_void()
        return fn

    def driver(self, name: str | None = None) -> ir.Function:
        """``conv(x, w, y, c, hp, wp, o, kh, kw, ho, wo)``: output pixels split over the
        pool in chunks of whole panels when the multiply-adds pay for it."""
        name = name or f"wia.conv.{self.tag}"
        if name in self.mod.globals:
            return self.mod.globals[name]
        pixels = self.pixels()
        fn = ir.Function(self.mod, ir.FunctionType(ir.VoidType(), ARGS), name)
        fn.linkage = "internal"
        args = list(fn.args)
        c, o, kh, kw, ho, wo = args[3], args[6], args[7], args[8], args[9], args[10]
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        npix = b.mul(ho, wo)
        macs = b.mul(b.mul(b.mul(o, npix), c), b.mul(kh, kw))
        go = b.and_(worth_threads(b, macs), b.icmp_signed(">=", npix, _i(2 * self.nr)))
        with b.if_else(go) as (par, ser):
            with par:
                ctx = b.alloca(I64, size=len(ARGS))
                for j, v in enumerate(args):
                    b.store(b.ptrtoint(v, I64) if j < 3 else v, b.gep(ctx, [_i(j)], source_etype=I64))
                chunks = imin(b, imax(b, b.sdiv(npix, _i(CHUNK_PIXELS)), _i(THREADS)), _i(4 * THREADS))
                b.call(parallel_for(self.mod), [self.conv_worker(pixels), ctx, _i(0), npix, _i(self.nr), chunks])
            with ser:
                b.call(pixels, [*args, _i(0), npix, NO_EPILOGUE])
        b.ret_void()
        return fn
