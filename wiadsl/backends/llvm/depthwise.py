"""The ``loop.depthwise2d`` kernel: consecutive channel planes of a depthwise
convolution, explicit vectors over output pixels, the padding by masked loads.

    void @wia.lib.depthwise.<dtype>.<config>.<tag>(ptr x, ptr w, ptr y, i64 wstride, i64 h, i64 wd,
                                                   i64 ho, i64 wo, i64 planes)

``x``, ``w``, ``y`` point at the first plane's input, its first tap and its output
(ir/ops_depthwise.py); the geometry attributes are compiled in, and so are the plane
extents and the planes per call where they are static (``Geometry``). Each geometry
is a library helper of its own (library.py's ``PLANE_KINDS``): compiled once per
process and host, beside the kernels that call it, not inside each of them. Two loop
structures:

- rows (any geometry): output rows in segments of W columns,

      for ow0 in [0, wo) by W:                                    a segment
        mask[j] = lanes l < wo - ow0 whose input column ow0*sw + l*sw + j*dw - pl is in [0, wd)
        for each plane: taps[t] = splat(w[k + t * wstride])
          for oh in [0, ho) in blocks of 4, then 1 rows (ROW_BLOCKS):
            row[i] = x + ih*wd for ih = oh*sh + i*dh - pt in [0, h), else a row of zeros
            acc = sum over (i, j), in order, of load(row[i] + column, mask[j]) * taps[i*kw + j]
            y[oh*wo + ow0 ...] = acc                              (masked in the last segment)
        (a block loads each input row's columns once for all its output rows)

  Column stride 1 is one masked load per tap; 2 is a pair of masked loads of 2W
  columns whose even lanes are one tap and odd lanes the next (dilation 1; else the
  even lanes of a pair per tap); any other stride loads lane by lane.
- flat (stride 1 and an output as wide as the input, narrower than W: the 4x4 and
  2x2 planes of a network's last stages): W consecutive output pixels p = oh*wo + ow
  across rows read the W consecutive input elements p + (i*dh - pt)*wd + j*dw - pl,
  one masked load per tap with the lanes whose (oh, ow) puts the tap outside the
  input masked off, so a vector is filled where a row of 4 would fill a quarter.
  The masks are made once per W pixels and serve every plane.

No padded copy of the input is made: masked-off lanes are never accessed, and read
as the padding's value (zero; -inf for the max pool, which then takes no part in the
maximum). Each tap is an ``llvm.fmuladd`` on vectors (a fused multiply-add where the
host has one).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from llvmlite import ir

from ...dtypes import DType
from . import mathlib
from .gemm_config import current_config
from .runtime import _i, for_range
from .types import F32, F64, I1, I32, I64, PTR, splat, undef, zeros


@dataclass(frozen=True)
class Geometry:
    """The compiled-in attributes of one ``loop.depthwise2d``."""

    kernel: tuple[int, int]
    stride: tuple[int, int]
    dilation: tuple[int, int]
    padding: tuple[int, int]
    #: (h, wd, ho, wo) when static: compiled in, the arguments ignored (LLVM folds the
    #: segments' masks and bounds with them)
    extents: tuple[int, ...] = ()
    #: planes per call when every call has this many (loops/depthwise.py's blocks, when
    #: they divide the channels), compiled in; 0: the argument. With neither compiled
    #: in, MobileNetV2's 3x3 layers on 64 channels of 32x32, batch 4, one thread (AMD
    #: Zen 3) ran 156-168 us (stride 1) and 79-82 (stride 2); with both 127-135 and
    #: 69-72, as the copy that used to be compiled into each kernel (122-129, 67-72)
    planes: int = 0

    def as_spec(self) -> dict[str, list[int] | int]:
        """The geometry as a library spec's entry (JSON)."""
        return {"kernel": list(self.kernel), "stride": list(self.stride),
                "dilation": list(self.dilation), "padding": list(self.padding),
                "extents": list(self.extents), "planes": self.planes}

    @property
    def tag(self) -> str:
        parts = [*self.kernel, *self.stride, *self.dilation, *self.padding]
        tag = "k{}x{}.s{}x{}.d{}x{}.p{}x{}".format(*(str(p).replace("-", "m") for p in parts))
        if self.extents:
            tag += f".e{'x'.join(map(str, self.extents))}"
        return tag + (f".n{self.planes}" if self.planes else "")


