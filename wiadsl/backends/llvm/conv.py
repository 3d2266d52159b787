"""The ``loop.conv2d`` kernel: implicit GEMM on the ``loop.gemm`` micro-kernel.

The convolution of one image is the product W (O x K) @ P (K x HO*WO) with
K = C*KH*KW and P the im2col matrix; P is never materialized. Loop order:
    for ob in output rows by RB           (split over threads: disjoint rows of y)
      for pc in K by KC:                  pack P[pc:pc+KC, rows ob..ob+RB] into NR-wide panels
        for ic in O by MC:
          for each output row, each NR-wide panel of it:
            for ir in ic..ic+MC by MR:    micro-kernel (gemm.py) on W rows, C = y rows
Panels never straddle two output rows: a panel is ``wo - t*NR`` columns wide at
most, and the micro-kernel's masked C stores handle the ragged end, so C is
``y`` itself with leading dimension HO*WO.

Packing: one K row ``q = (ci, i, j)`` of a panel is ``x[ci, oh*sh + i, (t*NR + jj)*sw + j]``
for jj < NR; with ``sw == 1`` that is a contiguous run copied with masked vector
loads (no per-element index math or clamping: the input is pre-padded by the
lowering). The (ci, i, j) decode happens once per K row, not per element.

Invariants: reads stay inside the padded image (loops/conv.py); every y element
of the image is written exactly once per K block (the first stores, later ones
accumulate), and K == 0 writes zeros.
"""

from __future__ import annotations

from llvmlite import ir

from ...dtypes import DType
from .gemm import GemmBuilder, for_range
from .parallel import THREADS, WORKER_TYPE, parallel_for, worth_threads
from .types import I1, I32, I64, PTR

NCOLS = 256   # output columns per packed block: KC x 256 floats = 256 KiB, in L2
ARGS = [PTR, PTR, PTR] + [I64] * 8  # x, w, y, c, hp, wp, o, kh, kw, ho, wo


