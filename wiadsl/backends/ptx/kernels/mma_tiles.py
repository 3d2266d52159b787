"""Global -> shared tile loads of the tensor-core GEMM (any block tile, element size 1, 2 or 4).

An operand's tile holds rows ``mn0 .. mn0+tile-1`` and k ``k0 .. k0+bk-1`` of the
operand, either ``[mn][k]`` (64-byte rows) or ``[k][mn]`` (``k_major``: B with N
contiguous), swizzled (``mma_smem``). Two ways to fill it:

| path | when | per thread per tile |
| --- | --- | --- |
| chunk | a plain strided matrix contiguous along the tile's rows, whose other stride, offset and batch strides are multiples of 16 bytes | ``cp.async.cg`` 16-byte chunks; ``src-size`` = the bytes inside the matrix (0 past its rows, fewer at the end of a row: zero fill) |
| element | anything else (unaligned or transposed views, im2col) | predicated scalar ``ld.global`` + ``st.shared`` (0 outside, im2col guards for conv) |

The choice is made at compile time when every stride and offset is known, else by a
predicate evaluated once per kernel from the parameters (``fast``): the same for every
thread of the grid, so the branch between the two paths never diverges. Both paths
fill the same layout, so the pipeline around them does not care which one ran.

Invariants:
- The 16-byte path needs the buffers themselves 16-byte aligned: both executors
  allocate each buffer on its own (cuMemAlloc: 256 bytes; the simulator: a region).
- A chunk starts at a k (or mn) that is a multiple of 16 bytes, so its source is
  16-byte aligned whenever ``fast`` holds; its length is clamped by ``src-size``, so any
  extent is exact.
- Thread ``t``'s j-th chunk (element) is ``t + j * threads`` in row-major order over
  the tile's chunks (elements): fixed lane column, rows ``t / per_row + j * (threads /
  per_row)``. The shared offsets of a lane repeat every 8 rows, so at most
  ``8 / gcd(8, rows per j)`` distinct offset registers are computed, once, before the
  k loop; the rows' global data is recomputed per tile (cheap for plain matrices; for
  im2col it keeps registers free for the accumulators).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import gcd

from ..builder import KernelBuilder
from ..codegen import KernelParams
from ..symbolic import Sym
from .mma_smem import SmemTile
from .operands import GemmOperand, KInfo, OperandLoader, RowInfo

LD_TYPE = {1: "b8", 2: "b16", 4: "b32"}
LD_REG = {1: "b16", 2: "b16", 4: "b32"}


def fast_conditions(op: GemmOperand, k_major: bool, elem: int) -> list[Sym] | None:
    """The values that must be multiples of ``16 / elem`` for the 16-byte path (None:
    the path can never apply)."""
    if not op.simple():
        return None
    (_, rs), (_, ks) = op.mn[0], op.k[0]
    contiguous, other = (rs, ks) if k_major else (ks, rs)
    if contiguous != 1:
        return None
    vec = 16 // elem
    need = [s for s in (other, op.offset, *op.batch) if not (isinstance(s, int) and s % vec == 0)]
    if any(isinstance(s, int) for s in need):
        return None  # a known value that is not aligned
    return need


@dataclass(frozen=True)
class LanePlan:
    """One path's fixed per-lane data: shared offsets per row phase, the first tile row,
    and the lane column's coordinate along the tile's contiguous axis."""

    offsets: list[str]
    row0: str
    first: str


@dataclass
class TileLoad:
    """Loads one operand's tile into a stage; ``prepare`` runs before the k loop."""

    kb: KernelBuilder
    params: KernelParams
    ld: OperandLoader
    tile: SmemTile
    elem: int
    k_major: bool
    mn0: str
    tid: str
    threads: int
    #: the chunk path's predicate: True/False when static, else a pred register
    fast: bool | str = False
    lanes: dict[str, LanePlan] = field(default_factory=dict)

    # ---------------------------------------------------------------- geometry
    def _per_row(self, path: str) -> int:
        return self.tile.chunks if path == "chunk" else self.tile.pitch // self.elem

    def count(self, path: str) -> int:
        return self.tile.rows * self._per_row(path) // self.threads

    def _rows_per_j(self, path: str) -> int:
        return self.threads // self._per_row(path)

    @property
    def paths(self) -> list[str]:
        return ["chunk"] if self.fast is True else ["element"] if self.fast is False \
            else ["chunk", "element"]

    @property
    def async_copy(self) -> bool:
        return self.fast is not False

    # ---------------------------------------------------------------- before the loop
    def prepare(self, conditions: list[Sym] | None) -> None:
        kb = self.kb
        if conditions is None or not conditions:
            self.fast = conditions is not None
        else:
            t = "64" if self.ld.wide else "32"
            p = kb.reg("pred")
            kb.emit(f"setp.eq.u32 {p}, 0, 0")
            for s in conditions:
                r, q = kb.reg(f"b{t}"), kb.reg("pred")
                kb.emit(f"and.b{t} {r}, {self.params.sym(s, 's' + t)}, {16 // self.elem - 1}")
                kb.emit(f"setp.eq.s{t} {q}, {r}, 0")
                kb.emit(f"and.pred {p}, {p}, {q}")
            self.fast = p
        for path in self.paths:
            self.lanes[path] = self._lanes(path)

    def _lanes(self, path: str) -> LanePlan:
        kb, per_row = self.kb, self._per_row(path)
        col, row0 = kb.reg("b32"), kb.reg("b32")
        kb.emit(f"and.b32 {col}, {self.tid}, {per_row - 1}")
        kb.emit(f"shr.u32 {row0}, {self.tid}, {per_row.bit_length() - 1}")
        rpj = self._rows_per_j(path)
        offs = []
        for p in range(min(self.count(path), 8 // gcd(8, rpj))):
            row = row0
            if p:
                row = kb.reg("b32")
                kb.emit(f"add.u32 {row}, {row0}, {p * rpj}")
            if path == "chunk":
                offs.append(self.tile.lane_offset(kb, row, col))
            else:
                byte, chunk, within = kb.reg("b32"), kb.reg("b32"), kb.reg("b32")
                kb.emit(f"mul.lo.u32 {byte}, {col}, {self.elem}")
                kb.emit(f"shr.u32 {chunk}, {byte}, 4")
                kb.emit(f"and.b32 {within}, {byte}, 15")
                offs.append(self.tile.lane_offset(kb, row, chunk, within))
        first = kb.reg("b32")
        kb.emit(f"mul.lo.u32 {first}, {col}, {16 // self.elem if path == 'chunk' else 1}")
        return LanePlan(offs, row0, first)

    # ---------------------------------------------------------------- per tile
    def emit(self, stage: str, k0: str) -> None:
        """Load the tile at k ``k0`` into the stage whose shared address is ``stage``."""
        if isinstance(self.fast, bool):
            self._emit(self.paths[0], stage, k0)
            return
        kb = self.kb
        slow, done = kb.new_label("elem_tile"), kb.new_label("tile_loaded")
        kb.bra(slow, self.fast, negate=True)
        self._emit("chunk", stage, k0)
        kb.emit(f"bra.uni {done}")
        kb.label(slow)
        self._emit("element", stage, k0)
        kb.label(done)

    def _emit(self, path: str, stage: str, k0: str) -> None:
        kb, lane = self.kb, self.lanes[path]
        period, rpj = len(lane.offsets), self._rows_per_j(path)
        # the lane column is fixed for the whole tile: mn when k_major, else k
        col_row = self._row(lane.first) if self.k_major else None
        col_k = None if self.k_major else self._k(k0, lane.first)
        for j in range(self.count(path)):
            trow = kb.reg("b32")  # the tile row of this chunk / element
            kb.emit(f"add.u32 {trow}, {lane.row0}, {j * rpj}")
            if col_row is not None:   # tile rows are k; mn is the contiguous axis
                (row, along), (kinfo, _) = col_row, self._k(k0, trow)
            else:                     # tile rows are mn; k is the contiguous axis
                assert col_k is not None
                (row, _), (kinfo, along) = self._row(trow), col_k
            ok, addr = self.ld.element(row, kinfo)
            saddr = kb.reg("b32")
            kb.emit(f"add.u32 {saddr}, {stage}, {lane.offsets[j % period]}")
            imm = (j // period) * period * rpj * self.tile.pitch
            dst = f"[{saddr}+{imm}]" if imm else f"[{saddr}]"
            if path == "chunk":
                self._chunk(dst, addr, ok, along)
            else:
                h = kb.reg(LD_REG[self.elem])
                kb.emit(f"mov.b{32 if self.elem == 4 else 16} {h}, 0")
                kb.emit(f"@{ok} ld.global.{LD_TYPE[self.elem]} {h}, [{addr}]")
                kb.emit(f"st.shared.{LD_TYPE[self.elem]} {dst}, {h}")

    def _row(self, rel: str) -> tuple[RowInfo, str]:
        g = self.kb.reg("b32")
        self.kb.emit(f"add.u32 {g}, {self.mn0}, {rel}")
        return self.ld.row(g), g

    def _k(self, k0: str, rel: str) -> tuple[KInfo, str]:
        g = self.kb.reg("b32")
        self.kb.emit(f"add.u32 {g}, {k0}, {rel}")
        return self.ld.kidx(g), g

    def _chunk(self, dst: str, src: str, ok: str, along: str) -> None:
        """``cp.async`` of the chunk starting at ``along`` on the contiguous axis: 16 bytes
        where the matrix has them all, fewer at its end, 0 outside (zero fill)."""
        kb, vec = self.kb, 16 // self.elem
        ext = self.ld.op.rows if self.k_major else self.ld.op.depth
        n = kb.reg("b32")
        if isinstance(ext, int) and ext % vec == 0:
            kb.emit(f"selp.u32 {n}, 16, 0, {ok}")
        else:
            kb.emit(f"sub.u32 {n}, {self.ld.rows if self.k_major else self.ld.depth}, {along}")
            kb.emit(f"min.u32 {n}, {n}, {vec}")
            if self.elem > 1:
                kb.emit(f"shl.b32 {n}, {n}, {self.elem.bit_length() - 1}")
            kb.emit(f"selp.u32 {n}, {n}, 0, {ok}")
        kb.emit(f"cp.async.cg.shared.global {dst}, [{src}], 16, {n}")


def tile_loader(kb: KernelBuilder, params: KernelParams, op: GemmOperand, batch: list[str],
                batch_extents: tuple[Sym, ...], tile: SmemTile, elem: int, k_major: bool,
                mn0: str, tid: str, threads: int) -> TileLoad:
    """The loader of one operand, prepared (path predicate, lane offsets) before the k loop."""
    ld = OperandLoader(kb, params, op, batch, batch_extents)
    t = TileLoad(kb, params, ld, tile, elem, k_major, mn0, tid, threads)
    t.prepare(fast_conditions(op, k_major, elem))
    return t
