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

splits the image's pixels over the pool (one chunk per thread, whole micro-kernel
rows) when the multiply-adds pay for it. A chunk (``pixels_part``):
1. packs its pixels' patches P^T into its thread's scratch memory (K-block-major:
   each block the chunk's rows of its ``kc`` taps), a kernel row of taps at a time;
2. for each K block, multiplies them by its panels of W^T into its C^T tile
   (``m x cols``, scratch memory too);
3. copies the tile into ``y`` transposed (``y[oc, p] = C^T[p, oc]``).
Split by pixels, a thread packs only the patches it multiplies, into memory no other
thread reads, from input rows that it mostly wrote itself (the previous layer split
the same way); both threads stream the read-only W^T at once. Split by channels with
the patches packed once and shared, packing took 3-4x as long at two threads as at
one, the cache lines moving between the cores; and blocks of channels that each
packed all the patches ran a 14x14 layer 2.36 -> 2.99 ms at one thread. But a plane
of fewer than COLUMN_SPLIT_ROWS pixels per thread is split by channels, each chunk
packing every patch (``split_driver``): split by pixels, its threads were uneven and
each streamed all of W^T for a few rows.

Invariants: as conv.py's (reads inside the padded image; every output element
written exactly once; K == 0 writes zeros); ``wp`` holds ``prepack``'s panels of all
O channels, zero past O; any plane size (the scratch memory grows with it).
"""

from __future__ import annotations

import copy
from collections.abc import Callable

from llvmlite import ir

from .conv import ConvBuilder
from .gemm import _i, imin
from .parallel import THREADS, new_context_function, new_worker, parallel_for, worth_threads
from .runtime import for_range, vector_load, vector_store
from .scratch import SLOT_CONV_PACK, SLOT_CONV_TILE, scratch, scratch_done
from .types import I1, I32, I64, PTR, splat, zeros

#: lanes of the copies of a kernel row of taps (``pack``), the fewest that hold it (then
#: W): a 3x3 kernel's rows as 4-lane copies, not W-lane masked ones, took a 32 -> 32
#: channel layer at 4x4 2.6 -> 2.1 us and 64 -> 64 at 2x2 2.45 -> 2.2 (bias and ReLU,
#: one thread, AVX-512; ORT 1.9)
COPY_LANES = (4, 8)
#: the context the workers read: x, wp, y, then the extents c, hp, wp, o, kh, kw, ho, wo,
#: then the rows m (``split_driver``)
CTX_WORDS = 12
#: a part of the rows and columns: ``i32 part(ctx, row_lo, row_hi, col_lo, col_hi)``
PART_TYPE = ir.FunctionType(I32, [PTR, I64, I64, I64, I64])
#: rows per thread below which ``split_driver`` cuts the output channels instead
#: (``by_columns``). ResNet-18's layers as single layers, two threads, ONNX Runtime's
#: time over ours, cut by rows -> by channels: 256 ch 14x14 (F(4x4): 16 tiles as 12 + 4
#: rows) 1.41 -> 1.60-1.70x, 512 ch 7x7 (F(2x2): 16 tiles) 0.80 -> 1.01-1.05x; at 49 rows
#: (128 ch 28x28, F(4x4), 30 + 19) by channels was slower (1.68-1.86x against
#: 1.82-1.97x), and for conv_rows' 7x7 planes the same within the noise
COLUMN_SPLIT_ROWS = 12


class ConvRowsBuilder(ConvBuilder):
    def prepack(self, name: str) -> ir.Function:
        """``conv_rows_prepack(w, P, o, k, ldw)``: W^T's panels, ``P[j*NR*k + q*NR + jj]
        = w[(j*NR + jj) * ldw + q]`` for q < k, zero for channels j*NR + jj >= o; P
        holds ceil(o / NR) * NR * k elements (``prepacked.once``'s buffer). Scalar
        copies: it runs once per model, on the first call (``parallel_prepack``)."""
        def panels(b: ir.IRBuilder, args: list[ir.Value], lo: ir.Value, hi: ir.Value) -> None:
            w, pk, o, k, ldw = args
            zero = ir.Constant(self.et, 0.0)

            def channel(oc: ir.Value) -> None:
                panel = b.gep(pk, [b.add(b.mul(b.sdiv(oc, _i(self.nr)), b.mul(_i(self.nr), k)),
                                         b.srem(oc, _i(self.nr)))], source_etype=self.et)
                live = b.icmp_signed("<", oc, o)

                def tap(q: ir.Value) -> None:
                    dst = b.gep(panel, [b.mul(q, _i(self.nr))], source_etype=self.et)
                    with b.if_else(live) as (real, pad):
                        with real:
                            b.store(b.load(b.gep(w, [b.add(b.mul(oc, ldw), q)], source_etype=self.et),
                                           typ=self.et), dst)
                        with pad:
                            b.store(zero, dst)
                for_range(b, _i(0), k, 1, tap, "q")
            for_range(b, lo, hi, 1, channel, "oc")
        return self.parallel_prepack(name, panels)

    def driver(self, name: str | None = None) -> ir.Function:
        """``conv_rows`` (module docstring)."""
        def pixels(b: ir.IRBuilder, c: ir.Value, o: ir.Value, kh: ir.Value, kw: ir.Value,
                   ho: ir.Value, wo: ir.Value) -> tuple[ir.Value, ir.Value]:
            m = b.mul(ho, wo)
            return m, b.mul(b.mul(m, b.mul(c, b.mul(kh, kw))), o)
        return self.split_driver(name or f"wia.conv.rows.{self.tag}", self.pixels_part(), pixels)

    def split_driver(self, name: str, part: ir.Function,
                     rows: Callable[..., tuple[ir.Value, ir.Value]]) -> ir.Function:
        """``name(x, w, y, c, hp, wp, o, kh, kw, ho, wo)``: ``part`` (``new_part``) on
        the rows ``[0, m)`` and every output channel, split over the pool when the
        multiply-adds pay for it: in chunks of whole micro-kernel rows, or, when the
        rows are few (``by_columns``), in chunks of whole panels of output channels.
        ``rows(b, c, o, kh, kw, ho, wo)`` gives ``(m, multiply-adds)``."""
        if name in self.mod.globals:
            return self.mod.globals[name]
        fn = ir.Function(self.mod, ir.FunctionType(ir.VoidType(), [PTR, PTR, PTR] + [I64] * 8), name)
        fn.linkage = "internal"
        args = list(fn.args)
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        o = args[6]
        m, macs = rows(b, args[3], o, args[7], args[8], args[9], args[10])
        ctx = b.alloca(I64, size=CTX_WORDS)
        for j, v in enumerate([*args, m]):
            b.store(b.ptrtoint(v, I64) if j < 3 else v, b.gep(ctx, [_i(j)], source_etype=I64))
        with b.if_else(worth_threads(b, macs)) as (par, ser):
            with par:
                with b.if_else(self.by_columns(b, m, o)) as (columns, whole_rows):
                    with columns:
                        b.call(parallel_for(self.mod), [self.split_worker(part, False), ctx, _i(0),
                                                        o, _i(self.nr), _i(THREADS)])
                    with whole_rows:
                        align = b.select(self.by_seven(b, m), _i(7), _i(self.mr)) \
                            if self.mr == 8 else _i(self.mr)
                        b.call(parallel_for(self.mod), [self.split_worker(part, True), ctx, _i(0),
                                                        m, align, _i(THREADS)])
            with ser:
                b.call(part, [ctx, _i(0), m, _i(0), o])
        b.ret_void()
        return fn

    def by_columns(self, b: ir.IRBuilder, m: ir.Value, o: ir.Value) -> ir.Value:
        """Whether ``split_driver`` cuts the output channels rather than the rows: fewer
        than COLUMN_SPLIT_ROWS rows per thread, and a panel of channels for each.
        Cut by rows, every chunk streams all of the weight's panels, and a few rows
        leave the threads uneven (16 rows of 6-row kernels: 12 + 4); cut by columns,
        every chunk packs (or transforms) all the rows' inputs."""
        few = b.icmp_signed("<", m, _i(COLUMN_SPLIT_ROWS * THREADS))
        return b.and_(few, b.icmp_signed(">=", o, _i(self.nr * THREADS)))

    def new_part(self, name: str) -> tuple[ir.Function, ir.IRBuilder, list[ir.Value],
                                           tuple[ir.Value, ir.Value], tuple[ir.Value, ir.Value]]:
        """A new ``part`` for ``split_driver``: the function, a builder at its entry, the
        context's words (loaded), its rows ``(lo, hi)`` and output channels ``(lo, hi)``.
        Not inlined: the driver calls it from two workers and itself."""
        fn, b, words = new_context_function(self.mod, name, PART_TYPE, CTX_WORDS)
        fn.attributes.add("noinline")
        _, row_lo, row_hi, col_lo, col_hi = fn.args
        return fn, b, words, (row_lo, row_hi), (col_lo, col_hi)

    def split_worker(self, part: ir.Function, by_rows: bool) -> ir.Function:
        """``part`` as a worker of ``parallel_for``: on rows ``[lo, hi)`` and every
        channel, or (``by_rows`` False) on every row and the channels ``[lo, hi)``."""
        name = f"{part.name}.{'rows' if by_rows else 'columns'}"
        if name in self.mod.globals:
            return self.mod.globals[name]
        fn, b, words, lo, hi = new_worker(self.mod, name, CTX_WORDS)
        o, m = words[6], words[11]
        span = [lo, hi, _i(0), o] if by_rows else [_i(0), m, lo, imin(b, hi, o)]
        b.ret(b.call(part, [fn.args[0], *span]))
        return fn

    def by_seven(self, b: ir.IRBuilder, m: ir.Value) -> ir.Value:
        """Whether ``m`` rows of 8-row micro-kernels run 7-row ones instead: a count that
        7 divides and 8 does not (7x7 and 14x14 planes: 49 pixels as 6 x 8 and one row
        left a 1-row kernel at a quarter of the speed)."""
        return b.and_(b.icmp_signed("==", b.srem(m, _i(7)), _i(0)),
                      b.icmp_signed("!=", b.srem(m, _i(8)), _i(0)))

    def blocking(self, b: ir.IRBuilder, k: ir.Value, kw: ir.Value) -> ir.Value:
        """The K block: ``k_block``'s, rounded up to whole rows of ``kw`` taps (a
        block never splits a kernel row: ``pack`` copies them whole)."""
        kcb = self.k_block(b, k)
        return b.mul(b.sdiv(b.add(kcb, b.sub(kw, _i(1))), kw), kw)

    def pixels_part(self) -> ir.Function:
        """``part(ctx, lo, hi, col_lo, col_hi)`` (``new_part``): the output pixels ``[lo,
        hi)`` of the channels ``[col_lo, col_hi)``: their patches packed (``pack``),
        multiplied by those channels' panels of W^T into their C^T tile, which is then
        copied into ``y`` transposed."""
        name = f"wia.conv.rows.pixels.{self.tag}"
        if name in self.mod.globals:
            return self.mod.globals[name]
        fn, b, words, (lo, hi), span = self.new_part(name)
        x, wpk, y = (b.inttoptr(v, PTR) for v in words[:3])
        c, hp, wp, o, kh, kw, ho, wo = words[3:11]
        m, k = b.sub(hi, lo), b.mul(c, b.mul(kh, kw))
        kcb = self.blocking(b, k, kw)
        lda = b.add(kcb, _i(self.w))  # a row's slack: its last taps' vector (``pack``)
        blocks = b.sdiv(b.add(k, b.sub(kcb, _i(1))), kcb)
        patch_bytes = b.mul(b.mul(b.mul(blocks, m), lda), _i(self.size))
        # then each pixel's offset (``pack``): in scratch, not on the stack, for any plane
        patches = scratch(self.mod, b, None, SLOT_CONV_PACK,
                          b.add(b.add(patch_bytes, b.mul(m, _i(8))), _i(64)))
        offs = b.gep(patches, [patch_bytes], source_etype=ir.IntType(8))
        cols = self.round_up(b, o)
        tile = scratch(self.mod, b, None, SLOT_CONV_TILE,
                       b.add(b.mul(b.mul(m, cols), _i(self.size)), _i(64)))
        self.pack(b, x, (patches, offs), (c, hp, wp, kh, kw, wo), (kcb, lda), lo, hi)

        with b.if_then(b.icmp_signed(">", k, _i(0))):
            self.multiply_blocks(b, (patches, lda, kcb), (wpk, k), (tile, cols), m, span)
        with b.if_then(b.icmp_signed("==", k, _i(0))):  # no taps: the sum is empty
            self.zero_fill(b, tile, m, cols, cols, ir.Constant(I1, 0))
        plane = b.mul(ho, wo)

        def channel(oc: ir.Value) -> None:  # the tile out, transposed
            dst = b.gep(y, [b.add(b.mul(oc, plane), lo)], source_etype=self.et)
            src = b.gep(tile, [oc], source_etype=self.et)

            def one(p: ir.Value) -> None:
                b.store(b.load(b.gep(src, [b.mul(p, cols)], source_etype=self.et), typ=self.et),
                        b.gep(dst, [p], source_etype=self.et))
            for_range(b, _i(0), m, 1, one, "out")
        for_range(b, span[0], span[1], 1, channel, "oc")
        scratch_done(self.mod, b, SLOT_CONV_TILE, tile)
        scratch_done(self.mod, b, SLOT_CONV_PACK, patches)
        b.ret(ir.Constant(I32, 0))
        return fn

    def multiply_blocks(self, b: ir.IRBuilder, a: tuple[ir.Value, ir.Value, ir.Value],
                        w: tuple[ir.Value, ir.Value], c: tuple[ir.Value, ir.Value],
                        m: ir.Value, span: tuple[ir.Value, ir.Value]) -> None:
        """``C[0:m, span] = A @ W[:, span]``: ``a`` = (A, lda, kcb), A K-block-major (block
        ``pc // kcb`` holds the ``m`` rows' ``kcb`` columns from ``pc``, ``lda`` apart);
        ``w`` = (W's panels, k), column ``col``'s panel of ``k`` rows at ``col * k``;
        ``c`` = (C, cols), ``cols`` apart; ``span`` = whole panels of columns, (lo, hi).
        7-row micro-kernels where 7 divides ``m`` and 8 does not (``by_seven``)."""
        (a_blocks, lda, kcb), (panels, k), (tile, cols) = a, w, c

        def multiply(builder: ConvRowsBuilder) -> None:
            def per_pc(pc: ir.Value) -> None:
                kc = imin(b, b.sub(k, pc), kcb)
                block = b.gep(a_blocks, [b.mul(b.sdiv(pc, kcb), b.mul(m, lda))], source_etype=self.et)
                builder.multiply_panels(
                    b, block, lda, _i(0), kc, panels, span[0], span[1], cols, tile, cols, m,
                    b.icmp_signed(">", pc, _i(0)),
                    (b.gep(panels, [b.mul(pc, _i(self.nr))], source_etype=self.et), k))
            for_range(b, _i(0), k, kcb, per_pc, "pc")
        if self.mr != 8:
            multiply(self)
            return
        sevens = copy.copy(self)
        sevens.mr = 7
        with b.if_else(self.by_seven(b, m)) as (seven, other):
            with seven:
                multiply(sevens)
            with other:
                multiply(self)

    def pack(self, b: ir.IRBuilder, x: ir.Value, out: tuple[ir.Value, ir.Value],
             extents: tuple[ir.Value, ...], blocking: tuple[ir.Value, ir.Value],
             lo: ir.Value, hi: ir.Value) -> None:
        """The patches of the pixels ``[lo, hi)`` (``extents`` = c, hp, wp, kh, kw, wo)
        into ``out`` = (patches, room for ``hi - lo`` i64 pixel offsets), K-block-major:
        each block ``hi - lo`` rows of its ``kcb`` taps, ``lda`` apart (``blocking``). A
        kernel row of ``kw`` taps is contiguous in ``x`` (at any stride): up to W taps,
        one load and one store of the fewest lanes that hold them (``COPY_LANES``), in
        the order of the taps (the lanes past ``kw`` are the next row's, stored next,
        or the slack of ``lda - kcb`` = W at a row's end); else one tap at a time. (One
        load per tap took ~2.3 cycles an element.)"""
        c, hp, wp, kh, kw, wo = extents
        (patches, offs), (kcb, lda) = out, blocking
        m = b.sub(hi, lo)

        def pixel(r: ir.Value) -> None:  # offs[r]: where pixel lo + r's patch starts in a plane
            p = b.add(lo, r)
            oh, ow = b.sdiv(p, wo), b.srem(p, wo)
            b.store(b.add(b.mul(b.mul(oh, _i(self.sh)), wp), b.mul(ow, _i(self.sw))),
                    b.gep(offs, [r], source_etype=I64))
        for_range(b, _i(0), m, 1, pixel, "px")
        x_end = b.mul(c, b.mul(hp, wp))  # this image's elements from x: loads stay below
        # the last pixel's offset, the largest (none without pixels: offs[0], not read by a copy)
        last_pixel = b.select(b.icmp_signed(">", m, _i(0)), b.sub(m, _i(1)), _i(0))
        last = b.load(b.gep(offs, [last_pixel], source_etype=I64), typ=I64)

        def rows_of_taps(copy: Callable[[ir.Value, ir.Value, bool], None], lanes: int) -> None:
            """Every kernel row of every pixel through ``copy(src, dst, whole)``: ``whole``
            where ``lanes`` elements from every pixel's taps of the row are inside x (all
            but the last rows of the last channel), so ``copy`` loads them as they are."""
            def kernel_row(ci: ir.Value, i: ir.Value) -> None:
                q = b.mul(b.add(b.mul(ci, kh), i), kw)
                dst0 = b.gep(patches, [b.add(b.mul(b.sdiv(q, kcb), b.mul(m, lda)), b.srem(q, kcb))],
                             source_etype=self.et)
                row0 = b.mul(b.add(b.mul(ci, hp), i), wp)

                def pixels(whole: bool) -> None:
                    def copy_taps(r: ir.Value) -> None:
                        at = b.add(row0, b.load(b.gep(offs, [r], source_etype=I64), typ=I64))
                        copy(b.gep(x, [at], source_etype=self.et),
                             b.gep(dst0, [b.mul(r, lda)], source_etype=self.et), whole)
                    for_range(b, _i(0), m, 1, copy_taps, "pix")
                if not lanes:  # tap by tap: never past the row
                    pixels(True)
                    return
                inside = b.icmp_signed("<=", b.add(b.add(row0, last), _i(lanes)), x_end)
                with b.if_else(inside) as (whole, edge):
                    with whole:
                        pixels(True)
                    with edge:
                        pixels(False)
            for_range(b, _i(0), c, 1, lambda ci: for_range(b, _i(0), kh, 1, lambda i: kernel_row(ci, i), "kr"),
                      "ci")

        def copy_lanes(lanes: int) -> Callable[[ir.Value, ir.Value, bool], None]:
            vt = ir.VectorType(self.et, lanes)
            mask_t = ir.VectorType(I1, lanes)
            mload = self.intrinsic(f"llvm.masked.load.v{lanes}{self.suffix}.p0", vt, [PTR, I32, mask_t, vt])
            taps = b.icmp_signed(">", splat(b, kw, ir.VectorType(I64, lanes)),
                                 ir.Constant(ir.VectorType(I64, lanes), list(range(lanes))))

            def copy(src: ir.Value, dst: ir.Value, whole: bool) -> None:
                loaded = (vector_load(b, src, vt, self.size) if whole else
                          b.call(mload, [src, ir.Constant(I32, self.size), taps, zeros(vt)]))
                vector_store(b, loaded, dst, self.size)
            return copy

        def one_tap_at_a_time(src: ir.Value, dst: ir.Value, _: bool) -> None:
            for_range(b, _i(0), kw, 1, lambda j: b.store(
                b.load(b.gep(src, [j], source_etype=self.et), typ=self.et),
                b.gep(dst, [j], source_etype=self.et)), "tap")
        # the width is chosen once per call, not per copy (helpers get no IR passes)
        widths = [v for v in COPY_LANES if v < self.w] + [self.w]
        done = b.function.append_basic_block("pack.done")
        for lanes in widths:
            this, other = (b.function.append_basic_block(f"pack.{s}{lanes}") for s in ("w", "not"))
            b.cbranch(b.icmp_signed("<=", kw, _i(lanes)), this, other)
            b.position_at_end(this)
            rows_of_taps(copy_lanes(lanes), lanes)
            b.branch(done)
            b.position_at_end(other)
        rows_of_taps(one_tap_at_a_time, 0)
        b.branch(done)
        b.position_at_end(done)
