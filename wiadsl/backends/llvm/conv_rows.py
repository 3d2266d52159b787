"""``loop.conv2d`` on small output planes: the pixels as the GEMM's rows.

conv.py puts an image's output pixels in the micro-kernel's vector lanes (N), so a
plane is computed in whole panels of NR pixels: ResNet-18's 7x7 planes fill 49 of
64 lanes and its 14x14 ones 196 of 224. Here the roles swap, as in an NHWC
convolution: the product is ``Y^T (pixels x O) = P^T (pixels x K) @ W^T (K x O)``,
the output channels are the lanes (layers have 64..512 of them: whole panels) and
the pixels are the rows (MR at a time, leftovers by 8-, 4-, 2- and 1-row kernels).
W^T must be in the micro-kernel's panel layout, which ``conv_rows_prepack`` makes
once from a frozen weight (prepacked.py: an imported model's weights), so this path
is taken only for frozen weights (codegen.py decides).

    conv_rows(x, wp, y, c, hp, wpad, o, kh, kw, ho, wo, p_lo, p_hi, o_lo, o_hi)

computes pixels ``[p_lo, p_hi)`` of channels ``[o_lo, o_hi)`` of one image, on the
calling thread (the kernel's own loop splits an image into such pieces):
    for pc in K by kc:                        kc: K cut into equal blocks of <= KC
      pack P^T[p_lo:p_hi, pc:pc+kc] row by row (each element once per piece)
      for each NR-wide panel of the channels: for the pixels by MR: micro-kernel
        into a pixels x channels tile in scratch memory (C^T)
    copy the tile out transposed: y[oc, p] = C^T[p, oc]
The tile is at most ROWS_PIXELS x O floats (512 KiB at 256 x 512; ResNet-18's
pieces are 49 x 128 and 196 x 64), the packed rows ROWS_PIXELS x KC.

Invariants: as conv.py's (reads inside the padded image; every element of the
piece written exactly once; K == 0 writes zeros); ``p_hi - p_lo <= ROWS_PIXELS``;
``wp`` holds ``prepack``'s panels of all O channels (zero past O), so a panel that
straddles ``o_lo`` or ``o_hi`` is computed whole and only its piece is stored.
"""

from __future__ import annotations

from llvmlite import ir

from .conv import ConvBuilder
from .gemm import _i, imin
from .runtime import for_range, vector_load, vector_store
from .scratch import SLOT_CONV_PACK, scratch, scratch_done
from .types import I32, I64, PREPACK_TYPE, PTR

