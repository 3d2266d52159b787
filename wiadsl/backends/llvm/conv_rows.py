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
1. ``pack``: the patches P^T of every pixel, by rows of pixels, into one buffer of
   the calling thread's (K-block-major: block ``pc`` holds ``m x kc`` elements
   from ``pc * m``), each element once, by gathers of W taps;
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

from llvmlite import ir

from .conv import ConvBuilder
from .gemm import _i, imax, imin
from .parallel import THREADS, new_worker, parallel_for, worth_threads
from .runtime import for_range, vector_load, vector_store
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
        patches = scratch(self.mod, b, None, SLOT_CONV_PACK,
                          b.add(b.mul(b.mul(m, imax(b, k, _i(1))), _i(self.size)), _i(64)))
        ctx = b.alloca(I64, size=CTX_WORDS)
        for j, v in enumerate((x, wpk, y, patches, c, hp, wp, o, kh, kw, ho, wo)):
            b.store(b.ptrtoint(v, I64) if j < 4 else v, b.gep(ctx, [_i(j)], source_etype=I64))
        pack, multiply = self.pack_worker(), self.multiply_worker()
        cols = self.round_up(b, o)
        go = worth_threads(b, b.mul(b.mul(m, k), o))
        with b.if_else(go) as (par, ser):
            with par:
                pool = parallel_for(self.mod)
                b.call(pool, [pack, ctx, _i(0), m, _i(1), _i(THREADS)])
                chunks = imin(b, imax(b, b.sdiv(cols, _i(self.nr)), _i(THREADS)), _i(4 * THREADS))
                b.call(pool, [multiply, ctx, _i(0), cols, _i(self.nr), chunks])
            with ser:
                b.call(pack, [ctx, _i(0), m])
                b.call(multiply, [ctx, _i(0), cols])
        scratch_done(self.mod, b, SLOT_CONV_PACK, patches)
        b.ret_void()
        return fn

    def _worker(self, name: str) -> tuple[ir.Function, ir.IRBuilder, list[ir.Value], ir.Value, ir.Value]:
        """A new ``parallel_for`` worker of this module with the context's words."""
        fn, b, words, lo, hi = new_worker(self.mod, name, CTX_WORDS)
        ptrs = [b.inttoptr(v, PTR) for v in words[:4]]
        return fn, b, ptrs + words[4:], lo, hi

    def pack_worker(self) -> ir.Function:
        """Phase 1 for the pixels ``[lo, hi)``: every K block of their patch rows."""
        name = f"wia.conv.rows.pack.{self.tag}"
        if name in self.mod.globals:
            return self.mod.globals[name]
        fn, b, (x, _, _, patches, c, hp, wp, _, kh, kw, ho, wo), lo, hi = self._worker(name)
        kbase = b.alloca(I64, size=self.kc)
        cursors = tuple(b.alloca(I64) for _ in range(3))
        m, k = b.mul(ho, wo), b.mul(c, b.mul(kh, kw))
        kcb = self.k_block(b, k)

        def per_pc(pc: ir.Value) -> None:
            kc = imin(b, b.sub(k, pc), kcb)
            self.row_offsets(b, kbase, pc, kc, (hp, wp, kh, kw), cursors)
            block = b.gep(patches, [b.mul(pc, m)], source_etype=self.et)
            whole = b.mul(b.sdiv(kc, _i(self.w)), _i(self.w))

            def pixel(p: ir.Value) -> None:
                oh, ow = b.sdiv(p, wo), b.srem(p, wo)
                off = b.add(b.mul(b.mul(oh, _i(self.sh)), wp), b.mul(ow, _i(self.sw)))
                row = b.gep(block, [b.mul(p, kc)], source_etype=self.et)
                # W taps at a time, one gather each (one load per tap took ~2.3 cycles
                # an element, as long as a quarter of the products)
                for_range(b, _i(0), whole, self.w,
                          lambda q: self.gather_taps(b, x, kbase, off, q, row), "qv")

                def tap(q: ir.Value) -> None:
                    src = b.add(b.load(b.gep(kbase, [q], source_etype=I64), typ=I64), off)
                    b.store(b.load(b.gep(x, [src], source_etype=self.et), typ=self.et),
                            b.gep(row, [q], source_etype=self.et))
                for_range(b, whole, kc, 1, tap, "q")
            for_range(b, lo, hi, 1, pixel, "px")
        for_range(b, _i(0), k, kcb, per_pc, "pc")
        b.ret(ir.Constant(I32, 0))
        return fn

    def multiply_worker(self) -> ir.Function:
        """Phase 2 for the channels ``[lo, hi)`` (whole panels): their C^T tile, then
        ``y``'s planes of the channels below O."""
        name = f"wia.conv.rows.multiply.{self.tag}"
        if name in self.mod.globals:
            return self.mod.globals[name]
        fn, b, (_, wpk, y, patches, c, _, _, o, kh, kw, ho, wo), lo, hi = self._worker(name)
        m, k = b.mul(ho, wo), b.mul(c, b.mul(kh, kw))
        kcb = self.k_block(b, k)
        ldc = b.sub(hi, lo)
        tile = scratch(self.mod, b, None, SLOT_CONV_TILE,
                       b.add(b.mul(b.mul(m, ldc), _i(self.size)), _i(64)))
        big = self.ukernel(self.mr)

        def per_pc(pc: ir.Value) -> None:
            kc = imin(b, b.sub(k, pc), kcb)
            self.multiply_panels(
                b, b.gep(patches, [b.mul(pc, m)], source_etype=self.et), kc, _i(0), kc, wpk,
                _i(0), ldc, ldc, tile, ldc, m, b.icmp_signed(">", pc, _i(0)), big,
                panel_at=lambda col: b.gep(wpk, [b.add(b.mul(b.add(lo, col), k), b.mul(pc, _i(self.nr)))],
                                           source_etype=self.et))
        with b.if_then(b.icmp_signed(">", k, _i(0))):
            for_range(b, _i(0), k, kcb, per_pc, "pc")
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

    def gather_taps(self, b: ir.IRBuilder, x: ir.Value, kbase: ir.Value, off: ir.Value,
                    q: ir.Value, row: ir.Value) -> None:
        """row[q:q+W] = x[kbase[q:q+W] + off]: one masked gather (all lanes on)."""
        vi, vp = ir.VectorType(I64, self.w), ir.VectorType(PTR, self.w)
        mask_t = ir.VectorType(I1, self.w)
        gather = self.intrinsic(f"llvm.masked.gather.v{self.w}{self.suffix}.v{self.w}p0", self.vt,
                                [vp, I32, mask_t, self.vt])
        taps = vector_load(b, b.gep(kbase, [q], source_etype=I64), vi, 8)
        base = self.splat(b, b.add(b.ptrtoint(x, I64), b.mul(off, _i(self.size))), vi)
        ptrs = b.inttoptr(b.add(base, b.mul(taps, ir.Constant(vi, [self.size] * self.w))), vp)
        v = b.call(gather, [ptrs, ir.Constant(I32, self.size), ir.Constant(mask_t, [1] * self.w),
                            ir.Constant(self.vt, ir.Undefined)])
        vector_store(b, v, b.gep(row, [q], source_etype=self.et), self.size)
