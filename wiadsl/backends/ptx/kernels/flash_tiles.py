"""Global -> shared tile copies of the flash-attention kernels (Q, K and V tiles).

A tile is ``rows`` consecutive rows (from a row register ``row0``) by ``cols``
columns of a ``GemmOperand`` (rows = its mn index, columns = its k index), stored
row-major in shared memory at ``pitch`` elements per row. ``cols`` is the padded
width the kernel computes on; columns at or past the operand's depth, and rows at
or past its row count, are stored as 0 (a padded head dimension contributes
nothing to a dot product, and a zero V row times a zero probability is 0, never
a NaN from stale shared memory).

| mode | when | per thread |
| --- | --- | --- |
| ``async`` | a plain matrix, contiguous along its columns, with the depth a static multiple of the 16-byte chunk and the row and batch strides and the offset provably multiples of it (``symbolic.divisible``) | ``ceil(rows*cols/chunk/128)`` ``cp.async.cg`` of 16 bytes (``src-size`` 0: zero fill) |
| ``element`` | anything else | a loop over elements ``tid, tid+128, ...``: predicated load (0 outside), converted to the shared element type, ``st.shared`` |

Invariants:
- 128 threads copy a tile; ``async`` copies land only at the kernel's
  ``cp.async.wait_group`` (the caller commits the group), ``element`` copies are
  plain stores, visible to other threads after the caller's ``bar.sync``.
- A chunk is wholly inside the operand or wholly outside (the depth is a multiple
  of the chunk), so its ``src-size`` is 16 or 0.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ....dtypes import DType
from ..builder import KernelBuilder
from ..isa import info
from ..symbolic import divisible
from .common import StridedLoop
from .operands import GemmOperand, OperandLoader

THREADS = 128
CHUNK_BYTES = 16


def chunk_ok(op: GemmOperand) -> bool:
    """Whether 16-byte ``cp.async`` chunks along the columns copy ``op`` exactly: columns
    contiguous, the depth a static multiple of the chunk, the row and batch strides and
    the offset multiples of it (so every chunk is 16-byte aligned)."""
    if not op.simple():
        return False
    n = CHUNK_BYTES // info(op.dtype).size
    (_, rs), (depth, ks) = op.mn[0], op.k[0]
    return ks == 1 and isinstance(depth, int) and \
        all(divisible(x, n) for x in (rs, depth, op.offset, *op.batch))


@dataclass
class TileCopy:
    """Copies one operand's ``rows`` x ``cols`` tile into shared memory (module docstring).

    ``convert(reg, dtype)`` turns a loaded element (a compute register: f32 for
    16-bit floats) into the register stored, of class ``store_type``; the tensor-core
    kernel stores the raw 16-bit bits instead (``raw``)."""

    kb: KernelBuilder
    ld: OperandLoader
    tid: str
    rows: int
    cols: int
    pitch: int
    #: the shared element: "b16" (raw 16-bit copies) or "f32"
    store_type: str
    load: Callable[[str, DType], str]
    use_async: bool

    @property
    def elem_bytes(self) -> int:
        return 2 if self.store_type == "b16" else 4

    def emit(self, base: str, row0: str) -> None:
        """Copy rows ``row0 ..`` into the tile at shared address ``base`` (a b32 register)."""
        if self.use_async:
            self._chunks(base, row0)
        else:
            total = self.rows * self.cols
            StridedLoop(self.kb, "tile").run(self.tid, str(total), str(THREADS),
                                             lambda e: self._element(base, row0, e))

    def _slot(self, base: str, r: str, c: str) -> str:
        kb, addr = self.kb, self.kb.reg("b32")
        kb.emit(f"mad.lo.u32 {addr}, {r}, {self.pitch}, {c}")
        kb.emit(f"mad.lo.u32 {addr}, {addr}, {self.elem_bytes}, {base}")
        return addr

    def _element(self, base: str, row0: str, e: str) -> None:
        kb = self.kb
        r, c, g = kb.reg("b32"), kb.reg("b32"), kb.reg("b32")
        kb.emit(f"div.u32 {r}, {e}, {self.cols}")
        kb.emit(f"rem.u32 {c}, {e}, {self.cols}")
        kb.emit(f"add.u32 {g}, {row0}, {r}")
        ok, addr = self.ld.element(self.ld.row(g), self.ld.kidx(c))
        dtype = self.ld.op.dtype
        if self.store_type == "b16":
            val = kb.reg("b16")
            kb.emit(f"mov.b16 {val}, 0")
            kb.emit(f"@{ok} ld.global.b16 {val}, [{addr}]")
            kb.emit(f"st.shared.b16 [{self._slot(base, r, c)}], {val}")
            return
        val = kb.reg("f32")
        kb.emit(f"mov.f32 {val}, 0f00000000")
        skip = kb.new_label("tile_pad")
        kb.bra(skip, ok, negate=True)
        kb.emit(f"mov.f32 {val}, {self.load(addr, dtype)}")
        kb.label(skip)
        kb.emit(f"st.shared.f32 [{self._slot(base, r, c)}], {val}")

    def _chunks(self, base: str, row0: str) -> None:
        kb = self.kb
        per = CHUNK_BYTES // self.elem_bytes
        per_row, total = self.cols // per, self.rows * self.cols // per
        for j in range((total + THREADS - 1) // THREADS):
            c = kb.reg("b32")
            kb.emit(f"add.u32 {c}, {self.tid}, {THREADS * j}")
            skip = None
            if THREADS * (j + 1) > total:  # the last round: only some threads have a chunk
                p, skip = kb.reg("pred"), kb.new_label("tile_chunk")
                kb.emit(f"setp.ge.u32 {p}, {c}, {total}")
                kb.bra(skip, p)
            r, col, g = kb.reg("b32"), kb.reg("b32"), kb.reg("b32")
            kb.emit(f"div.u32 {r}, {c}, {per_row}")
            kb.emit(f"rem.u32 {col}, {c}, {per_row}")
            kb.emit(f"mul.lo.u32 {col}, {col}, {per}")
            kb.emit(f"add.u32 {g}, {row0}, {r}")
            ok, addr = self.ld.element(self.ld.row(g), self.ld.kidx(col))
            n = kb.reg("b32")
            kb.emit(f"selp.u32 {n}, {CHUNK_BYTES}, 0, {ok}")
            kb.emit(f"cp.async.cg.shared.global [{self._slot(base, r, col)}], [{addr}], "
                    f"{CHUNK_BYTES}, {n}")
            if skip is not None:
                kb.label(skip)


def tile_copy(kb: KernelBuilder, ld: OperandLoader, tid: str, rows: int, cols: int, pitch: int,
              store_type: str, load: Callable[[str, DType], str]) -> TileCopy:
    """The copy of one operand's tiles: ``async`` when ``chunk_ok`` and the shared element
    is the operand's own (raw 16-bit, or f32 from f32), else ``element``."""
    same = (store_type == "b16") == (info(ld.op.dtype).size == 2) and \
        (store_type == "b16" or ld.op.dtype is DType.F32)
    return TileCopy(kb, ld, tid, rows, cols, pitch, store_type, load, same and chunk_ok(ld.op))


__all__ = ["TileCopy", "chunk_ok", "tile_copy"]
