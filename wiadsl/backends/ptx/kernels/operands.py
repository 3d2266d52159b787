"""GEMM operands as index maps, shared by the FMA and tensor-core (mma) tile kernels.

A GEMM operand is a matrix X[mn, k] read from a strided buffer. Its row index
``mn`` (rows of A, columns of B) and reduction index ``k`` each decompose,
row-major, into coordinates over ``mn`` / ``k`` extents; the element offset is
linear in those coordinates. A plain matmul operand has one coordinate on each
side; an implicit-GEMM conv2d input (im2col on the fly) has ``mn = (n, oh, ow)``
and ``k = (c, kh, kw)`` with offset ``n*sN + oh*s*sH + ow*s*sW + c*sC + kh*sH +
kw*sW`` and two window *guards* (zero padding).

Invariants:
- ``Guard(mi, a, ki, b, bias, limit)``: the element exists only where
  ``0 <= a*mn_coord[mi] + b*k_coord[ki] + bias < limit``; elsewhere it reads 0,
  like every element with ``mn >= rows`` or ``k >= depth`` (tile edges).
- Row data (``RowInfo``) is computed once per distinct row register and reused
  across every k tile; only the k side is recomputed per tile.
- Offsets are signed element counts; addresses ``base + off * size``. They are
  32-bit when the operand's offsets provably fit ``index_width.INDEX32_LIMIT`` (static
  sizes), else 64-bit (``operand_wide``: symbolic sizes, a K = 65536 f16 matrix
  past row 32768...). Coordinates (rows, k, batch index) stay 32-bit either way.
"""

from __future__ import annotations

from dataclasses import dataclass

from ....dtypes import DType
from .. import index_width
from ..builder import KernelBuilder
from ..codegen import KernelParams
from ..index_width import byte_address, is_b32, offset_span, scaled
from ..isa import info
from ..symbolic import Sym, product


@dataclass(frozen=True)
class Guard:
    mn_axis: int
    mn_coef: int
    k_axis: int
    k_coef: int
    bias: int
    limit: Sym


@dataclass(frozen=True)
class GemmOperand:
    """X[mn, k] = buffer[offset + batch + sum(mn coords * strides) + sum(k coords * strides)]."""

    buffer: str
    dtype: DType
    offset: Sym
    batch: tuple[Sym, ...]
    mn: tuple[tuple[Sym, Sym], ...]
    k: tuple[tuple[Sym, Sym], ...]
    guards: tuple[Guard, ...] = ()

    @property
    def rows(self) -> Sym:
        return product([e for e, _ in self.mn])

    @property
    def depth(self) -> Sym:
        return product([e for e, _ in self.k])

    def simple(self) -> bool:
        """One coordinate per side and no guards (a plain strided matrix)."""
        return len(self.mn) == 1 and len(self.k) == 1 and not self.guards


def operand_wide(op: GemmOperand, batch: tuple[Sym, ...]) -> bool:
    """Whether ``op``'s element offsets may pass INDEX32_LIMIT (symbolic sizes may)."""
    span = offset_span(op.offset, [*zip(batch, op.batch, strict=True), *op.mn, *op.k])
    return span is None or span > index_width.INDEX32_LIMIT


@dataclass
class RowInfo:
    """What one row (mn index) contributes: offset, validity, guard partial sums."""

    off: str | None
    valid: str
    guard_base: list[str]


@dataclass
class KInfo:
    off: str | None
    valid: str
    coords: list[str]


