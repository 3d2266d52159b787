"""``loop.conv2d {rows}`` (loops/conv.py): a small output plane of a frozen weight,
with the pixels as the GEMM's rows.

conv.py puts an image's output pixels in the micro-kernel's vector lanes (N), so a
plane is computed in whole panels of NR pixels: ResNet-18's 7x7 planes fill 49 of
64 lanes and its 14x14 ones 196 of 224. Here the roles swap, as in an NHWC
convolution: the product is ``Y^T (pixels x O) = P^T (pixels x K) @ W^T (K x O)``,
the output channels are the lanes (layers have 64..512 of them: whole panels) and
the pixels are the rows (MR at a time, leftovers by 8-, 4-, 2- and 1-row kernels).
W^T must be in the micro-kernel's panel layout, which ``conv_rows_prepack`` makes
once from the frozen weight (prepacked.py, as ONNX Runtime packs a model's weights
when its session starts).

    conv_rows(x, wp, y, c, hp, wpad, o, kh, kw, ho, wo)      ; one image, every channel

runs two phases, each split over the pool when the multiply-adds pay for it:
1. ``pack``: the patches P^T of every pixel, by input channels, into one buffer of
   the calling thread's (K-block-major: each block ``m`` rows of its ``kc`` taps),
   each element once, a kernel row of taps at a time;
2. ``multiply``: the channels, by chunks of whole panels; a chunk computes its
   ``m x cols`` tile of C^T into its thread's scratch memory, K block by K block
   (micro-kernels reading the packed rows in place and W^T's panels), then copies
   it into ``y`` transposed (``y[oc, p] = C^T[p, oc]``).
A split of the channels reads each panel of W^T once (a split of the pixels would
stream all of W^T through every thread); the patches are packed once, not once per
chunk (blocks of channels that each packed them: 14x14 at one thread 2.36 -> 2.99 ms).

Invariants: as conv.py's (reads inside the padded image; every output element
written exactly once; K == 0 writes zeros); ``ho * wo <= ROWS_PIXELS`` (loops/conv.py); ``wp``
holds ``prepack``'s panels of all O channels, zero past O.
"""

from __future__ import annotations

import copy

from llvmlite import ir

from ...loops.conv import ROWS_PIXELS
from .conv import ConvBuilder
from .gemm import _i, imax, imin
from .parallel import THREADS, new_worker, parallel_for, worth_threads
from .runtime import for_range
from .scratch import SLOT_CONV_PACK, SLOT_CONV_TILE, scratch, scratch_done
from .types import I1, I32, I64, PREPACK_TYPE, PTR

#: the context both phases' workers read: x, wp, y, the packed patches, then the
#: extents c, hp, wp, o, kh, kw, ho, wo
CTX_WORDS = 12


