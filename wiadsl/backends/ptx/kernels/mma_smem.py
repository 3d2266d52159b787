"""Shared-memory tiles of the tensor-core GEMM: rows of 16-byte chunks, XOR-swizzled.

A tile is ``rows`` rows of ``pitch`` bytes (64, or a multiple of 128). Chunk ``c``
(bytes ``16c .. 16c+15``) of row ``r`` is stored at ``r*pitch + 16*(c ^ x(r))``:

| pitch | ``x(r)`` | rows per 128-byte bank line |
| --- | --- | --- |
| 64 (four chunks) | ``(r >> 1) & 3`` | 2 |
| >= 128 | ``((r & 3) << 1) | ((r >> 2) & 1)`` | 1 |

Invariants (a bank line is 32 banks x 4 bytes = 8 chunks; an access is conflict free
when the 16-byte pieces one phase touches fall in 8 distinct chunk slots mod 8):
- ``x`` only permutes chunks within each aligned group of 8 (within the row for 64),
  so every byte of the tile has exactly one place and the tile needs no padding.
- ``ldmatrix`` reads 8 rows ``r0..r0+7`` (``r0 % 8 == 0``) at one logical chunk: the slot
  is ``4*(r&1) + (c ^ x(r))`` (pitch 64) or ``c ^ x(r)`` mod 8 (pitch >= 128); over the
  8 rows both take 8 distinct values.
- a quarter warp of ``cp.async`` writes 8 consecutive chunk ids of the tile: two whole
  64-byte rows (slots ``0..3`` and ``4..7``) or 8 aligned chunks of one row (a
  permutation of them).
- ``x`` depends on ``r & 7`` only, so a lane's offsets repeat every 8 rows.
- tf32 B fragments read single words at rows ``t + 4h`` (t < 4) and chunks ``2n + q``
  (q < 2) with ``x = 2t | h``: the slot ``q ^ h ^ 2t ^ 2n`` takes 8 values over (q, t).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..builder import KernelBuilder


def swizzle(pitch: int, row: int) -> int:
    """``x(row)`` of a tile of ``pitch`` bytes per row."""
    if pitch == 64:
        return (row >> 1) & 3
    assert pitch % 128 == 0, pitch
    return ((row & 3) << 1) | ((row >> 2) & 1)


def emit_swizzle(kb: KernelBuilder, pitch: int, row: str) -> str:
    """``x(row)`` of a row held in a b32 register."""
    x = kb.reg("b32")
    if pitch == 64:
        kb.emit(f"bfe.u32 {x}, {row}, 1, 2")
        return x
    lo, hi = kb.reg("b32"), kb.reg("b32")
    kb.emit(f"and.b32 {lo}, {row}, 3")
    kb.emit(f"shl.b32 {lo}, {lo}, 1")
    kb.emit(f"bfe.u32 {hi}, {row}, 2, 1")
    kb.emit(f"or.b32 {x}, {lo}, {hi}")
    return x


@dataclass(frozen=True)
class SmemTile:
    """One operand's tile within a pipeline stage: ``rows`` x ``pitch`` bytes at ``base``."""

    rows: int
    pitch: int
    base: int

    @property
    def chunks(self) -> int:
        """16-byte chunks per row."""
        return self.pitch // 16

    @property
    def size(self) -> int:
        return self.rows * self.pitch

    def lane_offset(self, kb: KernelBuilder, row: str, chunk: str, byte: int | str = 0) -> str:
        """Byte offset (from the stage) of ``byte`` within chunk ``chunk`` of row ``row``."""
        x = emit_swizzle(kb, self.pitch, row)
        phys = kb.reg("b32")
        kb.emit(f"xor.b32 {phys}, {chunk}, {x}")
        off = self.slot(kb, row, phys)
        if byte != 0:
            kb.emit(f"add.u32 {off}, {off}, {byte}")
        return off

    def slot(self, kb: KernelBuilder, row: str, phys: str) -> str:
        """Byte offset (from the stage) of the chunk stored in slot ``phys`` of row ``row``
        (a chunk already swizzled: ``c ^ x(row)``)."""
        off = kb.reg("b32")
        kb.emit(f"mad.lo.u32 {off}, {row}, {self.pitch}, {self.base}")
        kb.emit(f"mad.lo.u32 {off}, {phys}, 16, {off}")
        return off
