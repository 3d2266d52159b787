"""Full reductions to scalars in two passes: many blocks write partials, one block folds them.

Used for a row kernel with no row axes (``n_outer == 0``: ``reduce_sum(x)``,
``reduce_mean(x)``, ``argmax(x)``...) when the element count is dynamic or above
``GRID_THRESHOLD``; a single block would leave the rest of the GPU idle.

Pass 1 (``reduce(grid)``): G blocks run one grid-stride loop over all elements,
accumulating every stage at once, reduce per block (shuffles + shared memory)
and thread 0 writes ``partial_k[block]`` (plus the element index for
argmax/argmin). Pass 2 (``reduce(final)``): one block folds the G partials per
stage, divides means by the element count, evaluates the outputs (any
epilogue on the reduced values) and thread 0 stores them.

Invariants:
- G = max(1, min(cdiv(n, PER_BLOCK), GRID_MAX)); partial buffers hold GRID_MAX
  entries, and every block of pass 1 writes its slot (the identity when it saw
  no element), so pass 2 reads only initialized slots.
- Applies only when no stage reads another stage's value and every output is a
  scalar (strides 0 on every axis); other specs keep the one-block row kernel.
- Arg-reductions carry global element indices, so ties and NaNs resolve exactly
  as in the one-block kernel (first index wins).
"""

from __future__ import annotations

from ....diagnostics import WiaUsageError
from ....dtypes import DType
from ..builder import KernelBuilder
from ..codegen import ExprCodegen, IndexGroup, KernelParams, is_b32
from ..expr import LoopSpec, Stage, TensorArg, walk
from ..isa import info
from ..symbolic import Sym, call, product
from .common import BLOCK, StridedLoop, global_thread, varies
from .elementwise import EmittedKernel
from .reduce_ops import Reducer
from .row import accumulator_dtype

GRID_MAX = 1024
PER_BLOCK = 4 * BLOCK
GRID_THRESHOLD = 8192
ARG_KINDS = ("argmax", "argmin")


def grid_reduce_applies(spec: LoopSpec) -> bool:
    if spec.n_outer != 0 or not spec.stages:
        return False
    if any(isinstance(n, Stage) for s in spec.stages for n in walk([s.expr])):
        return False
    if any(any(s != 0 for s in t.strides) for _, t in spec.outputs):
        return False
    n = product(list(spec.domain))
    return not isinstance(n, int) or n > GRID_THRESHOLD


def grid_size(spec: LoopSpec) -> Sym:
    n = product(list(spec.domain))
    return call("max", 1, call("min", call("cdiv", n, PER_BLOCK), GRID_MAX))


def partial_buffers(spec: LoopSpec) -> list[tuple[DType, bool]]:
    """Per stage: (accumulator dtype, whether an index buffer is needed)."""
    return [(accumulator_dtype(s), s.kind in ARG_KINDS) for s in spec.stages]


def partial_kernel(spec: LoopSpec, name: str, parts: list[tuple[str, str | None]]) -> EmittedKernel:
    """Pass 1; ``parts[k]``: (value buffer, index buffer or None) of stage k."""
    kb = KernelBuilder(name, max_threads=BLOCK)
    params = KernelParams(kb)
    cg = ExprCodegen(kb, params, spec.inputs, spec.scalars, spec.domain)
    axes = tuple(range(len(spec.domain)))
    n_sym = product(list(spec.domain))
    wide = cg.wide
    if any(s.kind in ARG_KINDS for s in spec.stages) and _too_big(n_sym):
        raise WiaUsageError(f"{spec.name}: argmax/argmin over more than 2^31 elements is not "
                            "supported by the PTX backend (its indices are 32-bit)")
    n = params.sym(n_sym, "u64" if wide else "u32")
    gid, stride = global_thread(kb)
    tid, cta = kb.special("%tid.x"), kb.special("%ctaid.x")
    for node in walk([s.expr for s in spec.stages]):
        if not varies(node, set(axes), spec.inputs):
            cg.value(node)
    base = dict(cg.memo)
    red = Reducer(kb, cg.ops)
    accs = []
    for s in spec.stages:
        t = accumulator_dtype(s)
        accs.append((t, *red.identity(s.kind, t)))

    def body(c: str) -> None:
        cg.memo = dict(base)
        cg.set_group(0, IndexGroup(axes, spec.domain, c))
        c32 = c
        if wide and any(s.kind in ARG_KINDS for s in spec.stages):
            c32 = kb.reg("b32")  # fits when static (checked above); symbolic: see docs/ptx.md
            kb.emit(f"cvt.u32.u64 {c32}, {c}")
        for s, (t, acc, idx) in zip(spec.stages, accs, strict=True):
            v = cg.ops.cast(cg.value(s.expr), s.expr.dtype, t)
            red.accumulate(s.kind, t, acc, idx, v, c32)

    StridedLoop(kb, "grid", wide).run(gid, n, stride, body)
    first, skip = kb.reg("pred"), kb.new_label("lead")
    outs = []
    for s, (t, acc, idx) in zip(spec.stages, accs, strict=True):
        outs.append((t, *red.block_reduce(s.kind, t, acc, idx, tid)))
    kb.emit(f"setp.ne.u32 {first}, {tid}, 0")
    kb.bra(skip, first)
    for (t, total, tidx), (vbuf, ibuf) in zip(outs, parts, strict=True):
        _store(cg, params, vbuf, t, cta, total)
        if ibuf is not None:
            _store(cg, params, ibuf, DType.I32, cta, tidx)  # type: ignore[arg-type]
    kb.label(skip)
    grid = (grid_size(spec), 1, 1)
    return EmittedKernel(kb, params.args, grid, (BLOCK, 1, 1), "reduce(grid)")


