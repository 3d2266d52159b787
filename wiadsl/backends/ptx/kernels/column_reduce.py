"""Column reductions: reductions over leading axes (``reduce_sum(x, axis=0)``) read coalesced.

The row kernel gives each kept index ("row" of the permuted domain) a block whose
threads stride over the reduced elements; when the reduced axis is the outer one in
memory (axis 0 of a row-major [R, C], axis 1 of [B, R, C]) every thread of a warp
then reads a different memory row. Here lane ``l`` of every warp owns output column
``32 t + l`` of tile ``t`` (consecutive kept indices: consecutive addresses), and the
block's 8 warps split the reduced rows: warp ``w`` accumulates rows ``w, w + 8, ...``
of its block's row range, so each warp load is 32 consecutive elements.

Combine (deterministic; no atomics): the warps' partials go through shared memory
(``[stage][warp][lane]``) and warp 0 folds them in warp order. When a static count
of column tiles cannot fill the GPU (or the sizes are symbolic), the rows are also
split over ``S`` blocks (``grid.y``): pass 1 (``reduce(cols,split)``) writes each
split's partial to ``partial[s][o]`` (an index buffer beside it for argmax/argmin),
pass 2 (``reduce(cols,final)``) folds the S partials in split order, the same way.
Either way the result depends only on the sizes, never on timing.

Invariants:
- Applies (``column_reduce_applies``) to a spec with kept axes whose stages read no
  other stage and whose outputs are one value per kept index (strides 0 on the reduced
  axes), when some input the stages read has stride 1 along the last kept axis and
  not along the last reduced axis (what the row kernel would read strided).
- Accumulators are ``row.accumulator_dtype`` (f32 for f16/bf16, as the row kernel);
  means divide the folded sum by the reduced element count once, at the end.
- Kept and reduced counts are 32-bit (u32 parameters), as in the row kernel; element
  offsets follow ``ExprCodegen.wide``, partial offsets are 64-bit.
- Every tile iteration: partials stored, ``bar.sync``, warp 0 reads and folds,
  ``bar.sync`` before the next tile reuses the slots.
"""

from __future__ import annotations

from dataclasses import dataclass

from ....dtypes import DType
from ..builder import KernelBuilder
from ..codegen import ExprCodegen, IndexGroup, KernelParams
from ..expr import Load, LoopSpec, Stage, walk
from ..isa import SM_COUNT, info
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
from .grid_reduce import ARG_KINDS, finish_stage
from .reduce_ops import Reducer
from .row import accumulator_dtype

LANES = 32
WARPS = BLOCK // LANES
#: blocks that keep every SM of an H100/H200 (132) or A100 (108) busy twice over
TARGET_BLOCKS = 2 * max(SM_COUNT.values())
#: rows one split should at least hold (32 per warp), and the most splits
ROWS_PER_SPLIT = LANES * WARPS
MAX_SPLITS = 64


def column_reduce_applies(spec: LoopSpec) -> bool:
    if spec.n_outer == 0 or not spec.stages or spec.n_outer == len(spec.domain):
        return False
    if any(isinstance(n, Stage) for s in spec.stages for n in walk([s.expr])):
        return False
    inner = range(spec.n_outer, len(spec.domain))
    if any(any(t.strides[a] != 0 for a in inner) for _, t in spec.outputs):
        return False
    read = {n.arg for s in spec.stages for n in walk([s.expr]) if isinstance(n, Load)}
    last_kept, last_reduced = spec.n_outer - 1, len(spec.domain) - 1
    return any(spec.inputs[a].strides[last_kept] == 1 and spec.inputs[a].strides[last_reduced] != 1
               for a in read)


