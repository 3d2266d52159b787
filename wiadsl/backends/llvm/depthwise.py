"""The ``loop.depthwise2d`` kernel: one channel plane of a depthwise convolution,
explicit vectors over output columns, the padding by masked loads.

    void @wia.dw.<tag>(ptr x, ptr w, ptr y, i64 wstride, i64 h, i64 wd, i64 ho, i64 wo)

``x``, ``w``, ``y`` are the plane's input, its first tap and its output
(ir/ops_depthwise.py); the geometry attributes are compiled in (one function per
kernel, stride, dilation, padding and dtype in a module). Structure:

    taps[t] = splat(w[t * wstride])                         (kh*kw vectors, kept)
    for ow0 in [0, wo) by W:                                 a segment of W columns
      mask[j] = lanes l < wo - ow0 whose input column ow0*sw + l*sw + j*dw - pl is in [0, wd)
      for oh in [0, ho):
        row[i] = x + ih*wd for ih = oh*sh + i*dh - pt in [0, h), else a row of zeros
        acc = sum over (i, j), in order, of load(row[i] + column, mask[j]) * taps[i*kw + j]
        y[oh*wo + ow0 ...] = acc                             (masked in the last segment)

so no padded copy of the input is made: a tap row above or below the input reads
the zero row, a column outside it a masked-off lane (never accessed). Column
strides: 1 is one masked load per tap; 2 is two masked loads of the 2W columns
from the first and the even lanes; any other stride loads lane by lane. Each tap
is an ``llvm.fmuladd`` on vectors (a fused multiply-add where the host has one).
"""

from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from ...dtypes import DType
from .gemm_config import current_config
from .runtime import _i, for_range
from .types import F32, F64, I1, I32, I64, PTR


@dataclass(frozen=True)
class Geometry:
    """The compiled-in attributes of one ``loop.depthwise2d``."""

    kernel: tuple[int, int]
    stride: tuple[int, int]
    dilation: tuple[int, int]
    padding: tuple[int, int]

    @property
    def tag(self) -> str:
        parts = [*self.kernel, *self.stride, *self.dilation, *self.padding]
        return "k{}x{}.s{}x{}.d{}x{}.p{}x{}".format(*(str(p).replace("-", "m") for p in parts))


ARGS = [PTR, PTR, PTR] + [I64] * 5