def final_kernel(spec: LoopSpec, name: str, parts: list[tuple[str, str | None]]) -> EmittedKernel:
    """Pass 2: one block folds the partials and stores the outputs."""
    kb = KernelBuilder(name, max_threads=BLOCK)
    params = KernelParams(kb)
    cg = ExprCodegen(kb, params, spec.inputs, spec.scalars, spec.domain)
    cg.outputs_args = [arg for _, arg in spec.outputs]
    for _, arg in spec.outputs:
        params.buffer(arg.buffer)
    axes = tuple(range(len(spec.domain)))
    cg.set_group(0, IndexGroup(axes, spec.domain, "0"))
    g = params.sym(grid_size(spec))
    n = params.sym(product(list(spec.domain)), "u64" if cg.wide else "u32")
    tid, ntid = kb.special("%tid.x"), kb.special("%ntid.x")
    red = Reducer(kb, cg.ops)
    accs = []
    for s in spec.stages:
        t = accumulator_dtype(s)
        accs.append((t, *red.identity(s.kind, t)))

    def body(c: str) -> None:
        for s, (t, acc, idx), (vbuf, ibuf) in zip(spec.stages, accs, parts, strict=True):
            v = _load(cg, params, vbuf, t, c)
            ci = _load(cg, params, ibuf, DType.I32, c) if ibuf is not None else c
            red.accumulate(s.kind, t, acc, idx, v, ci)

    StridedLoop(kb, "fold").run(tid, g, ntid, body)
    stage_regs = []
    for s, (t, acc, idx) in zip(spec.stages, accs, strict=True):
        total, tidx = red.block_reduce(s.kind, t, acc, idx, tid)
        stage_regs.append(finish_stage(cg, s, t, total, tidx, n))
    cg.stage_regs = stage_regs
    first, skip = kb.reg("pred"), kb.new_label("lead")
    values = [cg.value(node) for node, _ in spec.outputs]
    kb.emit(f"setp.ne.u32 {first}, {tid}, 0")
    kb.bra(skip, first)
    for k, ((_, arg), v) in enumerate(zip(spec.outputs, values, strict=True)):
        cg.store(cg.address(-k - 1), v, arg.dtype)
    kb.label(skip)
    return EmittedKernel(kb, params.args, (1, 1, 1), (BLOCK, 1, 1), "reduce(final)")


def finish_stage(cg: ExprCodegen, s, t: DType, total: str, tidx: str | None, n: str) -> str:
    """A folded stage as its result: an arg index as i64, a mean's sum divided by the
    element count ``n``, cast from the accumulator dtype ``t``."""
    kb = cg.kb
    if s.kind in ARG_KINDS:
        out = kb.reg("b64")
        kb.emit(f"cvt.s64.s32 {out}, {tidx}")
        return cg.ops.cast(out, DType.I64, s.dtype)
    if s.kind == "mean":
        cnt, q = kb.reg(info(t).reg), kb.reg(info(t).reg)
        kb.emit(f"cvt.rn.{info(t).itype}.{'u32' if is_b32(n) else 'u64'} {cnt}, {n}")
        kb.emit(f"div.rn.{info(t).itype} {q}, {total}, {cnt}")
        total = q
    return cg.ops.cast(total, t, s.dtype) if t is not s.dtype else total


def _too_big(n: Sym) -> bool:
    """A static element count whose indices do not fit the i32 index partials."""
    return isinstance(n, int) and n > 2**31 - 1


def _addr(cg: ExprCodegen, params: KernelParams, buf: str, t: DType, i: str) -> str:
    kb = cg.kb
    wide, addr = kb.reg("b64"), kb.reg("b64")
    kb.emit(f"mul.wide.u32 {wide}, {i}, {info(t).size}")
    kb.emit(f"add.s64 {addr}, {params.buffer(buf)}, {wide}")
    return addr


def _store(cg: ExprCodegen, params: KernelParams, buf: str, t: DType, i: str, v: str) -> None:
    cg.kb.emit(f"st.global.{info(t).mem} [{_addr(cg, params, buf, t, i)}], {v}")


def _load(cg: ExprCodegen, params: KernelParams, buf: str, t: DType, i: str) -> str:
    r = cg.kb.reg(info(t).reg)
    cg.kb.emit(f"ld.global.{info(t).mem} {r}, [{_addr(cg, params, buf, t, i)}]")
    return r


__all__ = ["grid_reduce_applies", "partial_kernel", "final_kernel", "partial_buffers",
           "finish_stage", "GRID_MAX", "TensorArg"]