#: output pixels of a plane up to which codegen.py takes this path (and the most one
#: call computes): ResNet-18's 14x14 and 7x7 stages
ROWS_PIXELS = 256
#: output channels per call from which codegen.py takes this path (module docstring)
ROWS_CHANNELS = 128
ROWS_ARGS = [PTR, PTR, PTR] + [I64] * 12


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

    def rows_range(self, name: str) -> ir.Function:
        """``conv_rows`` (module docstring), single-threaded."""
        if name in self.mod.globals:
            return self.mod.globals[name]
        fn = ir.Function(self.mod, ir.FunctionType(ir.VoidType(), ROWS_ARGS), name)
        fn.linkage = "internal"
        x, wpk, y, c, hp, wp, o, kh, kw, ho, wo, p_lo, p_hi, o_lo, o_hi = fn.args
        for p in (x, wpk, y):
            p.add_attribute("noalias")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        kbase = b.alloca(I64, size=self.kc)
        offs = b.alloca(I64, size=ROWS_PIXELS)
        cursors = tuple(b.alloca(I64) for _ in range(3))
        k = b.mul(c, b.mul(kh, kw))
        m = b.sub(p_hi, p_lo)
        kcb = self.k_block(b, k)
        col0 = b.mul(b.sdiv(o_lo, _i(self.nr)), _i(self.nr))  # the first channel panel
        ldc = self.round_up(b, b.sub(o_hi, col0))
        a_bytes = b.mul(b.mul(m, kcb), _i(self.size))
        a_bytes = b.and_(b.add(a_bytes, _i(63)), _i(-64))  # the tile starts 64-byte aligned
        buf = scratch(self.mod, b, None, SLOT_CONV_PACK,
                      b.add(a_bytes, b.add(b.mul(b.mul(m, ldc), _i(self.size)), _i(64))))
        tile = b.gep(buf, [a_bytes], source_etype=ir.IntType(8))

        def pixel(r: ir.Value) -> None:  # offs[r]: where pixel p_lo + r's patch starts
            p = b.add(p_lo, r)
            oh, ow = b.sdiv(p, wo), b.srem(p, wo)
            b.store(b.add(b.mul(b.mul(oh, _i(self.sh)), wp), b.mul(ow, _i(self.sw))),
                    b.gep(offs, [r], source_etype=I64))
        for_range(b, _i(0), m, 1, pixel, "px")
        big = self.ukernel(self.mr)

        def per_pc(pc: ir.Value) -> None:
            kc = imin(b, b.sub(k, pc), kcb)
            self.row_offsets(b, kbase, pc, kc, (hp, wp, kh, kw), cursors)

            whole = b.mul(b.sdiv(kc, _i(self.w)), _i(self.w))

            def pack_row(r: ir.Value) -> None:
                off = b.load(b.gep(offs, [r], source_etype=I64), typ=I64)
                row = b.gep(buf, [b.mul(r, kc)], source_etype=self.et)
                # W taps at a time: a gather of x at their offsets (scalar copies
                # took ~2.3 cycles an element, as long as 1/4 of the products)
                for_range(b, _i(0), whole, self.w,
                          lambda q: self.gather_taps(b, x, kbase, off, q, row), "qv")

                def tap(q: ir.Value) -> None:
                    src = b.add(b.load(b.gep(kbase, [q], source_etype=I64), typ=I64), off)
                    b.store(b.load(b.gep(x, [src], source_etype=self.et), typ=self.et),
                            b.gep(row, [q], source_etype=self.et))
                for_range(b, whole, kc, 1, tap, "q")
            for_range(b, _i(0), m, 1, pack_row, "pr")
            self.multiply_panels(
                b, buf, kc, _i(0), kc, wpk, _i(0), ldc, ldc, tile, ldc, m,
                b.icmp_signed(">", pc, _i(0)), big,
                panel_at=lambda col: b.gep(wpk, [b.add(b.mul(b.add(col0, col), k), b.mul(pc, _i(self.nr)))],
                                           source_etype=self.et))
        with b.if_then(b.icmp_signed(">", k, _i(0))):
            for_range(b, _i(0), k, kcb, per_pc, "pc")
        with b.if_then(b.icmp_signed("==", k, _i(0))):  # no taps: the sum is empty
            self.zero_fill(b, tile, m, ldc, ldc, ir.Constant(ir.IntType(1), 0))
        plane = b.mul(ho, wo)

        def channel(oc: ir.Value) -> None:  # the tile out, transposed
            dst = b.gep(y, [b.add(b.mul(oc, plane), p_lo)], source_etype=self.et)
            src = b.gep(tile, [b.sub(oc, col0)], source_etype=self.et)

            def one(r: ir.Value) -> None:
                b.store(b.load(b.gep(src, [b.mul(r, ldc)], source_etype=self.et), typ=self.et),
                        b.gep(dst, [r], source_etype=self.et))
            for_range(b, _i(0), m, 1, one, "out")
        for_range(b, o_lo, o_hi, 1, channel, "oc")
        scratch_done(self.mod, b, SLOT_CONV_PACK, buf)
        b.ret_void()
        return fn

    def gather_taps(self, b: ir.IRBuilder, x: ir.Value, kbase: ir.Value, off: ir.Value,
                    q: ir.Value, row: ir.Value) -> None:
        """row[q:q+W] = x[kbase[q:q+W] + off]: one masked gather (all lanes on)."""
        vi, vp = ir.VectorType(I64, self.w), ir.VectorType(PTR, self.w)
        mask_t = ir.VectorType(ir.IntType(1), self.w)
        gather = self.intrinsic(f"llvm.masked.gather.v{self.w}{self.suffix}.v{self.w}p0", self.vt,
                                [vp, I32, mask_t, self.vt])
        taps = vector_load(b, b.gep(kbase, [q], source_etype=I64), vi, 8)
        base = self.splat(b, b.add(b.ptrtoint(x, I64), b.mul(off, _i(self.size))), vi)
        ptrs = b.inttoptr(b.add(base, b.mul(taps, ir.Constant(vi, [self.size] * self.w))), vp)
        v = b.call(gather, [ptrs, ir.Constant(I32, self.size), ir.Constant(mask_t, [1] * self.w),
                            ir.Constant(self.vt, ir.Undefined)])
        vector_store(b, v, b.gep(row, [q], source_etype=self.et), self.size)