class DepthwiseBuilder:
    """Emits the plane kernel for one dtype and geometry into a module."""

    def __init__(self, mod: ir.Module, dtype: DType, g: Geometry):
        self.mod, self.g = mod, g
        self.et = F32 if dtype is DType.F32 else F64
        self.size = 4 if dtype is DType.F32 else 8
        self.w = current_config().vector_bits // (8 * self.size)
        self.vt = ir.VectorType(self.et, self.w)
        self.suffix = "f32" if dtype is DType.F32 else "f64"

    def intrinsic(self, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
        fn = self.mod.globals.get(name)
        if fn is None:
            fn = ir.Function(self.mod, ir.FunctionType(ret, args), name)
        return fn

    def lanes(self, b: ir.IRBuilder, start: ir.Value, step: int, count: int) -> ir.Value:
        """<count x i64>: start + l * step for each lane l."""
        vi = ir.VectorType(I64, count)
        splat = b.shuffle_vector(b.insert_element(ir.Constant(vi, ir.Undefined), start, ir.Constant(I32, 0)),
                                 ir.Constant(vi, ir.Undefined), ir.Constant(ir.VectorType(I32, count), [0] * count))
        return b.add(splat, ir.Constant(vi, [lane * step for lane in range(count)]))

    def in_range(self, b: ir.IRBuilder, v: ir.Value, lo: ir.Value, hi: ir.Value) -> ir.Value:
        """Lanes of ``v`` in [lo, hi) (lo, hi scalars; unsigned compare of v - lo)."""
        n = v.type.count
        return b.icmp_unsigned("<", b.sub(v, self.lanes(b, lo, 0, n)), self.lanes(b, b.sub(hi, lo), 0, n))

    def function(self) -> ir.Function:
        name = f"wia.dw.{self.suffix}.{self.g.tag}"
        if name in self.mod.globals:
            return self.mod.globals[name]
        fn = ir.Function(self.mod, ir.FunctionType(ir.VoidType(), ARGS), name)
        fn.linkage = "internal"
        x, w, y, wstride, h, wd, ho, wo = fn.args
        for p in (x, w, y):
            p.add_attribute("noalias")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        (kh, kw), (sh, sw), (dh, dw), (pt, pl) = self.g.kernel, self.g.stride, self.g.dilation, self.g.padding
        # a row of zeros for the tap rows outside the input (masked loads read only
        # its columns [0, wd)); at least one element so the alloca is never empty
        zero_row = b.alloca(self.et, size=b.add(wd, _i(1)))
        memset = self.mod.declare_intrinsic("llvm.memset", [PTR, I64])
        b.call(memset, [zero_row, ir.Constant(ir.IntType(8), 0), b.mul(b.add(wd, _i(1)), _i(self.size)),
                        ir.Constant(I1, 0)])
        taps = []
        for t in range(kh * kw):
            s = b.load(b.gep(w, [b.mul(wstride, _i(t))], source_etype=self.et), typ=self.et)
            taps.append(b.shuffle_vector(b.insert_element(ir.Constant(self.vt, ir.Undefined), s, ir.Constant(I32, 0)),
                                         ir.Constant(self.vt, ir.Undefined),
                                         ir.Constant(ir.VectorType(I32, self.w), [0] * self.w)))

        def segment(ow0: ir.Value) -> None:
            n = b.sub(wo, ow0)  # lanes < n are output columns
            live = b.icmp_signed("<", self.lanes(b, _i(0), 1, self.w), self.lanes(b, n, 0, self.w))
            loads = [self.column_loads(b, b.add(b.mul(ow0, _i(sw)), _i(j * dw - pl)), n, live, wd)
                     for j in range(kw)]
            full = b.icmp_signed(">=", n, _i(self.w))

            def row(oh: ir.Value) -> None:
                rows = []
                for i in range(kh):
                    ih = b.add(b.mul(oh, _i(sh)), _i(i * dh - pt))
                    inside = b.icmp_unsigned("<", ih, h)
                    rows.append(b.select(inside, b.gep(x, [b.mul(ih, wd)], source_etype=self.et), zero_row))
                fma = self.intrinsic(f"llvm.fmuladd.v{self.w}{self.suffix}", self.vt, [self.vt] * 3)
                acc: ir.Value = ir.Constant(self.vt, [0.0] * self.w)
                for i in range(kh):
                    for j in range(kw):
                        acc = b.call(fma, [loads[j](rows[i]), taps[i * kw + j], acc])
                at = b.gep(y, [b.add(b.mul(oh, wo), ow0)], source_etype=self.et)
                with b.if_else(full) as (whole, part):
                    with whole:
                        b.store(acc, at, align=self.size)
                    with part:
                        mstore = self.intrinsic(f"llvm.masked.store.v{self.w}{self.suffix}.p0", ir.VoidType(),
                                                [self.vt, PTR, I32, live.type])
                        b.call(mstore, [acc, at, ir.Constant(I32, self.size), live])
            for_range(b, _i(0), ho, 1, row, "oh")
        for_range(b, _i(0), wo, self.w, segment, "seg")
        b.ret_void()
        return fn

    def column_loads(self, b: ir.IRBuilder, col0: ir.Value, n: ir.Value, live: ir.Value, wd: ir.Value):
        """A function of a row pointer: the segment's W lanes of one tap column (input
        column col0 + l * sw for lane l), zero where masked off."""
        sw, zero = self.g.stride[1], ir.Constant(self.vt, [0.0] * self.w)
        mask_t = ir.VectorType(I1, self.w)
        mload = self.intrinsic(f"llvm.masked.load.v{self.w}{self.suffix}.p0", self.vt,
                               [PTR, I32, mask_t, self.vt])
        align = ir.Constant(I32, self.size)
        if sw == 1:
            mask = b.and_(live, self.in_range(b, self.lanes(b, col0, 1, self.w), _i(0), wd))
            return lambda row: b.call(mload, [b.gep(row, [col0], source_etype=self.et), align, mask, zero])
        if sw == 2:
            # source lanes s of [0, 2W): s < 2n - 1 (the last output's column) and in the row
            cols = [self.lanes(b, b.add(col0, _i(half * self.w)), 1, self.w) for half in (0, 1)]
            last = b.sub(b.mul(n, _i(2)), _i(1))
            masks = [b.and_(self.in_range(b, c, _i(0), wd),
                            b.icmp_signed("<", self.lanes(b, _i(half * self.w), 1, self.w),
                                          self.lanes(b, last, 0, self.w)))
                     for half, c in enumerate(cols)]
            even = ir.Constant(ir.VectorType(I32, self.w), [2 * lane for lane in range(self.w)])

            def pair(row: ir.Value) -> ir.Value:
                at = b.gep(row, [col0], source_etype=self.et)
                lo = b.call(mload, [at, align, masks[0], zero])
                hi = b.call(mload, [b.gep(at, [_i(self.w)], source_etype=self.et), align, masks[1], zero])
                return b.shuffle_vector(lo, hi, even)
            return pair
        cols_v = self.lanes(b, col0, sw, self.w)
        mask = b.and_(live, self.in_range(b, cols_v, _i(0), wd))
        # other strides: lane by lane from a clamped column (selected to zero when off)
        clamped = [b.select(b.extract_element(mask, ir.Constant(I32, lane)),
                            b.extract_element(cols_v, ir.Constant(I32, lane)), _i(0))
                   for lane in range(self.w)]

        def gather(row: ir.Value) -> ir.Value:
            v: ir.Value = ir.Constant(self.vt, ir.Undefined)
            for lane, col in enumerate(clamped):
                e = b.load(b.gep(row, [col], source_etype=self.et), typ=self.et)
                v = b.insert_element(v, e, ir.Constant(I32, lane))
            return b.select(mask, v, zero)
        return gather


def depthwise_function(mod: ir.Module, dtype: DType, g: Geometry) -> ir.Function:
    """The plane kernel for ``dtype`` and ``g`` in ``mod`` (made once per module)."""
    return DepthwiseBuilder(mod, dtype, g).function()


__all__ = ["Geometry", "depthwise_function"]
