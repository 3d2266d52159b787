"""Tiled transposes: elementwise kernels whose inputs are transposed views of their outputs.

A grid-stride elementwise loop walks the output in memory order; an input that is a
transposed view (``y = transpose(x)``, or a transposed copy made dense for a reshape)
is then read with a stride of a whole row between neighbouring threads. Here the
domain is cut into 32 x 32 tiles over two axes: Q, the last axis (contiguous in the
outputs), and P, an axis along which the transposed inputs are contiguous. A block
(32 x 8 threads, 4 elements each) first copies each transposed input's tile into
shared memory reading along P (consecutive lanes, consecutive addresses), then
computes the outputs walking along Q (consecutive lanes, consecutive addresses),
taking the transposed inputs from the tile and every other input from global memory.
Remaining axes are batch axes: one tile per (batch index, P tile, Q tile).

Invariants:
- Applies (``transpose_plan``) when every output has stride 1 along the last axis, and
  some unguarded input varies along it with a stride other than 1 while having stride 1
  along another axis P; the inputs with that layout are staged.
- Tiles are [Q][P] in shared memory with rows padded to 33 words (element path):
  the writes (a warp along P) and the reads (a warp along Q) hit 32 different banks.
- 16-bit data moves in pairs (``pairs``): when every staged input and every output is
  16-bit, P and Q extents, the other strides and the offsets are static and even, and
  the target has the packed instructions (sm_80+), a tile is 64 x 64 halves, each thread
  loads b32 words (two P neighbours), the block stores two Q neighbours as one b32
  (``prmt`` picks the halves), and the expression runs on packed pairs
  (``packed.PairEval``). The word tile is [Q][P/2] swizzled by ``word ^ (q >> 1)``,
  conflict-free both ways.
- Per tile: stage, ``bar.sync``, compute and store, ``bar.sync`` (the next tile
  overwrites the slots). Edge tiles are predicated per element (per pair).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..builder import KernelBuilder
from ..codegen import ExprCodegen, IndexGroup, KernelParams
from ..expr import Iota, Load, LoopSpec, walk
from ..isa import info
from ..symbolic import Sym, call, product
from .common import (
    BLOCK,
    MAX_GRID,
    StridedLoop,
    ld_shared_slot,
    slot_bytes,
    st_shared_slot,
    varies,
)
from .elementwise import EmittedKernel
from .packed import PairEval, PairValue, hoist_packed, packed_arch

TILE = 32
ROWS = BLOCK // TILE  # thread rows of a block: each thread takes TILE // ROWS elements
PITCH = TILE + 1  # words per tile row: the padding word spreads a column over all banks


@dataclass(frozen=True)
class TransposePlan:
    """The tile axes (``p``: contiguous in the staged inputs, ``q``: the last axis), the
    staged inputs and whether 16-bit data moves in pairs."""

    p: int
    q: int
    staged: tuple[int, ...]
    pairs: bool


def transpose_plan(spec: LoopSpec, arch: str) -> TransposePlan | None:
    rank = len(spec.domain)
    if rank < 2 or spec.stages or not spec.outputs:
        return None
    q = rank - 1
    if any(t.strides[q] != 1 for _, t in spec.outputs):
        return None
    read = sorted({n.arg for n in walk([nd for nd, _ in spec.outputs]) if isinstance(n, Load)})
    p = None
    for a in read:
        t = spec.inputs[a]
        if t.guards or t.strides[q] in (0, 1):
            continue
        p = next((ax for ax in range(q) if t.strides[ax] == 1), None)
        if p is not None:
            break
    if p is None:
        return None
    staged = tuple(a for a in read if not spec.inputs[a].guards and spec.inputs[a].strides[p] == 1
                   and spec.inputs[a].strides[q] not in (0, 1))
    return TransposePlan(p, q, staged, _pairs(spec, p, q, staged, arch))


def _pairs(spec: LoopSpec, p: int, q: int, staged: tuple[int, ...], arch: str) -> bool:
    """16-bit pairs: every staged input and output 16-bit, every b32 access aligned."""
    if not packed_arch(arch) or any(isinstance(n, Iota) for n in walk([nd for nd, _ in spec.outputs])):
        return False  # (an iota is a per-lane coordinate)
    views = [spec.inputs[a] for a in staged] + [t for _, t in spec.outputs]
    if any(info(t.dtype).size != 2 for t in views):
        return False
    if not all(isinstance(spec.domain[ax], int) and spec.domain[ax] % 2 == 0 for ax in (p, q)):
        return False
    # a pair starts at an even coordinate of its contiguous axis: aligned when every
    # other stride and the offset are even (buffers are 256-byte aligned)
    for t, axis in [(spec.inputs[a], p) for a in staged] + [(t, q) for _, t in spec.outputs]:
        others = [s for ax, s in enumerate(t.strides) if ax != axis] + [t.offset]
        if not all(isinstance(s, int) and s % 2 == 0 for s in others):
            return False
    return True


class _TileKernel:
    """One ``TransposePlan`` as PTX (element or pair path)."""

    def __init__(self, spec: LoopSpec, plan: TransposePlan):
        self.spec, self.plan = spec, plan
        self.kb = kb = KernelBuilder(spec.name, max_threads=BLOCK)
        self.params = params = KernelParams(kb)
        self.cg = cg = ExprCodegen(kb, params, spec.inputs, spec.scalars, spec.domain)
        cg.outputs_args = [t for _, t in spec.outputs]
        for _, t in spec.outputs:
            params.buffer(t.buffer)
        self.batch = tuple(ax for ax in range(len(spec.domain)) if ax not in (plan.p, plan.q))
        #: elements of P and Q one tile covers (64 halves in pairs)
        self.span = 2 * TILE if plan.pairs else TILE
        self.dp, self.dq = params.sym(spec.domain[plan.p]), params.sym(spec.domain[plan.q])

    def emit(self) -> EmittedKernel:
        kb, cg, spec = self.kb, self.cg, self.spec
        tid = kb.special("%tid.x")
        tx, ty = kb.reg("b32"), kb.reg("b32")
        kb.prologue += [f"and.b32 {tx}, {tid}, {TILE - 1};", f"shr.u32 {ty}, {tid}, 5;"]
        axes = set(range(len(spec.domain)))
        for node in walk([n for n, _ in spec.outputs]):  # kernel invariants: once
            if not varies(node, axes, spec.inputs):
                cg.value(node)
        base = dict(cg.memo)
        pairs = None
        if self.plan.pairs:
            pairs = PairEval(cg, base, hoist_packed(cg, base, walk([n for n, _ in spec.outputs])),
                             kb.options.arch)
        words = TILE * (TILE if self.plan.pairs else PITCH) * (2 if self.plan.pairs else 1)
        tiles = {a: self._tile_array(a, words) for a in self.plan.staged}
        tp_n, tq_n = (call("cdiv", spec.domain[ax], self.span) for ax in (self.plan.p, self.plan.q))
        n_tiles = product([tp_n, tq_n, *[spec.domain[ax] for ax in self.batch]])
        cta, ncta = kb.special("%ctaid.x"), kb.special("%nctaid.x")
        StridedLoop(kb, "tile").run(
            cta, self.params.sym(n_tiles), ncta,
            lambda t: self._tile(t, tp_n, tq_n, tx, ty, base, tiles, pairs))
        grid = (call("min", n_tiles, MAX_GRID), 1, 1)
        kind = "transpose(tile,pairs)" if self.plan.pairs else "transpose(tile)"
        return EmittedKernel(kb, self.params.args, grid, (BLOCK, 1, 1), kind)

    def _tile_array(self, a: int, words: int) -> str:
        size = 4 if self.plan.pairs else slot_bytes(self.spec.inputs[a].dtype)
        return self.kb.shared_array(f"tile{a}", f"b{8 * size}", words, size)

    # ------------------------------------------------------------ one tile
    def _tile(self, t: str, tp_n: Sym, tq_n: Sym, tx: str, ty: str, base: dict[int, str],
              tiles: dict[int, str], pairs: PairEval | None) -> None:
        kb, cg, spec = self.kb, self.cg, self.spec
        tq, rest, tp, b = kb.regs("b32", 4)
        nq, np_ = self.params.sym(tq_n), self.params.sym(tp_n)
        kb.emit(f"rem.u32 {tq}, {t}, {nq}")
        kb.emit(f"div.u32 {rest}, {t}, {nq}")
        kb.emit(f"rem.u32 {tp}, {rest}, {np_}")
        kb.emit(f"div.u32 {b}, {rest}, {np_}")
        p0, q0 = kb.reg("b32"), kb.reg("b32")
        kb.emit(f"mul.lo.u32 {p0}, {tp}, {self.span}")
        kb.emit(f"mul.lo.u32 {q0}, {tq}, {self.span}")
        cg.memo = dict(base)
        cg.set_group(0, IndexGroup(self.batch, tuple(spec.domain[ax] for ax in self.batch), b))
        for ax in self.batch:  # outside every branch below: they reuse these registers
            cg.coord(ax)
        for a in [*range(len(spec.inputs)), *(-k - 1 for k in range(len(spec.outputs)))]:
            cg.partial(a, 0)
        tile_memo = dict(cg.memo)
        if pairs is None:
            self._stage(tiles, p0, q0, tx, ty, tile_memo)
            kb.emit("bar.sync 0")
            self._compute(tiles, p0, q0, tx, ty, tile_memo)
        else:
            self._stage_pairs(tiles, p0, q0, tx, ty, tile_memo)
            kb.emit("bar.sync 0")
            self._compute_pairs(tiles, p0, q0, tx, ty, tile_memo, pairs)
        kb.emit("bar.sync 0")  # the next tile rewrites the slots

    def _at(self, p: str, q: str, memo: dict[int, str]) -> None:
        """Bind the current element's P and Q coordinates."""
        spec, cg = self.spec, self.cg
        cg.memo = dict(memo)
        cg.set_group(1, IndexGroup((self.plan.p,), (spec.domain[self.plan.p],), p))
        cg.set_group(2, IndexGroup((self.plan.q,), (spec.domain[self.plan.q],), q))

    def _coord(self, origin: str, a: str, scale: int = 1, add: int = 0) -> str:
        """``origin + a * scale + add`` as a new b32 register."""
        kb, out = self.kb, self.kb.reg("b32")
        if scale == 1:
            kb.emit(f"add.u32 {out}, {origin}, {a}")
        else:
            kb.emit(f"mad.lo.u32 {out}, {a}, {scale}, {origin}")
        if add:
            kb.emit(f"add.u32 {out}, {out}, {add}")
        return out

    def _plus(self, reg: str, k: int) -> str:
        if not k:
            return reg
        out = self.kb.reg("b32")
        self.kb.emit(f"add.u32 {out}, {reg}, {k}")
        return out

    def _inside(self, p: str, q: str) -> str:
        """Predicate: (p, q) lies in the domain."""
        kb, ok, qok = self.kb, self.kb.reg("pred"), self.kb.reg("pred")
        kb.emit(f"setp.lt.u32 {ok}, {p}, {self.dp}")
        kb.emit(f"setp.lt.u32 {qok}, {q}, {self.dq}")
        kb.emit(f"and.pred {ok}, {ok}, {qok}")
        return ok

    # ------------------------------------------------------------ element path
    def _stage(self, tiles: dict[int, str], p0: str, q0: str, tx: str, ty: str,
               memo: dict[int, str]) -> None:
        """Lanes along P: tile[q][p] = input(p, q) for rows ty, ty + 8, ..."""
        kb, cg, spec = self.kb, self.cg, self.spec
        for j in range(TILE // ROWS):
            p, q = self._coord(p0, tx), self._coord(q0, ty, add=j * ROWS)
            ok = self._inside(p, q)
            slot = self._slot(ty, j * ROWS, tx)
            skip = kb.new_label("stage")
            kb.bra(skip, ok, negate=True)
            self._at(p, q, memo)
            for a, arr in tiles.items():
                v = cg.load(cg.address(a), spec.inputs[a].dtype)
                st_shared_slot(kb, arr, slot, v, spec.inputs[a].dtype)
            kb.label(skip)

    def _compute(self, tiles: dict[int, str], p0: str, q0: str, tx: str, ty: str,
                 memo: dict[int, str]) -> None:
        """Lanes along Q: outputs at (p, q), staged inputs from tile[q][p]."""
        kb, cg, spec = self.kb, self.cg, self.spec
        for j in range(TILE // ROWS):
            p, q = self._coord(p0, ty, add=j * ROWS), self._coord(q0, tx)
            ok = self._inside(p, q)
            slot = self._slot(tx, 0, ty, j * ROWS)
            skip = kb.new_label("tile_out")
            kb.bra(skip, ok, negate=True)
            self._at(p, q, memo)
            cg.load_override = {a: ld_shared_slot(kb, arr, slot, spec.inputs[a].dtype)
                                for a, arr in tiles.items()}
            values = [cg.value(node) for node, _ in spec.outputs]
            cg.load_override = None
            for k, ((_, t), v) in enumerate(zip(spec.outputs, values, strict=True)):
                cg.store(cg.address(-k - 1), v, t.dtype)
            kb.label(skip)

    def _slot(self, row: str, row_add: int, col: str, col_add: int = 0) -> str:
        """``(row + row_add) * PITCH + col + col_add`` (a word index)."""
        kb, out = self.kb, self.kb.reg("b32")
        kb.emit(f"mad.lo.u32 {out}, {row}, {PITCH}, {col}")
        if row_add * PITCH + col_add:
            kb.emit(f"add.u32 {out}, {out}, {row_add * PITCH + col_add}")
        return out

    # ------------------------------------------------------------ pair path
    def _word_addr(self, arr: str, q: str, w: str) -> str:
        """Byte address of word ``w`` (a pair of P neighbours) of tile row ``q``:
        ``(q * 32 + (w ^ (q >> 1) & 31)) * 4``."""
        kb = self.kb
        sw, col, addr = kb.reg("b32"), kb.reg("b32"), kb.reg("b32")
        kb.emit(f"shr.u32 {sw}, {q}, 1")
        kb.emit(f"and.b32 {sw}, {sw}, {TILE - 1}")
        kb.emit(f"xor.b32 {col}, {w}, {sw}")
        kb.emit(f"mad.lo.u32 {col}, {q}, {TILE}, {col}")
        kb.emit(f"mov.u32 {addr}, {arr}")
        kb.emit(f"mad.lo.u32 {addr}, {col}, 4, {addr}")
        return addr

    def _stage_pairs(self, tiles: dict[int, str], p0: str, q0: str, tx: str, ty: str,
                     memo: dict[int, str]) -> None:
        """Lanes along P by words: tile word (q, tx) = input(p0 + 2 tx, +1; q)."""
        kb, cg = self.kb, self.cg
        for j in range(2 * TILE // ROWS):
            ql = self._plus(ty, j * ROWS)
            p, q = self._coord(p0, tx, scale=2), self._coord(q0, ql)
            ok = self._inside(p, q)
            skip = kb.new_label("stage")
            kb.bra(skip, ok, negate=True)
            self._at(p, q, memo)
            for a, arr in tiles.items():
                w = kb.reg("b32")
                kb.emit(f"ld.global.b32 {w}, [{cg.address(a)}]")
                kb.emit(f"st.shared.b32 [{self._word_addr(arr, ql, tx)}], {w}")
            kb.label(skip)

    def _compute_pairs(self, tiles: dict[int, str], p0: str, q0: str, tx: str, ty: str,
                       memo: dict[int, str], pairs: PairEval) -> None:
        """Lanes along Q by pairs: outputs at (p, q0 + 2 tx, +1) as b32 words; a staged
        input's pair is the (p & 1) halves of tile words (2 tx, p / 2) and (2 tx + 1, p / 2)."""
        kb, cg, spec = self.kb, self.cg, self.spec
        q_lo, q_hi = kb.reg("b32"), kb.reg("b32")
        kb.emit(f"shl.b32 {q_lo}, {tx}, 1")
        kb.emit(f"add.u32 {q_hi}, {q_lo}, 1")
        q = self._coord(q0, q_lo)
        for j in range(2 * TILE // ROWS):
            pl = self._plus(ty, j * ROWS)
            p = self._coord(p0, pl)
            ok = self._inside(p, q)
            w, sel = kb.reg("b32"), kb.reg("b32")
            kb.emit(f"shr.u32 {w}, {pl}, 1")
            # prmt selector: bytes 0-1 of the first word and 4-5 of the second (even p),
            # or bytes 2-3 and 6-7 (odd p)
            odd = kb.reg("b32")
            kb.emit(f"and.b32 {odd}, {pl}, 1")
            kb.emit(f"mad.lo.u32 {sel}, {odd}, {0x2222}, {0x5410}")
            skip = kb.new_label("tile_out")
            kb.bra(skip, ok, negate=True)
            self._at(p, q, memo)
            loads = {}
            for a, arr in tiles.items():
                lo, hi, pair = kb.reg("b32"), kb.reg("b32"), kb.reg("b32")
                kb.emit(f"ld.shared.b32 {lo}, [{self._word_addr(arr, q_lo, w)}]")
                kb.emit(f"ld.shared.b32 {hi}, [{self._word_addr(arr, q_hi, w)}]")
                kb.emit(f"prmt.b32 {pair}, {lo}, {hi}, {sel}")
                loads[a] = PairValue(spec.inputs[a].dtype, packed=pair)
            for a in self._direct_inputs():  # read along Q as the outputs are written
                loads[a] = self._direct_pair(a, q)
            pairs.start(loads)
            values = [pairs.packed(node) for node, _ in spec.outputs]  # all 16-bit here
            for k, v in enumerate(values):
                kb.emit(f"st.global.b32 [{cg.address(-k - 1)}], {v}")
            kb.label(skip)

    def _direct_inputs(self) -> list[int]:
        spec = self.spec
        read = {n.arg for n in walk([nd for nd, _ in spec.outputs]) if isinstance(n, Load)}
        return [a for a in sorted(read) if a not in self.plan.staged
                and varies_any(spec, a)]

    def _direct_pair(self, a: int, q: str) -> PairValue:
        """An unstaged varying input at (p, q) and (p, q + 1): a word when it is 16-bit
        and contiguous along Q with even strides, else one load per lane."""
        kb, cg, spec = self.kb, self.cg, self.spec
        t = spec.inputs[a]
        if info(t.dtype).size == 2 and t.strides[self.plan.q] == 1 and all(
                isinstance(s, int) and s % 2 == 0
                for s in [*(s for ax, s in enumerate(t.strides) if ax != self.plan.q), t.offset]):
            w = kb.reg("b32")
            kb.emit(f"ld.global.b32 {w}, [{cg.address(a)}]")
            return PairValue(t.dtype, packed=w)
        first = cg.load(cg.address(a), t.dtype)
        q1 = kb.reg("b32")
        kb.emit(f"add.u32 {q1}, {q}, 1")
        axis = ((self.plan.q,), (spec.domain[self.plan.q],))
        cg.set_group(2, IndexGroup(*axis, q1))
        second = cg.load(cg.address(a), t.dtype)
        cg.set_group(2, IndexGroup(*axis, q))  # back at the pair's first element
        return PairValue(t.dtype, lanes=(first, second))


def varies_any(spec: LoopSpec, a: int) -> bool:
    return any(s != 0 for s in spec.inputs[a].strides)


def transpose_kernel(spec: LoopSpec, plan: TransposePlan) -> EmittedKernel:
    return _TileKernel(spec, plan).emit()


__all__ = ["TransposePlan", "transpose_plan", "transpose_kernel"]