class OperandLoader:
    """Emits index math and guarded loads for one operand of one tile kernel."""

    def __init__(self, kb: KernelBuilder, params: KernelParams, op: GemmOperand,
                 batch_coords: list[str], batch: tuple[Sym, ...]):
        self.kb, self.params, self.op = kb, params, op
        self.wide = operand_wide(op, batch)
        self.base = params.buffer(op.buffer)
        self.rows = params.sym(op.rows)
        self.depth = params.sym(op.depth)
        off = None
        for c, s in zip(batch_coords, op.batch, strict=True):
            if s != 0:
                off = self.mad(c, s, off)
        if op.offset != 0:
            t = "s64" if self.wide else "s32"
            r = kb.reg("b64" if self.wide else "b32")
            kb.emit(f"add.{t} {r}, {off or 0}, {params.sym(op.offset, t)}")
            off = r
        self.batch_off = off
        self.row_memo: dict[str, RowInfo] = {}

    def mad(self, reg: str, stride: Sym, acc: str | None) -> str:
        """``reg * stride (+ acc)`` at the operand's offset width; ``reg`` is a
        coordinate (b32, or b64 from a 64-bit epilogue's batch decomposition)."""
        kb, t = self.kb, "s64" if self.wide else "s32"
        return scaled(kb, self._coordinate(reg), self.params.sym(stride, t), t, acc)

    def _coordinate(self, reg: str) -> str:
        """A coordinate register at the offset width (coordinates are >= 0 and < 2^32)."""
        if not reg.startswith("%") or is_b32(reg) != self.wide:
            return reg
        out = self.kb.reg("b64" if self.wide else "b32")
        self.kb.emit(f"cvt.{'u64.u32' if self.wide else 'u32.u64'} {out}, {reg}")
        return out

    def decompose(self, lin: str, extents: list[Sym]) -> list[str]:
        """Row-major coordinates of ``lin`` over ``extents`` (the first is not wrapped)."""
        kb, coords, rest = self.kb, [], lin
        for e in reversed(extents[1:]):
            c, q, d = kb.reg("b32"), kb.reg("b32"), self.params.sym(e)
            kb.emit(f"rem.u32 {c}, {rest}, {d}")
            kb.emit(f"div.u32 {q}, {rest}, {d}")
            coords.append(c)
            rest = q
        return [rest, *reversed(coords)]

    def row(self, mn: str) -> RowInfo:
        """Offset, validity and guard partials of global row ``mn`` (memoized per register)."""
        if mn in self.row_memo:
            return self.row_memo[mn]
        kb, op = self.kb, self.op
        coords = self.decompose(mn, [e for e, _ in op.mn])
        off = self.batch_off
        for c, (_, s) in zip(coords, op.mn, strict=True):
            if s != 0:
                off = self.mad(c, s, off)
        valid = kb.reg("pred")
        kb.emit(f"setp.lt.u32 {valid}, {mn}, {self.rows}")
        bases = []
        for g in op.guards:
            r = kb.reg("b32")
            kb.emit(f"mad.lo.s32 {r}, {coords[g.mn_axis]}, {g.mn_coef}, {g.bias}")
            bases.append(r)
        self.row_memo[mn] = RowInfo(off, valid, bases)
        return self.row_memo[mn]

    def kidx(self, k: str) -> KInfo:
        kb, op = self.kb, self.op
        coords = self.decompose(k, [e for e, _ in op.k])
        off = None
        for c, (_, s) in zip(coords, op.k, strict=True):
            if s != 0:
                off = self.mad(c, s, off)
        valid = kb.reg("pred")
        kb.emit(f"setp.lt.u32 {valid}, {k}, {self.depth}")
        return KInfo(off, valid, coords)

    def element(self, row: RowInfo, k: KInfo) -> tuple[str, str]:
        """(predicate: the element exists, byte address) of X[row, k]."""
        kb, op = self.kb, self.op
        ok = kb.reg("pred")
        kb.emit(f"and.pred {ok}, {row.valid}, {k.valid}")
        for g, base in zip(op.guards, row.guard_base, strict=True):
            v, lo, hi = kb.reg("b32"), kb.reg("pred"), kb.reg("pred")
            kb.emit(f"mad.lo.s32 {v}, {k.coords[g.k_axis]}, {g.k_coef}, {base}")
            kb.emit(f"setp.ge.s32 {lo}, {v}, 0")
            kb.emit(f"setp.lt.s32 {hi}, {v}, {self.params.sym(g.limit, 's32')}")
            kb.emit(f"and.pred {ok}, {ok}, {lo}")
            kb.emit(f"and.pred {ok}, {ok}, {hi}")
        return ok, self.address(row.off, k.off)

    def address(self, a: str | None, b: str | None) -> str:
        kb = self.kb
        if a is None and b is None:
            return self.base
        if a is None or b is None:
            off = a or b
        else:
            off = kb.reg("b64" if self.wide else "b32")
            kb.emit(f"add.{'s64' if self.wide else 's32'} {off}, {a}, {b}")
        return byte_address(kb, self.base, off, info(self.op.dtype).size)  # type: ignore[arg-type]


def strided_operand(buffer: str, dtype: DType, offset: Sym, batch: tuple[Sym, ...],
                    rows: Sym, row_stride: Sym, depth: Sym, k_stride: Sym) -> GemmOperand:
    """A plain strided matrix operand (matmul)."""
    return GemmOperand(buffer, dtype, offset, batch, ((rows, row_stride),), ((depth, k_stride),))
