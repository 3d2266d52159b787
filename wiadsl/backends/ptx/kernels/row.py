"""Row kernels: one block per row, reduction stages, then per-row or per-element outputs.

This is the shape of every reduction (all axes = one row), of softmax and
layer_norm after fusion (max/sum or mean/var stages, then the normalized row),
and of argmax/argmin.

Invariants:
- The domain's leading ``n_outer`` axes are rows, the rest are one row's columns;
  block b handles rows b, b + gridDim.x, ... (any grid size is correct).
- A stage is reduced per thread over columns tid, tid + blockDim, ... then
  across the warp with ``shfl.sync.bfly`` and across warps through shared
  memory; every thread then reads the row's value from shared memory, and a
  ``bar.sync`` separates that read from the next write of the same slot.
- Row-invariant nodes are computed once per row, before the column loops.
- Inputs read by several phases are cached in shared memory (``row_cache``): the
  kernel reads each row from global memory once when the row fits the cache.
"""

from __future__ import annotations

from ....diagnostics import WiaError
from ....dtypes import DType
from ..builder import KernelBuilder
from ..codegen import ExprCodegen, IndexGroup, KernelParams
from ..expr import LoopSpec, ReduceStage, Stage, walk
from ..isa import float_literal, info
from ..symbolic import call, product
from .common import BLOCK, MAX_GRID, StridedLoop, global_thread, varies
from .elementwise import EmittedKernel
from .reduce_ops import Reducer
from .row_cache import RowCache


def row_kernel(spec: LoopSpec, thread_rows: bool = False) -> EmittedKernel:
    """The row kernel of ``spec``; ``thread_rows``: one thread per row (short rows,
    e.g. pooling windows and small convolutions), no shuffles or shared memory."""
    kb = KernelBuilder(spec.name, max_threads=BLOCK)
    params = KernelParams(kb)
    cg = ExprCodegen(kb, params, spec.inputs, spec.scalars, spec.domain)
    cg.outputs_args = [t for _, t in spec.outputs]
    for _, t in spec.outputs:
        params.buffer(t.buffer)
    outer_axes = tuple(range(spec.n_outer))
    inner_axes = tuple(range(spec.n_outer, len(spec.domain)))
    rows_sym = product(list(spec.domain[:spec.n_outer]))
    cols_sym = product(list(spec.domain[spec.n_outer:]))
    rows, cols = params.sym(rows_sym), params.sym(cols_sym)
    if thread_rows:
        cta, ncta = global_thread(kb)
        tid, ntid = "0", "1"
    else:
        tid, ntid = kb.special("%tid.x"), kb.special("%ntid.x")
        cta, ncta = kb.special("%ctaid.x"), kb.special("%nctaid.x")
    red = Reducer(kb, cg.ops, thread_only=thread_rows)
    cache = None if thread_rows else RowCache(cg, spec, inner_axes, cols)
    roots = [s.expr for s in spec.stages] + [n for n, _ in spec.outputs]
    all_axes = set(range(len(spec.domain)))
    for node in walk(roots):  # kernel-invariant values: once per thread
        if not varies(node, all_axes, spec.inputs, None, True):
            cg.value(node)
    kernel_memo = dict(cg.memo)
    inner_set = set(inner_axes)
    vcache: dict[int, bool] = {}

    def row_body(row: str) -> None:
        cg.memo = dict(kernel_memo)
        cg.stage_regs = []
        cg.set_group(0, IndexGroup(outer_axes, spec.domain[:spec.n_outer], row))
        cg.set_group(1, IndexGroup(inner_axes, spec.domain[spec.n_outer:], tid))
        for a in list(range(len(spec.inputs))) + [-k - 1 for k in range(len(spec.outputs))]:
            cg.partial(a, 0)
        for k, stage in enumerate(spec.stages):
            _hoist(cg, stage.expr, inner_set, spec, vcache)
            row_memo = dict(cg.memo)
            cg.stage_regs.append(_reduce_stage(cg, red, stage, k, tid, ntid, cols, row_memo,
                                               inner_axes, spec, cache))
            cg.memo = row_memo
        for k, (node, t) in enumerate(spec.outputs):
            if all(t.strides[a] == 0 for a in inner_axes) and thread_rows:
                cg.store(cg.address(-k - 1), cg.value(node), t.dtype)
            elif all(t.strides[a] == 0 for a in inner_axes):
                _store_once(cg, k, node, t, tid)
            else:
                _hoist(cg, node, inner_set, spec, vcache)
        row_memo = dict(cg.memo)
        full = [(k, n, t) for k, (n, t) in enumerate(spec.outputs)
                if any(t.strides[a] != 0 for a in inner_axes)]
        if full:
            def col_body(c: str) -> None:
                cg.memo = dict(row_memo)
                cg.set_group(1, IndexGroup(inner_axes, spec.domain[spec.n_outer:], c))
                if cache is not None and cache.active:
                    cache.bind(len(spec.stages), c)
                for k, node, t in full:
                    cg.store(cg.address(-k - 1), cg.value(node), t.dtype)
                cg.load_override = None
            StridedLoop(kb, "out").run(tid, cols, ntid, col_body)
        if not thread_rows:
            kb.emit("bar.sync 0")

    StridedLoop(kb, "row").run(cta, rows, ncta, row_body)
    if thread_rows:
        grid = call("min", call("cdiv", rows_sym, BLOCK), MAX_GRID)
        return EmittedKernel(kb, params.args, (grid, 1, 1), (BLOCK, 1, 1), "row(thread)")
    grid = call("min", rows_sym, MAX_GRID)
    kind = "row(1-pass)" if cache is not None and cache.active else "row"
    return EmittedKernel(kb, params.args, (grid, 1, 1), (BLOCK, 1, 1), kind)


