"""GEMM operands a TMA tensor map can describe, and their tiles in shared memory.

An operand X[mn, k] (``operands.GemmOperand``) is TMA-loadable when it is a plain
strided matrix (one coordinate per side, no guards) contiguous along k (*K-major*)
or, for 16-bit types, along mn (*MN-major*), whose base, other stride and batch
stride are multiples of 16 bytes (the tensor map's rules; buffers are 256-byte
aligned) and whose batch offset is one stride times the linear batch index (or 0).
Its tensor map is 2-D ``(inner, outer)`` or, batched, 3-D ``(inner, outer, batch)``,
innermost first, out-of-bounds elements zero-filled (edge tiles need no guards).

Shared memory holds one k tile of ``BK_BYTES`` = 128 bytes of k per row, swizzled
128B (``Swizzle<3,4,3>``, the layout ``wgmma`` reads with a 128B-swizzle
descriptor):

- K-major, ``rows`` mn rows: one box ``(BK, rows)``: row r at byte 128 r;
- MN-major: ``rows / 64`` boxes ``(64, BK)`` of 64 mn x BK k, 8 KiB apart: k row k of
  box h at byte ``8192 h + 128 k``.

Invariants: ``conditions`` are plan expressions that must hold at launch when some
size is symbolic (all static: empty, the operand is eligible outright); an operand
that can never be loaded by TMA is ``None`` (``tma_operand``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ....dtypes import DType
from ..isa import info
from ..symbolic import Sym, _fold, _p, call, mul, product
from .operands import GemmOperand

BK_BYTES = 128
MN_BOX = 64                         # mn elements of one MN-major box (128 bytes of 16-bit)
BOX_BYTES_MN = MN_BOX * 2 * 64      # bytes of one MN-major box (64 mn x 64 k halves)
#: CUtensorMapDataType of each dtype (the copy moves bytes; the type is informative)
TMA_TYPES = {DType.F16: 6, DType.BF16: 9, DType.F32: 7, DType.I8: 0}
#: TMA coordinates are signed 32-bit
COORD_LIMIT = 1 << 31
STRIDE_LIMIT = 1 << 40


@dataclass(frozen=True)
class TmaOperand:
    """One operand loaded by TMA (see the module docstring)."""

    op: GemmOperand
    k_major: bool
    dims: tuple[Sym, ...]
    strides: tuple[Sym, ...]
    offset: Sym
    batched: bool
    conditions: tuple[str, ...]

    @property
    def esize(self) -> int:
        return info(self.op.dtype).size

    @property
    def bk(self) -> int:
        """k elements of one tile (128 bytes)."""
        return BK_BYTES // self.esize

    def box(self, rows: int) -> tuple[int, ...]:
        base = (self.bk, rows) if self.k_major else (MN_BOX, self.bk)
        return base + ((1,) if self.batched else ())

    def boxes(self, rows: int) -> int:
        """TMA copies per tile of ``rows`` mn rows."""
        return 1 if self.k_major else rows // MN_BOX

    def plan_arg(self, rows: int) -> dict[str, Any]:
        """The launch plan's description of the tensor map (docs/ptx.md, ``tmap``)."""
        return {"tmap": self.op.buffer, "dtype": str(self.op.dtype),
                "data_type": TMA_TYPES[self.op.dtype], "elem_bytes": self.esize,
                "dims": list(self.dims), "strides": list(self.strides), "offset": self.offset,
                "box": list(self.box(rows)), "swizzle": 3}


def tma_operand(op: GemmOperand, batch: tuple[Sym, ...], mn_major_ok: bool) -> TmaOperand | None:
    """The TMA view of ``op`` (``batch``: the product's batch extents), or None."""
    if not op.simple() or op.dtype not in TMA_TYPES:
        return None
    esize = info(op.dtype).size
    (rows, rs), (depth, ks) = op.mn[0], op.k[0]
    if ks == 1:
        k_major, inner, outer, ostride = True, depth, rows, rs
    elif rs == 1 and mn_major_ok:
        k_major, inner, outer, ostride = False, rows, depth, ks
    else:
        return None
    conds: list[Sym] = []
    if outer == 1:  # the stride is never used: any valid one
        ostride_b: Sym = mul(16, call("cdiv", mul(inner, esize), 16))
    else:
        ostride_b = mul(ostride, esize)
        conds += [_fold(f"{_p(ostride_b)} % 16 == 0"), _fold(f"{_p(ostride_b)} > 0"),
                  _fold(f"{_p(ostride_b)} < {STRIDE_LIMIT}")]
    offset_b = mul(op.offset, esize)
    conds.append(_fold(f"{_p(offset_b)} % 16 == 0"))
    zstride = _batch_stride(op.batch, batch)
    if zstride is None:
        return None
    dims: tuple[Sym, ...] = (inner, outer)
    strides: tuple[Sym, ...] = (ostride_b,)
    batched = zstride != 0
    if batched:
        zb = mul(zstride, esize)
        dims += (product(list(batch)),)
        strides += (zb,)
        conds += [_fold(f"{_p(zb)} % 16 == 0"), _fold(f"{_p(zb)} > 0"),
                  _fold(f"{_p(zb)} < {STRIDE_LIMIT}")]
    conds += [_fold(f"{_p(d)} < {COORD_LIMIT}") for d in dims]
    if any(c == 0 for c in conds):
        return None
    pending = tuple(str(c) for c in conds if isinstance(c, str))
    return TmaOperand(op, k_major, dims, strides, offset_b, batched, pending)


def _batch_stride(strides: tuple[Sym, ...], extents: tuple[Sym, ...]) -> Sym | None:
    """The stride S of the linear batch index (``strides[i] == S * prod(extents[i+1:])`` on
    every axis of extent other than 1), 0 when the operand does not vary with the batch,
    None when neither holds (symbolic strides must match syntactically)."""
    live = [i for i, e in enumerate(extents) if e != 1]
    if all(strides[i] == 0 for i in live):
        return 0
    unit = strides[live[-1]]
    if any(strides[i] != mul(unit, product(list(extents[i + 1:]))) for i in live):
        return None
    return unit