class ConvRowsBuilder(ConvBuilder):
    def prepack(self, name: str) -> ir.Function:
        """``conv_rows_prepack(w, P, o, k, ldw)``: W^T's panels, ``P[j*NR*k + q*NR + jj]
        = w[(j*NR + jj) * ldw + q]`` for q < k, zero for channels j*NR + jj >= o; P
        holds ceil(o / NR) * NR * k elements (``prepacked.once``'s buffer). Scalar
        copies: it runs once per model, on the first call."""
        if name in self.mod.globals:
            return self.mod.globals[name]
        fn = ir.Function(self.mod, PREPACK_TYPE, name)
        fn.linkage = "internal"
        w, pk, o, k, ldw = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        zero = ir.Constant(self.et, 0.0)

        def channel(oc: ir.Value) -> None:
            panel = b.gep(pk, [b.add(b.mul(b.sdiv(oc, _i(self.nr)), b.mul(_i(self.nr), k)),
                                     b.srem(oc, _i(self.nr)))], source_etype=self.et)
            live = b.icmp_signed("<", oc, o)

            def tap(q: ir.Value) -> None:
                dst = b.gep(panel, [b.mul(q, _i(self.nr))], source_etype=self.et)
                with b.if_else(live) as (copy, pad):
                    with copy:
                        b.store(b.load(b.gep(w, [b.add(b.mul(oc, ldw), q)], source_etype=self.et),
                                       typ=self.et), dst)
                    with pad:
                        b.store(zero, dst)
            for_range(b, _i(0), k, 1, tap, "q")
        for_range(b, _i(0), self.round_up(b, o), 1, channel, "oc")
        b.ret_void()
        return fn

    def driver(self, name: str | None = None) -> ir.Function:
        """``conv_rows`` (module docstring)."""
        name = name or f"wia.conv.rows.{self.tag}"
        if name in self.mod.globals:
            return self.mod.globals[name]
        fn = ir.Function(self.mod, ir.FunctionType(ir.VoidType(), [PTR, PTR, PTR] + [I64] * 8), name)
        fn.linkage = "internal"
        x, wpk, y, c, hp, wp, o, kh, kw, ho, wo = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        m, k = b.mul(ho, wo), b.mul(c, b.mul(kh, kw))
        kcb = self.blocking(b, k, kw)
        blocks = b.sdiv(b.add(k, b.sub(kcb, _i(1))), kcb)
        patches = scratch(self.mod, b, None, SLOT_CONV_PACK,
                          b.add(b.mul(b.mul(b.mul(blocks, m), kcb), _i(self.size)), _i(64)))
        ctx = b.alloca(I64, size=CTX_WORDS)
        for j, v in enumerate((x, wpk, y, patches, c, hp, wp, o, kh, kw, ho, wo)):
            b.store(b.ptrtoint(v, I64) if j < 4 else v, b.gep(ctx, [_i(j)], source_etype=I64))
        pack, multiply = self.pack_worker(), self.multiply_worker()
        cols = self.round_up(b, o)
        go = worth_threads(b, b.mul(b.mul(m, k), o))
        with b.if_else(go) as (par, ser):
            with par:
                pool = parallel_for(self.mod)
                b.call(pool, [pack, ctx, _i(0), c, _i(1), _i(4 * THREADS)])
                chunks = imin(b, imax(b, b.sdiv(cols, _i(self.nr)), _i(THREADS)), _i(4 * THREADS))
                b.call(pool, [multiply, ctx, _i(0), cols, _i(self.nr), chunks])
            with ser:
                b.call(pack, [ctx, _i(0), c])
                b.call(multiply, [ctx, _i(0), cols])
        scratch_done(self.mod, b, SLOT_CONV_PACK, patches)
        b.ret_void()
        return fn

    def _worker(self, name: str) -> tuple[ir.Function, ir.IRBuilder, list[ir.Value], ir.Value, ir.Value]:
        """A new ``parallel_for`` worker of this module with the context's words."""
        fn, b, words, lo, hi = new_worker(self.mod, name, CTX_WORDS)
        ptrs = [b.inttoptr(v, PTR) for v in words[:4]]
        return fn, b, ptrs + words[4:], lo, hi

    def blocking(self, b: ir.IRBuilder, k: ir.Value, kw: ir.Value) -> ir.Value:
        """The K block: ``k_block``'s, rounded up to whole rows of ``kw`` taps (a
        block never splits a kernel row: ``pack_worker`` copies them whole)."""
        kcb = self.k_block(b, k)
        return b.mul(b.sdiv(b.add(kcb, b.sub(kw, _i(1))), kw), kw)

    def block_at(self, b: ir.IRBuilder, patches: ir.Value, q: ir.Value, kcb: ir.Value,
                 m: ir.Value) -> ir.Value:
        """Where tap ``q``'s K block starts: ``m`` rows of ``kcb`` taps per block."""
        return b.gep(patches, [b.mul(b.sdiv(q, kcb), b.mul(m, kcb))], source_etype=self.et)

    def pack_worker(self) -> ir.Function:
        """Phase 1 for the input channels ``[lo, hi)``: their taps of every pixel's
        patch row. Split by channels, a thread reads the input planes that it wrote
        itself (the padded copy and the convolutions split over planes): split by
        pixels, the packing took 4x as long at two threads as at one. A kernel row
        of ``kw`` taps is contiguous in ``x`` (at any stride): up to W taps, one
        masked load and one masked store (one load per tap took ~2.3 cycles an
        element, as long as a quarter of the products), else one tap at a time."""
        name = f"wia.conv.rows.pack.{self.tag}"
        if name in self.mod.globals:
            return self.mod.globals[name]
        fn, b, (x, _, _, patches, c, hp, wp, _, kh, kw, ho, wo), lo, hi = self._worker(name)
        m, k = b.mul(ho, wo), b.mul(c, b.mul(kh, kw))
        kcb = self.blocking(b, k, kw)
        offs = b.alloca(I64, size=ROWS_PIXELS)
        mask_t = ir.VectorType(I1, self.w)
        mload = self.intrinsic(f"llvm.masked.load.v{self.w}{self.suffix}.p0", self.vt,
                               [PTR, I32, mask_t, self.vt])
        mstore = self.intrinsic(f"llvm.masked.store.v{self.w}{self.suffix}.p0", ir.VoidType(),
                                [self.vt, PTR, I32, mask_t])
        align = ir.Constant(I32, self.size)
        taps = self.lane_masks(b, _i(0), kw)
        zero = ir.Constant(self.vt, [0.0] * self.w)

        def pixel(p: ir.Value) -> None:  # offs[p]: where pixel p's patch starts in a plane
            oh, ow = b.sdiv(p, wo), b.srem(p, wo)
            b.store(b.add(b.mul(b.mul(oh, _i(self.sh)), wp), b.mul(ow, _i(self.sw))),
                    b.gep(offs, [p], source_etype=I64))
        for_range(b, _i(0), m, 1, pixel, "px")

        def kernel_row(ci: ir.Value, i: ir.Value) -> None:
            q = b.mul(b.add(b.mul(ci, kh), i), kw)
            dst0 = b.gep(self.block_at(b, patches, q, kcb, m), [b.srem(q, kcb)], source_etype=self.et)
            src0 = b.gep(x, [b.mul(b.add(b.mul(ci, hp), i), wp)], source_etype=self.et)

            def copy(p: ir.Value) -> None:
                src = b.gep(src0, [b.load(b.gep(offs, [p], source_etype=I64), typ=I64)],
                            source_etype=self.et)
                dst = b.gep(dst0, [b.mul(p, kcb)], source_etype=self.et)
                with b.if_else(b.icmp_signed("<=", kw, _i(self.w))) as (vector, wide):
                    with vector:
                        b.call(mstore, [b.call(mload, [src, align, taps, zero]), dst, align, taps])
                    with wide:
                        for_range(b, _i(0), kw, 1, lambda j: b.store(
                            b.load(b.gep(src, [j], source_etype=self.et), typ=self.et),
                            b.gep(dst, [j], source_etype=self.et)), "tap")
            for_range(b, _i(0), m, 1, copy, "pix")
        for_range(b, lo, hi, 1, lambda ci: for_range(b, _i(0), kh, 1, lambda i: kernel_row(ci, i), "kr"),
                  "ci")
        b.ret(ir.Constant(I32, 0))
        return fn

    def multiply_worker(self) -> ir.Function:
        """Phase 2 for the channels ``[lo, hi)`` (whole panels): their C^T tile, then
        ``y``'s planes of the channels below O. With 8-row micro-kernels, a pixel
        count that 7 divides and 8 does not (7x7, 14x14 planes) runs 7-row ones: 49
        pixels as 6 x 8 and one row left a 1-row kernel at a quarter of the speed."""
        name = f"wia.conv.rows.multiply.{self.tag}"
        if name in self.mod.globals:
            return self.mod.globals[name]
        fn, b, (_, wpk, y, patches, c, _, _, o, kh, kw, ho, wo), lo, hi = self._worker(name)
        m, k = b.mul(ho, wo), b.mul(c, b.mul(kh, kw))
        kcb = self.blocking(b, k, kw)
        ldc = b.sub(hi, lo)
        tile = scratch(self.mod, b, None, SLOT_CONV_TILE,
                       b.add(b.mul(b.mul(m, ldc), _i(self.size)), _i(64)))

        def multiply(builder: ConvRowsBuilder) -> None:
            big = builder.ukernel(builder.mr)

            def per_pc(pc: ir.Value) -> None:
                kc = imin(b, b.sub(k, pc), kcb)
                builder.multiply_panels(
                    b, self.block_at(b, patches, pc, kcb, m), kcb, _i(0), kc, wpk,
                    _i(0), ldc, ldc, tile, ldc, m, b.icmp_signed(">", pc, _i(0)), big,
                    panel_at=lambda col: b.gep(wpk, [b.add(b.mul(b.add(lo, col), k), b.mul(pc, _i(self.nr)))],
                                               source_etype=self.et))
            for_range(b, _i(0), k, kcb, per_pc, "pc")
        with b.if_then(b.icmp_signed(">", k, _i(0))):
            if self.mr != 8:
                multiply(self)
            else:
                sevens = copy.copy(self)
                sevens.mr = 7
                by_seven = b.and_(b.icmp_signed("==", b.srem(m, _i(7)), _i(0)),
                                  b.icmp_signed("!=", b.srem(m, _i(8)), _i(0)))
                with b.if_else(by_seven) as (seven, eight):
                    with seven:
                        multiply(sevens)
                    with eight:
                        multiply(self)
        with b.if_then(b.icmp_signed("==", k, _i(0))):  # no taps: the sum is empty
            self.zero_fill(b, tile, m, ldc, ldc, ir.Constant(I1, 0))

        def channel(oc: ir.Value) -> None:  # the tile out, transposed
            dst = b.gep(y, [b.mul(oc, m)], source_etype=self.et)
            src = b.gep(tile, [b.sub(oc, lo)], source_etype=self.et)

            def one(p: ir.Value) -> None:
                b.store(b.load(b.gep(src, [b.mul(p, ldc)], source_etype=self.et), typ=self.et),
                        b.gep(dst, [p], source_etype=self.et))
            for_range(b, _i(0), m, 1, one, "out")
        for_range(b, lo, imin(b, hi, o), 1, channel, "oc")
        scratch_done(self.mod, b, SLOT_CONV_TILE, tile)
        b.ret(ir.Constant(I32, 0))
        return fn