def _hoist(cg: ExprCodegen, root, inner: set[int], spec: LoopSpec, cache: dict) -> None:
    for node in walk([root]):
        if not isinstance(node, Stage) and not varies(node, inner, spec.inputs, cache):
            cg.value(node)


def _reduce_stage(cg: ExprCodegen, red: Reducer, stage: ReduceStage, k: int, tid: str,
                  ntid: str, cols: str, row_memo: dict, inner_axes: tuple[int, ...],
                  spec: LoopSpec, cache: RowCache | None) -> str:
    kb = cg.kb
    acc_t = accumulator_dtype(stage)
    acc, idx = red.identity(stage.kind, acc_t)

    def col_body(c: str) -> None:
        cg.memo = dict(row_memo)
        cg.set_group(1, IndexGroup(inner_axes, spec.domain[spec.n_outer:], c))
        if cache is not None and cache.active:
            cache.bind(k, c)
        v = cg.ops.cast(cg.value(stage.expr), stage.expr.dtype, acc_t)
        cg.load_override = None
        red.accumulate(stage.kind, acc_t, acc, idx, v, c)

    StridedLoop(kb, f"red{k}").run(tid, cols, ntid, col_body)
    total, tidx = red.block_reduce(stage.kind, acc_t, acc, idx, tid)
    if stage.kind in ("argmax", "argmin"):
        out = kb.reg("b64")
        kb.emit(f"cvt.s64.s32 {out}, {tidx}")
        return cg.ops.cast(out, DType.I64, stage.dtype)
    if stage.kind == "mean":
        n = kb.reg(info(acc_t).reg)
        kb.emit(f"cvt.rn.{info(acc_t).itype}.u32 {n}, {cols}")
        q = kb.reg(info(acc_t).reg)
        kb.emit(f"div.rn.{info(acc_t).itype} {q}, {total}, {n}")
        total = q
    return cg.ops.cast(total, acc_t, stage.dtype) if acc_t is not stage.dtype else total


def accumulator_dtype(stage: ReduceStage) -> DType:
    """f32 for 16-bit floats, s32 for i8 and bool, else the value's own dtype."""
    d = stage.expr.dtype
    if stage.kind in ("argmax", "argmin"):
        return DType.F32 if d in (DType.F16, DType.BF16) else (
            DType.I32 if d in (DType.I8, DType.BOOL) else d)
    if d in (DType.F16, DType.BF16):
        return DType.F32
    if d in (DType.I8, DType.BOOL):
        return DType.I32
    return d


def _store_once(cg: ExprCodegen, k: int, node, t, tid: str) -> None:
    kb = cg.kb
    p = kb.reg("pred")
    skip = kb.new_label("skip")
    value = cg.value(node)
    kb.emit(f"setp.ne.u32 {p}, {tid}, 0")
    kb.bra(skip, p)
    cg.store(cg.address(-k - 1), value, t.dtype)
    kb.label(skip)


__all__ = ["row_kernel", "accumulator_dtype", "float_literal", "WiaError"]