ARGS = [PTR, PTR, PTR] + [I64] * 6
#: output rows per step of the rows structure, largest first (the rows left over go
#: to the next size): an input row's column vectors are loaded once for every row of
#: the block that reads it (3x3, stride 1: 6 row loads for 4 output rows instead of
#: 12), and the rows' sums are independent chains. Measured on MobileNetV2's 64-channel
#: 32x32 planes, batch 4, one thread (Zen 4): 3x3 stride 1 95 -> 73 us, stride 2 41 ->
#: 33 us. Blocks of 8 (then 4, then 1) took 68 and 33 us, but the two functions took
#: 230 ms to compile instead of 137 (one-row steps: 112): not worth a model's first call.
ROW_BLOCKS = (4, 1)
#: the max pool's: x, y, h, wd, ho, wo, planes
POOL_ARGS = [PTR, PTR] + [I64] * 5


class DepthwiseBuilder:
    """Emits the plane kernel for one dtype and geometry into a module; ``combine`` is
    ``fma`` (the depthwise convolution) or ``max`` (a max pool: no taps, lanes combined
    by ``llvm.maximum``, NumPy's NaN-propagating maximum, reads outside the input -inf)."""

    def __init__(self, mod: ir.Module, dtype: DType, g: Geometry, combine: str = "fma"):
        self.mod, self.g, self.combine = mod, g, combine
        self.et = F32 if dtype is DType.F32 else F64
        self.size = 4 if dtype is DType.F32 else 8
        self.w = current_config().vector_bits // (8 * self.size)
        self.vt = ir.VectorType(self.et, self.w)
        self.suffix = "f32" if dtype is DType.F32 else "f64"
        #: what a read outside the input gives: a convolution's zero padding, or -inf
        #: for a max pool (no part in the maximum)
        self.fill_value = float("-inf") if combine == "max" else 0.0
        self.fill = ir.Constant(self.vt, [self.fill_value] * self.w)

    def intrinsic(self, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
        fn = self.mod.globals.get(name)
        if fn is None:
            fn = ir.Function(self.mod, ir.FunctionType(ret, args), name)
        return fn

    def lanes(self, b: ir.IRBuilder, start: ir.Value, step: int, count: int) -> ir.Value:
        """<count x i64>: start + l * step for each lane l."""
        vi = ir.VectorType(I64, count)
        return b.add(splat(b, start, vi), ir.Constant(vi, [lane * step for lane in range(count)]))

    def in_range(self, b: ir.IRBuilder, v: ir.Value, lo: ir.Value, hi: ir.Value) -> ir.Value:
        """Lanes of ``v`` in [lo, hi) (lo, hi scalars; unsigned compare of v - lo)."""
        n = v.type.count
        return b.icmp_unsigned("<", b.sub(v, self.lanes(b, lo, 0, n)), self.lanes(b, b.sub(hi, lo), 0, n))

    def taps(self, b: ir.IRBuilder, w: ir.Value, k: ir.Value, wstride: ir.Value) -> list[ir.Value]:
        """The splatted taps of plane ``k``: ``w[k + t * wstride]``."""
        kh, kw = self.g.kernel
        return [splat(b, b.load(b.gep(w, [b.add(k, b.mul(wstride, _i(t)))], source_etype=self.et),
                                typ=self.et), self.vt) for t in range(kh * kw)]

    def store(self, b: ir.IRBuilder, acc: ir.Value, at: ir.Value, full: ir.Value, live: ir.Value) -> None:
        """``acc`` to ``at``: a plain vector store when every lane is live, else masked."""
        with b.if_else(full) as (whole, part):
            with whole:
                b.store(acc, at, align=self.size)
            with part:
                mstore = self.intrinsic(f"llvm.masked.store.v{self.w}{self.suffix}.p0", ir.VoidType(),
                                        [self.vt, PTR, I32, live.type])
                b.call(mstore, [acc, at, ir.Constant(I32, self.size), live])

    def function(self, name: str) -> ir.Function:
        """The plane kernel, external as ``name`` (the library helper's symbol)."""
        pooling = self.combine == "max"
        fn = ir.Function(self.mod, ir.FunctionType(ir.VoidType(), POOL_ARGS if pooling else ARGS), name)
        if pooling:
            x, y, h, wd, ho, wo, planes = fn.args
            w, wstride = y, _i(0)  # no taps
        else:
            x, w, y, wstride, h, wd, ho, wo, planes = fn.args
        if self.g.extents:
            h, wd, ho, wo = (_i(v) for v in self.g.extents)
        if self.g.planes:
            planes = _i(self.g.planes)
        for p in {id(a): a for a in (x, w, y)}.values():
            p.add_attribute("noalias")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        args = (x, w, y, wstride, h, wd, ho, wo, planes)
        if self.g.stride == (1, 1) and not pooling:
            flat = b.and_(b.icmp_signed("==", wd, wo), b.icmp_signed("<", wo, _i(self.w)))
            with b.if_else(flat) as (narrow, wide):
                with narrow:
                    self.flat_planes(b, *args)
                with wide:
                    self.row_planes(b, *args)
        else:
            self.row_planes(b, *args)
        b.ret_void()
        return fn

    def row_planes(self, b: ir.IRBuilder, x: ir.Value, w: ir.Value, y: ir.Value, wstride: ir.Value,
                   h: ir.Value, wd: ir.Value, ho: ir.Value, wo: ir.Value, planes: ir.Value) -> None:
        """The rows structure (module docstring)."""
        (kh, kw), (sh, sw), (dh, _), (pt, pl) = self.g.kernel, self.g.stride, self.g.dilation, self.g.padding
        fma = self.intrinsic(f"llvm.fmuladd.v{self.w}{self.suffix}", self.vt, [self.vt] * 3)
        pooling = self.combine == "max"
        # a row of the fill for the tap rows outside the input (masked loads read only
        # its columns [0, wd)); at least one element so the alloca is never empty
        with b.goto_entry_block():
            fill_row = b.alloca(self.et, size=b.add(wd, _i(1)))
        if pooling:
            fill = ir.Constant(self.et, self.fill_value)
            for_range(b, _i(0), b.add(wd, _i(1)), 1,
                      lambda j: b.store(fill, b.gep(fill_row, [j], source_etype=self.et)), "fill")
        else:
            memset = self.mod.declare_intrinsic("llvm.memset", [PTR, I64])
            b.call(memset, [fill_row, ir.Constant(ir.IntType(8), 0), b.mul(b.add(wd, _i(1)), _i(self.size)),
                            ir.Constant(I1, 0)])

        def segment(ow0: ir.Value) -> None:
            n = b.sub(wo, ow0)  # lanes < n are output columns
            live = b.icmp_signed("<", self.lanes(b, _i(0), 1, self.w), self.lanes(b, n, 0, self.w))
            columns = self.tap_columns(b, b.sub(b.mul(ow0, _i(sw)), _i(pl)), n, live, wd)
            full = b.icmp_signed(">=", n, _i(self.w))

            def plane(k: ir.Value) -> None:
                taps = [] if pooling else self.taps(b, w, k, wstride)
                xk = b.gep(x, [b.mul(k, b.mul(h, wd))], source_etype=self.et)
                yk = b.gep(y, [b.mul(k, b.mul(ho, wo))], source_etype=self.et)

                def rows(oh0: ir.Value, count: int) -> None:
                    # input rows in order, each row's kw column vectors loaded once and
                    # used by every output row of the block that reads it; each output
                    # still sums its taps in (i, j) order (the same rounding as one row).
                    # A pool takes each input row's maximum over its kw columns once, for
                    # every output row that reads the row (max is exact and ``maximum``
                    # order-free, NaN included): 3x3 at stride 2, 26 instead of 36 of
                    # ``llvm.maximum``'s several instructions per 4 output rows
                    identity = ir.Constant(self.vt, [float("-inf") if pooling else 0.0] * self.w)
                    accs: list[ir.Value] = [identity] * count
                    for off in sorted({r * sh + i * dh for r in range(count) for i in range(kh)}):
                        ih = b.add(b.mul(oh0, _i(sh)), _i(off - pt))
                        at = b.gep(xk, [b.mul(ih, wd)], source_etype=self.et)
                        row = b.select(b.icmp_unsigned("<", ih, h), at, fill_row)
                        values = columns(row)
                        if pooling:
                            values = [functools.reduce(
                                lambda m, v: mathlib.intrinsic(b, "maximum", [m, v]), values)]
                        for r in range(count):
                            i, rem = divmod(off - r * sh, dh)
                            if rem or not 0 <= i < kh:
                                continue
                            for j, v in enumerate(values):
                                accs[r] = mathlib.intrinsic(b, "maximum", [accs[r], v]) if pooling else \
                                    b.call(fma, [v, taps[i * kw + j], accs[r]])
                    for r, acc in enumerate(accs):
                        at = b.gep(yk, [b.add(b.mul(b.add(oh0, _i(r)), wo), ow0)], source_etype=self.et)
                        self.store(b, acc, at, full, live)
                start: ir.Value = _i(0)
                for count in ROW_BLOCKS:  # the rows left after each size go to the next
                    end = b.sub(ho, b.srem(b.sub(ho, start), _i(count)))
                    for_range(b, start, end, count, lambda oh, n=count: rows(oh, n), f"oh{count}")
                    start = end
            for_range(b, _i(0), planes, 1, plane, "plane")
        for_range(b, _i(0), wo, self.w, segment, "seg")

    def flat_planes(self, b: ir.IRBuilder, x: ir.Value, w: ir.Value, y: ir.Value, wstride: ir.Value,
                    h: ir.Value, wd: ir.Value, ho: ir.Value, wo: ir.Value, planes: ir.Value) -> None:
        """The flat structure (module docstring): stride 1, ``wd == wo < W``."""
        (kh, kw), (dh, dw), (pt, pl) = self.g.kernel, self.g.dilation, self.g.padding
        fma = self.intrinsic(f"llvm.fmuladd.v{self.w}{self.suffix}", self.vt, [self.vt] * 3)
        mload = self.intrinsic(f"llvm.masked.load.v{self.w}{self.suffix}.p0", self.vt,
                               [PTR, I32, ir.VectorType(I1, self.w), self.vt])
        zero = zeros(self.vt)
        total = b.mul(ho, wo)
        vi = ir.VectorType(I64, self.w)
        with b.goto_entry_block():
            oh_at, ow_at = b.alloca(vi), b.alloca(vi)

        def chunk(p0: ir.Value) -> None:
            # (oh, ow) of each lane: lane 0's by one division, then rows wrapped in turn
            oh0, ow0 = b.sdiv(p0, wo), b.srem(p0, wo)
            b.store(self.lanes(b, oh0, 0, self.w), oh_at)
            b.store(self.lanes(b, ow0, 1, self.w), ow_at)
            wo_v = self.lanes(b, wo, 0, self.w)

            def wrap(_: ir.Value) -> None:
                ow, oh = b.load(ow_at, typ=vi), b.load(oh_at, typ=vi)
                past = b.icmp_signed(">=", ow, wo_v)
                b.store(b.select(past, b.sub(ow, wo_v), ow), ow_at)
                b.store(b.select(past, b.add(oh, self.lanes(b, _i(1), 0, self.w)), oh), oh_at)
            for_range(b, _i(0), b.sdiv(b.add(ow0, _i(self.w - 1)), wo), 1, wrap, "wrap")
            oh, ow = b.load(oh_at, typ=vi), b.load(ow_at, typ=vi)
            live = b.icmp_signed("<", self.lanes(b, p0, 1, self.w), self.lanes(b, total, 0, self.w))
            rows = [self.in_range(b, b.add(oh, self.lanes(b, _i(i * dh - pt), 0, self.w)), _i(0), h)
                    for i in range(kh)]
            cols = [self.in_range(b, b.add(ow, self.lanes(b, _i(j * dw - pl), 0, self.w)), _i(0), wd)
                    for j in range(kw)]
            masks = [[b.and_(live, b.and_(r, c)) for c in cols] for r in rows]
            full = b.icmp_signed("<=", b.add(p0, _i(self.w)), total)

            def plane(k: ir.Value) -> None:
                taps = self.taps(b, w, k, wstride)
                xk = b.gep(x, [b.add(b.mul(k, b.mul(h, wd)), p0)], source_etype=self.et)
                acc: ir.Value = zero
                for i in range(kh):
                    for j in range(kw):
                        off = b.add(b.mul(_i(i * dh - pt), wd), _i(j * dw - pl))
                        at = b.gep(xk, [off], source_etype=self.et)
                        v = b.call(mload, [at, ir.Constant(I32, self.size), masks[i][j], zero])
                        acc = b.call(fma, [v, taps[i * kw + j], acc])
                at = b.gep(y, [b.add(b.mul(k, total), p0)], source_etype=self.et)
                self.store(b, acc, at, full, live)
            for_range(b, _i(0), planes, 1, plane, "plane")
        for_range(b, _i(0), total, self.w, chunk, "px")

    def tap_columns(self, b: ir.IRBuilder, col0: ir.Value, n: ir.Value, live: ir.Value, wd: ir.Value):
        """A function of a row pointer: the segment's vector for each tap column j (input
        columns col0 + j * dw + l * sw for lane l, zero where masked off). At stride 2
        and dilation 1, taps 2i and 2i + 1 are the even and odd lanes of one pair of
        loads (from column col0 + 2i): two masked loads fewer per row of a 3x3 window."""
        (_, kw), sw, dw = self.g.kernel, self.g.stride[1], self.g.dilation[1]
        if sw != 2 or dw != 1:
            loads = [self.column_loads(b, b.add(col0, _i(j * dw)), n, live, wd) for j in range(kw)]
            return lambda row: [load(row) for load in loads]
        pairs = [self.column_pair(b, b.add(col0, _i(2 * i)), b.mul(n, _i(2)), wd) for i in range((kw + 1) // 2)]
        lanes = [ir.Constant(ir.VectorType(I32, self.w), [2 * lane + odd for lane in range(self.w)])
                 for odd in (0, 1)]

        def columns(row: ir.Value) -> list[ir.Value]:
            loaded = [pair(row) for pair in pairs]
            return [b.shuffle_vector(*loaded[j // 2], lanes[j % 2]) for j in range(kw)]
        return columns

    def column_pair(self, b: ir.IRBuilder, col0: ir.Value, count: ir.Value, wd: ir.Value):
        """A function of a row pointer: the row's 2W columns from col0 as two vectors,
        the source lanes s < ``count`` inside the row [0, wd) loaded, the rest zero."""
        mask_t = ir.VectorType(I1, self.w)
        mload = self.intrinsic(f"llvm.masked.load.v{self.w}{self.suffix}.p0", self.vt,
                               [PTR, I32, mask_t, self.vt])
        align, zero = ir.Constant(I32, self.size), self.fill
        masks = [b.and_(self.in_range(b, self.lanes(b, b.add(col0, _i(half * self.w)), 1, self.w), _i(0), wd),
                        b.icmp_signed("<", self.lanes(b, _i(half * self.w), 1, self.w), self.lanes(b, count, 0, self.w)))
                 for half in (0, 1)]

        def pair(row: ir.Value) -> tuple[ir.Value, ir.Value]:
            at = b.gep(row, [col0], source_etype=self.et)
            return (b.call(mload, [at, align, masks[0], zero]),
                    b.call(mload, [b.gep(at, [_i(self.w)], source_etype=self.et), align, masks[1], zero]))
        return pair

    def column_loads(self, b: ir.IRBuilder, col0: ir.Value, n: ir.Value, live: ir.Value, wd: ir.Value):
        """A function of a row pointer: the segment's W lanes of one tap column (input
        column col0 + l * sw for lane l), zero where masked off."""
        sw, zero = self.g.stride[1], self.fill
        mask_t = ir.VectorType(I1, self.w)
        mload = self.intrinsic(f"llvm.masked.load.v{self.w}{self.suffix}.p0", self.vt,
                               [PTR, I32, mask_t, self.vt])
        align = ir.Constant(I32, self.size)
        if sw == 1:
            mask = b.and_(live, self.in_range(b, self.lanes(b, col0, 1, self.w), _i(0), wd))
            return lambda row: b.call(mload, [b.gep(row, [col0], source_etype=self.et), align, mask, zero])
        if sw == 2:  # the even lanes of a pair; source lanes s < 2n - 1 (the last output's column)
            pair = self.column_pair(b, col0, b.sub(b.mul(n, _i(2)), _i(1)), wd)
            even = ir.Constant(ir.VectorType(I32, self.w), [2 * lane for lane in range(self.w)])
            return lambda row: b.shuffle_vector(*pair(row), even)
        cols_v = self.lanes(b, col0, sw, self.w)
        mask = b.and_(live, self.in_range(b, cols_v, _i(0), wd))
        # other strides: lane by lane from a clamped column (selected to zero when off)
        clamped = [b.select(b.extract_element(mask, ir.Constant(I32, lane)),
                            b.extract_element(cols_v, ir.Constant(I32, lane)), _i(0))
                   for lane in range(self.w)]

        def gather(row: ir.Value) -> ir.Value:
            v: ir.Value = undef(self.vt)
            for lane, col in enumerate(clamped):
                e = b.load(b.gep(row, [col], source_etype=self.et), typ=self.et)
                v = b.insert_element(v, e, ir.Constant(I32, lane))
            return b.select(mask, v, zero)
        return gather


def plane_geometry(spec_geometry: Mapping[str, Any]) -> Geometry:
    """A ``Geometry`` from a library spec's ``geometry`` entry (``Geometry.as_spec``) or
    from an op's attributes (no extents)."""
    return Geometry(*(tuple(spec_geometry.get(k, ())) for k in ("kernel", "stride", "dilation", "padding",
                                                                "extents")), spec_geometry.get("planes", 0))


__all__ = ["ARGS", "POOL_ARGS", "DepthwiseBuilder", "Geometry", "plane_geometry"]