def column_splits(spec: LoopSpec) -> Sym:
    """S: row splits over blocks, so that tiles x splits reach TARGET_BLOCKS (1 when the
    column tiles alone do, or the rows are few)."""
    # at least one tile: an empty output (no kept columns) has no blocks to fill
    tiles = call("max", 1, call("cdiv", product(list(spec.domain[:spec.n_outer])), LANES))
    rows = product(list(spec.domain[spec.n_outer:]))
    return call("max", 1, call("min", MAX_SPLITS, call("cdiv", TARGET_BLOCKS, tiles),
                               call("cdiv", rows, ROWS_PER_SPLIT)))


def partial_shape(spec: LoopSpec) -> tuple[Sym, Sym]:
    return column_splits(spec), product(list(spec.domain[:spec.n_outer]))


@dataclass
class _Acc:
    dtype: DType
    value: str
    index: str | None


class _ColumnKernel:
    """One pass over tiles of 32 kept indices; see the module docstring.

    ``mode``: ``one`` (whole rows, outputs stored), ``split`` (a row range per
    ``%ctaid.y``, partials stored) or ``final`` (rows are the S partials, outputs
    stored). ``parts[k]``: stage k's (value, index or None) partial buffers."""

    def __init__(self, spec: LoopSpec, name: str, mode: str, parts: list[tuple[str, str | None]]):
        self.spec, self.mode, self.parts = spec, mode, parts
        self.kb = kb = KernelBuilder(name, max_threads=BLOCK)
        self.params = params = KernelParams(kb)
        self.cg = cg = ExprCodegen(kb, params, spec.inputs, spec.scalars, spec.domain)
        if mode != "split":
            cg.outputs_args = [t for _, t in spec.outputs]
            for _, t in spec.outputs:
                params.buffer(t.buffer)
        self.outer = tuple(range(spec.n_outer))
        self.inner = tuple(range(spec.n_outer, len(spec.domain)))
        self.kept_sym = product(list(spec.domain[:spec.n_outer]))
        self.rows_sym = product(list(spec.domain[spec.n_outer:]))
        self.kept = params.sym(self.kept_sym)
        self.red = Reducer(kb, cg.ops)
        self.acc_types = [accumulator_dtype(s) for s in spec.stages]

    # ------------------------------------------------------------ driver
    def emit(self) -> EmittedKernel:
        kb, cg, spec = self.kb, self.cg, self.spec
        tid = kb.special("%tid.x")
        lane, warp = kb.reg("b32"), kb.reg("b32")
        kb.prologue += [f"and.b32 {lane}, {tid}, {LANES - 1};", f"shr.u32 {warp}, {tid}, 5;"]
        lo, hi = self._row_range()
        roots = [n for n, _ in spec.outputs]
        if self.mode != "final":
            roots += [s.expr for s in spec.stages]
        for node in walk(roots):  # kernel-invariant values: once per thread
            if not varies(node, set(range(len(spec.domain))), spec.inputs, None, True):
                cg.value(node)
        base = dict(cg.memo)
        smem = [self._shared(k, t) for k, t in enumerate(self.acc_types)]
        tiles = self.params.sym(call("cdiv", self.kept_sym, LANES))
        cta, ncta = kb.special("%ctaid.x"), kb.special("%nctaid.x")
        StridedLoop(kb, "tile").run(
            cta, tiles, ncta, lambda t: self._tile(t, lane, warp, tid, lo, hi, base, smem))
        grid_x = call("min", call("cdiv", self.kept_sym, LANES), MAX_GRID)
        grid_y = column_splits(spec) if self.mode == "split" else 1
        kind = {"one": "reduce(cols)", "split": "reduce(cols,split)", "final": "reduce(cols,final)"}
        return EmittedKernel(kb, self.params.args, (grid_x, grid_y, 1), (BLOCK, 1, 1),
                             kind[self.mode])

    def _row_range(self) -> tuple[str, str]:
        """[lo, hi): the rows this block reduces (its split's, or all of them)."""
        kb, params = self.kb, self.params
        if self.mode == "final":
            return "0", params.sym(column_splits(self.spec))
        rows = params.sym(self.rows_sym)
        if self.mode == "one":
            return "0", rows
        chunk = params.sym(call("cdiv", self.rows_sym, column_splits(self.spec)))
        s = kb.special("%ctaid.y")
        lo, hi = kb.reg("b32"), kb.reg("b32")
        kb.prologue += [f"mul.lo.u32 {lo}, {s}, {chunk};", f"add.u32 {hi}, {lo}, {chunk};",
                        f"min.u32 {hi}, {hi}, {rows};"]
        return lo, hi

    def _shared(self, k: int, t: DType) -> tuple[str, str | None]:
        vals = self.kb.shared_array(f"col_val{k}", f"b{8 * slot_bytes(t)}", WARPS * LANES, 8)
        idx = None
        if self.spec.stages[k].kind in ARG_KINDS:
            idx = self.kb.shared_array(f"col_idx{k}", "b32", WARPS * LANES, 4)
        return vals, idx

    # ------------------------------------------------------------ one tile
    def _tile(self, t: str, lane: str, warp: str, tid: str, lo: str, hi: str,
              base: dict[int, str], smem: list[tuple[str, str | None]]) -> None:
        kb, cg, spec = self.kb, self.cg, self.spec
        o, valid = kb.reg("b32"), kb.reg("pred")
        kb.emit(f"mad.lo.u32 {o}, {t}, {LANES}, {lane}")
        kb.emit(f"setp.lt.u32 {valid}, {o}, {self.kept}")
        cg.memo = dict(base)
        cg.stage_regs = []
        accs = [_Acc(t_, *self.red.identity(s.kind, t_))
                for s, t_ in zip(spec.stages, self.acc_types, strict=True)]
        skip = kb.new_label("cols_idle")
        kb.bra(skip, valid, negate=True)  # lanes past the last column read nothing
        cg.set_group(0, IndexGroup(self.outer, spec.domain[:spec.n_outer], o))
        cg.set_group(1, IndexGroup(self.inner, spec.domain[spec.n_outer:], "0"))
        if self.mode != "final":  # the column's offsets and values: once per tile
            for a in range(len(spec.inputs)):
                cg.partial(a, 0)
            inner, vcache = set(self.inner), dict[int, bool]()
            for node in walk([s.expr for s in spec.stages]):
                if not varies(node, inner, spec.inputs, vcache):
                    cg.value(node)
        tile_memo = dict(cg.memo)
        start = warp
        if lo != "0":
            start = kb.reg("b32")
            kb.emit(f"add.u32 {start}, {lo}, {warp}")
        StridedLoop(kb, "rows").run(start, hi, str(WARPS),
                                    lambda r: self._accumulate(r, o, accs, tile_memo))
        kb.label(skip)
        self._fold(accs, smem, lane, warp, tid, o, valid)

    def _accumulate(self, r: str, o: str, accs: list[_Acc], tile_memo: dict[int, str]) -> None:
        cg, spec = self.cg, self.spec
        cg.memo = dict(tile_memo)
        if self.mode == "final":
            for s, acc, (vbuf, ibuf) in zip(spec.stages, accs, self.parts, strict=True):
                v = self._partial(vbuf, acc.dtype, r, o)
                i = self._partial(ibuf, DType.I32, r, o) if ibuf is not None else r
                self.red.accumulate(s.kind, acc.dtype, acc.value, acc.index, v, i)
            return
        cg.set_group(1, IndexGroup(self.inner, spec.domain[spec.n_outer:], r))
        for s, acc in zip(spec.stages, accs, strict=True):
            v = cg.ops.cast(cg.value(s.expr), s.expr.dtype, acc.dtype)
            self.red.accumulate(s.kind, acc.dtype, acc.value, acc.index, v, r)

    def _fold(self, accs: list[_Acc], smem: list[tuple[str, str | None]], lane: str, warp: str,
              tid: str, o: str, valid: str) -> None:
        """The 8 warps' partials through shared memory, folded by warp 0 in warp order."""
        kb, spec = self.kb, self.spec
        slot = kb.reg("b32")
        kb.emit(f"mad.lo.u32 {slot}, {warp}, {LANES}, {lane}")
        for acc, (vals, idx) in zip(accs, smem, strict=True):
            st_shared_slot(kb, vals, slot, acc.value, acc.dtype)
            if idx is not None:
                st_shared_slot(kb, idx, slot, acc.index, DType.I32)  # type: ignore[arg-type]
        kb.emit("bar.sync 0")
        done, lead = kb.new_label("cols_done"), kb.reg("pred")
        kb.emit(f"setp.ge.u32 {lead}, {tid}, {LANES}")
        kb.bra(done, lead)
        folded = []
        for s, acc, (vals, idx) in zip(spec.stages, accs, smem, strict=True):
            total = ld_shared_slot(kb, vals, lane, acc.dtype)
            tidx = ld_shared_slot(kb, idx, lane, DType.I32) if idx is not None else None
            for w in range(1, WARPS):
                at = kb.reg("b32")
                kb.emit(f"add.u32 {at}, {lane}, {w * LANES}")
                v = ld_shared_slot(kb, vals, at, acc.dtype)
                i = ld_shared_slot(kb, idx, at, DType.I32) if idx is not None else at
                self.red.accumulate(s.kind, acc.dtype, total, tidx, v, i)
            folded.append(_Acc(acc.dtype, total, tidx))
        kb.bra(done, valid, negate=True)
        if self.mode == "split":
            s_idx = kb.special("%ctaid.y")
            for acc, (vbuf, ibuf) in zip(folded, self.parts, strict=True):
                self._partial(vbuf, acc.dtype, s_idx, o, store=acc.value)
                if ibuf is not None:
                    self._partial(ibuf, DType.I32, s_idx, o, store=acc.index)
        else:
            self._store_outputs(folded)
        kb.label(done)
        kb.emit("bar.sync 0")  # the slots are rewritten by the next tile

    def _store_outputs(self, folded: list[_Acc]) -> None:
        cg, spec = self.cg, self.spec
        count = self.params.sym(self.rows_sym)
        cg.stage_regs = [finish_stage(cg, s, a.dtype, a.value, a.index, count)
                         for s, a in zip(spec.stages, folded, strict=True)]
        values = [cg.value(node) for node, _ in spec.outputs]
        for k, ((_, arg), v) in enumerate(zip(spec.outputs, values, strict=True)):
            cg.store(cg.address(-k - 1), v, arg.dtype)

    # ------------------------------------------------------------ memory
    def _partial(self, buf: str, t: DType, s: str, o: str, store: str | None = None) -> str:
        """``partial[s][o]``: loaded, or ``store`` stored there."""
        kb, d = self.kb, info(t)
        off, addr = kb.reg("b64"), kb.reg("b64")
        kb.emit(f"mul.wide.u32 {off}, {s}, {self.kept}")
        o64 = kb.reg("b64")
        kb.emit(f"cvt.u64.u32 {o64}, {o}")
        kb.emit(f"add.u64 {off}, {off}, {o64}")
        kb.emit(f"shl.b64 {off}, {off}, {d.size.bit_length() - 1}")
        kb.emit(f"add.s64 {addr}, {self.params.buffer(buf)}, {off}")
        if store is not None:
            kb.emit(f"st.global.{d.mem} [{addr}], {store}")
            return store
        r = kb.reg(d.reg)
        kb.emit(f"ld.global.{d.mem} {r}, [{addr}]")
        return r


def column_kernels(spec: LoopSpec, parts: list[tuple[str, str | None]] | None
                   ) -> list[EmittedKernel]:
    """The kernels of a column reduction: one (``parts`` None: S is 1) or split + final."""
    if parts is None:
        return [_ColumnKernel(spec, spec.name, "one", []).emit()]
    return [_ColumnKernel(spec, spec.name + "_split", "split", parts).emit(),
            _ColumnKernel(spec, spec.name + "_final", "final", parts).emit()]


__all__ = ["column_reduce_applies", "column_splits", "column_kernels", "partial_shape"]