def _i(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


def _min(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.select(b.icmp_signed("<", x, y), x, y)


class ConvBuilder(GemmBuilder):
    def __init__(self, mod: ir.Module, dtype: DType, stride: tuple[int, int]):
        super().__init__(mod, dtype)
        self.sh, self.sw = stride
        self.tag = f"{self.suffix}.s{self.sh}x{self.sw}"

    def pack_row(self, b: ir.IRBuilder, src: ir.Value, dst: ir.Value, valid: ir.Value) -> None:
        """dst[jj] = src[jj * sw] for jj < min(valid, NR), zero after (dst is aligned)."""
        vi = ir.VectorType(I64, self.w)
        zero = ir.Constant(self.vt, [0.0] * self.w)
        if self.sw == 1:
            mask_t = ir.VectorType(I1, self.w)
            mload = self.intrinsic(f"llvm.masked.load.v{self.w}{self.suffix}.p0", self.vt,
                                   [PTR, I32, mask_t, self.vt])
            splat = self.splat(b, valid, vi)
            for v in range(self.nr // self.w):
                mask = b.icmp_signed(">", splat, ir.Constant(vi, [v * self.w + k for k in range(self.w)]))
                x = b.call(mload, [b.gep(src, [_i(v * self.w)], source_etype=self.et),
                                   ir.Constant(I32, self.size), mask, zero])
                b.store(x, b.gep(dst, [_i(v * self.w)], source_etype=self.et), align=self.panel_align)
            return
        for jj in range(self.nr):
            inside = b.icmp_signed(">", valid, _i(jj))
            at = b.select(inside, _i(jj * self.sw), _i(0))
            x = b.load(b.gep(src, [at], source_etype=self.et), typ=self.et)
            b.store(b.select(inside, x, ir.Constant(self.et, 0.0)),
                    b.gep(dst, [_i(jj)], source_etype=self.et))

    def rows(self) -> ir.Function:
        """``conv.rows(x, w, y, c, hp, wp, o, kh, kw, ho, wo, oh_lo, oh_hi)``: output rows
        ``[oh_lo, oh_hi)`` of one image, single-threaded."""
        name = f"wia.conv.rows.{self.tag}"
        if name in self.mod.globals:
            return self.mod.globals[name]
        fn = ir.Function(self.mod, ir.FunctionType(ir.VoidType(), ARGS + [I64, I64]), name)
        fn.linkage = "internal"
        x, w, y, c, hp, wp, o, kh, kw, ho, wo, oh_lo, oh_hi = fn.args
        for p in (x, w, y):
            p.add_attribute("noalias")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        khw = b.mul(kh, kw)
        k = b.mul(c, khw)
        ldc = b.mul(ho, wo)
        npanel = b.sdiv(b.add(wo, _i(self.nr - 1)), _i(self.nr))
        row_cols = b.mul(npanel, _i(self.nr))
        rb = b.sdiv(_i(NCOLS), row_cols)
        rb = b.select(b.icmp_signed("<", rb, _i(1)), _i(1), rb)
        nbytes = b.mul(b.mul(b.mul(rb, row_cols), _i(self.kc)), _i(self.size))
        alloc = self.intrinsic("aligned_alloc", PTR, [I64, I64])
        packed = b.call(alloc, [_i(64), b.add(nbytes, _i(64))])
        big = self.ukernel(self.mr)

        def per_block(ob: ir.Value) -> None:
            oe = _min(b, b.add(ob, rb), oh_hi)

            def per_pc(pc: ir.Value) -> None:
                kc = _min(b, b.sub(k, pc), _i(self.kc))

                def pack_p(p: ir.Value) -> None:
                    q = b.add(pc, p)
                    ci, r = b.sdiv(q, khw), b.srem(q, khw)
                    i, j = b.sdiv(r, kw), b.srem(r, kw)
                    base = b.add(b.mul(b.add(b.mul(ci, hp), i), wp), j)

                    def pack_oh(oh: ir.Value) -> None:
                        src_row = b.add(base, b.mul(b.mul(oh, _i(self.sh)), wp))
                        slot = b.mul(b.sub(oh, ob), npanel)

                        def pack_t(t: ir.Value) -> None:
                            col = b.mul(t, _i(self.nr))
                            src = b.gep(x, [b.add(src_row, b.mul(col, _i(self.sw)))], source_etype=self.et)
                            off = b.mul(b.add(b.mul(b.add(slot, t), kc), p), _i(self.nr))
                            self.pack_row(b, src, b.gep(packed, [off], source_etype=self.et), b.sub(wo, col))
                        for_range(b, _i(0), npanel, 1, pack_t, "pt")
                    for_range(b, ob, oe, 1, pack_oh, "po")
                for_range(b, _i(0), kc, 1, pack_p, "pp")
                load_c = b.icmp_signed(">", pc, _i(0))

                def per_ic(ic: ir.Value) -> None:
                    iend = _min(b, b.add(ic, _i(self.mc)), o)
                    full_end = b.sub(iend, b.srem(b.sub(iend, ic), _i(self.mr)))

                    def per_oh(oh: ir.Value) -> None:
                        slot = b.mul(b.sub(oh, ob), npanel)

                        def per_t(t: ir.Value) -> None:
                            col = b.mul(t, _i(self.nr))
                            panel = b.gep(packed, [b.mul(b.mul(b.add(slot, t), kc), _i(self.nr))],
                                          source_etype=self.et)
                            valid = b.sub(wo, col)
                            cbase = b.add(b.mul(oh, wo), col)

                            def call(kernel: ir.Function, row: ir.Value) -> None:
                                ap = b.gep(w, [b.add(b.mul(row, k), pc)], source_etype=self.et)
                                cp = b.gep(y, [b.add(b.mul(row, ldc), cbase)], source_etype=self.et)
                                b.call(kernel, [ap, k, panel, cp, ldc, kc, valid, load_c])
                            for_range(b, ic, full_end, self.mr, lambda r: call(big, r), "ir")
                            self.tail_rows(b, full_end, iend, call)
                        for_range(b, _i(0), npanel, 1, per_t, "jt")
                    for_range(b, ob, oe, 1, per_oh, "oh")
                for_range(b, _i(0), o, self.mc, per_ic, "ic")
            for_range(b, _i(0), k, self.kc, per_pc, "pc")
        for_range(b, oh_lo, oh_hi, rb, per_block, "ob")
        with b.if_then(b.icmp_signed("==", k, _i(0))):  # no taps: the sum is empty
            self.zero_fill(b, b.gep(y, [b.mul(oh_lo, wo)], source_etype=self.et), o,
                           b.mul(b.sub(oh_hi, oh_lo), wo), ldc, ir.Constant(I1, 0))
        b.call(self.intrinsic("free", ir.VoidType(), [PTR]), [packed])
        b.ret_void()
        return fn

    def conv_worker(self, rows: ir.Function) -> ir.Function:
        """``i32 worker(ptr ctx, i64 lo, i64 hi)`` for ``parallel_for``: ctx holds ARGS."""
        name = f"wia.conv.worker.{self.tag}"
        if name in self.mod.globals:
            return self.mod.globals[name]
        fn = ir.Function(self.mod, WORKER_TYPE, name)
        fn.linkage = "internal"
        ctx, lo, hi = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        vals = [b.load(b.gep(ctx, [_i(j)], source_etype=I64), typ=I64) for j in range(len(ARGS))]
        b.call(rows, [*(b.inttoptr(v, PTR) for v in vals[:3]), *vals[3:], lo, hi])
        b.ret(ir.Constant(I32, 0))
        return fn

    def driver(self, name: str | None = None) -> ir.Function:
        """``conv(x, w, y, c, hp, wp, o, kh, kw, ho, wo)``: output rows split over threads
        when the multiply-adds pay for it."""
        name = name or f"wia.conv.{self.tag}"
        if name in self.mod.globals:
            return self.mod.globals[name]
        rows = self.rows()
        fn = ir.Function(self.mod, ir.FunctionType(ir.VoidType(), ARGS), name)
        fn.linkage = "internal"
        args = list(fn.args)
        c, o, kh, kw, ho, wo = args[3], args[6], args[7], args[8], args[9], args[10]
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        macs = b.mul(b.mul(b.mul(o, b.mul(ho, wo)), c), b.mul(kh, kw))
        go = b.and_(worth_threads(b, macs), b.icmp_signed(">=", ho, _i(2)))
        with b.if_else(go) as (par, ser):
            with par:
                ctx = b.alloca(I64, size=len(ARGS))
                for j, v in enumerate(args):
                    b.store(b.ptrtoint(v, I64) if j < 3 else v, b.gep(ctx, [_i(j)], source_etype=I64))
                b.call(parallel_for(self.mod), [self.conv_worker(rows), ctx, _i(0), ho, _i(1), _i(THREADS)])
            with ser:
                b.call(rows, [*args, _i(0), ho])
        b.ret_void()
        return fn

