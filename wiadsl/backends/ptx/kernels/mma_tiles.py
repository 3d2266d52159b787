"""Global -> shared tile loads of 16-bit operands for the mma kernel (128 threads, k tile 32).

Two shared layouts: ``[mn][k]`` (64 x 32 halves, pitch ``PITCH_K``) and ``[k][mn]``
(32 x 64 halves, pitch ``PITCH_N``). Two ways to fill them:

| path | when | per thread per tile |
| --- | --- | --- |
| ``cp.async.cg`` 16 B | plain strided matrix, contiguous along the tile's inner axis, the other stride, offset, batch strides and the contiguous extent static multiples of 8 | 2 chunks of 8 halves; ``src-size`` 0 outside the matrix (zero fill) |
| element | anything else (odd sizes, transposed views, im2col) | 16 predicated ``ld.global.b16`` + ``st.shared.b16`` (0 outside) |

Invariants:
- Thread t owns fixed inner-axis positions: for ``[mn][k]`` the k lane is
  t % 32 (element) or 8*(t % 4) (chunk) and rows vary with j; for ``[k][mn]`` the
  mn lane is fixed and k varies with j. Row data of unguarded operands is computed
  once before the k loop; guarded (im2col) rows are recomputed per tile to keep
  register pressure low.
- A chunk is either wholly inside the matrix or wholly outside (the contiguous
  extent is a multiple of 8), so ``src-size`` is 16 or 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..builder import KernelBuilder
from ..codegen import KernelParams
from ..symbolic import Sym
from .operands import GemmOperand, KInfo, OperandLoader, RowInfo

THREADS, BK, TMN = 128, 32, 64


def _static8(v) -> bool:
    return isinstance(v, int) and v % 8 == 0


def async_ok(op: GemmOperand, k_major: bool) -> bool:
    """Whether 16-byte ``cp.async`` chunks along the tile's contiguous axis are exact."""
    if not op.simple():
        return False
    (rows, rs), (depth, ks) = op.mn[0], op.k[0]
    contiguous, other, extent = (rs, ks, rows) if k_major else (ks, rs, depth)
    return (contiguous == 1 and _static8(other) and _static8(extent) and _static8(op.offset)
            and all(_static8(s) for s in op.batch))


@dataclass
class TileLoad:
    """Loads one operand's tile (rows ``mn0..mn0+63``, k ``k0..k0+31``) into a stage."""

    kb: KernelBuilder
    ld: OperandLoader
    tid: str
    mn0: str
    k_major: bool
    pitch: int
    async_copy: bool
    hoisted: dict[int, RowInfo] = field(default_factory=dict)

    def _mn_k(self, j: int) -> tuple[str, str]:
        """(tile row, tile k) of this thread's j-th element or chunk, as registers/immediates."""
        kb, tid = self.kb, self.tid
        mn, kk = kb.reg("b32"), kb.reg("b32")
        if self.async_copy and not self.k_major:    # 64 rows x 4 chunks
            kb.emit(f"shr.u32 {mn}, {tid}, 2")
            kb.emit(f"add.u32 {mn}, {mn}, {32 * j}")
            kb.emit(f"and.b32 {kk}, {tid}, 3")
            kb.emit(f"shl.b32 {kk}, {kk}, 3")
        elif self.async_copy:                        # 32 k x 8 chunks
            kb.emit(f"and.b32 {mn}, {tid}, 7")
            kb.emit(f"shl.b32 {mn}, {mn}, 3")
            kb.emit(f"shr.u32 {kk}, {tid}, 3")
            kb.emit(f"add.u32 {kk}, {kk}, {16 * j}")
        elif not self.k_major:                       # 64 x 32 elements
            kb.emit(f"shr.u32 {mn}, {tid}, 5")
            kb.emit(f"add.u32 {mn}, {mn}, {4 * j}")
            kb.emit(f"and.b32 {kk}, {tid}, 31")
        else:                                        # 32 x 64 elements
            kb.emit(f"and.b32 {mn}, {tid}, 63")
            kb.emit(f"shr.u32 {kk}, {tid}, 6")
            kb.emit(f"add.u32 {kk}, {kk}, {2 * j}")
        return mn, kk

    @property
    def count(self) -> int:
        return 2 if self.async_copy else 16

    def _row(self, j: int, mn: str) -> RowInfo:
        """Row data of element j: hoisted before the k loop unless the operand is guarded."""
        key = 0 if self.k_major else j  # [k][mn]: one row per thread
        if key in self.hoisted:
            return self.hoisted[key]
        g = self.kb.reg("b32")
        self.kb.emit(f"add.u32 {g}, {self.mn0}, {mn}")
        return self.ld.row(g)

    def prepare(self) -> None:
        """Before the k loop: row data of every element (unguarded operands only)."""
        if self.ld.op.guards:
            return
        for j in range(1 if self.k_major else self.count):
            mn, _ = self._mn_k(j)
            self.hoisted[j] = self._row(j, mn)

    def emit(self, stage_base: str, k0: str) -> None:
        kb = self.kb
        kinfo: dict[int, KInfo] = {}
        for j in range(self.count):
            mn, kk = self._mn_k(j)
            row = self._row(j, mn)
            key = j if self.k_major else 0  # [mn][k]: one k per thread
            if key not in kinfo:
                gk = kb.reg("b32")
                kb.emit(f"add.u32 {gk}, {k0}, {kk}")
                kinfo[key] = self.ld.kidx(gk)
            ok, addr = self.ld.element(row, kinfo[key])
            slot, saddr = kb.reg("b32"), kb.reg("b32")
            if self.k_major:
                kb.emit(f"mad.lo.u32 {slot}, {kk}, {self.pitch}, {mn}")
            else:
                kb.emit(f"mad.lo.u32 {slot}, {mn}, {self.pitch}, {kk}")
            kb.emit(f"mad.lo.u32 {saddr}, {slot}, 2, {stage_base}")
            if self.async_copy:
                n = kb.reg("b32")
                kb.emit(f"selp.u32 {n}, 16, 0, {ok}")
                kb.emit(f"cp.async.cg.shared.global [{saddr}], [{addr}], 16, {n}")
            else:
                h = kb.reg("b16")
                kb.emit(f"mov.b16 {h}, 0")
                kb.emit(f"@{ok} ld.global.b16 {h}, [{addr}]")
                kb.emit(f"st.shared.b16 [{saddr}], {h}")


def tile_loader(kb: KernelBuilder, params: KernelParams, op: GemmOperand, batch: list[str],
                tid: str, mn0: str, tile: int, k_major: bool, pitch: int,
                batch_extents: tuple[Sym, ...]) -> TileLoad:
    """The loader of one operand; row data is prepared here (before the k loop)."""
    assert tile == TMN
    ld = OperandLoader(kb, params, op, batch, batch_extents)
    t = TileLoad(kb, ld, tid, mn0, k_major, pitch, async_ok(op, k_major))
    t.prepare()
    return t
