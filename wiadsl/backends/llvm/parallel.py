"""Native fork-join over an index range: ``wia.parallel_for`` with pthreads.

    i32 @wia.parallel_for(ptr %worker, ptr %ctx, i64 %lo, i64 %hi, i64 %align, i64 %threads)
    i32 %worker(ptr %ctx, i64 %lo, i64 %hi)      ; 0 on success, else an error code

``[lo, hi)`` is cut into at most ``threads`` contiguous chunks whose sizes are
multiples of ``align`` (the last one takes the rest); chunk 0 runs on the
calling thread, the others on fresh pthreads, joined before returning. The
result is the first non-zero code of the chunks in order (so an error is
reported as the serial loop would, when only one chunk fails).

Invariants:
- No shared state but ``ctx`` (read-only to workers) and what the workers
  write: callers hand disjoint output ranges to the chunks.
- A thread that cannot be created runs its chunk on the caller instead (no
  work is lost under resource limits).
- Thread hand-off costs tens of microseconds (PERFORMANCE.md): callers decide
  by a size threshold whether to call this at all (``worth_threads``).
"""

from __future__ import annotations

import os

from llvmlite import ir

from ...ir.core import Operation
from ...loops.passes import MIN_PARALLEL_WORK
from .types import I1, I32, I64, PTR


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


#: Threads a parallel region uses (the calling thread included).
THREADS = max(1, min(_cpus(), 8))

WORKER_TYPE = ir.FunctionType(I32, [PTR, I64, I64])
_REC = 5  # per chunk: worker, ctx, lo, hi, rc (i64 slots)


def _i(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


def _declare(mod: ir.Module, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
    fn = mod.globals.get(name)
    return fn if fn is not None else ir.Function(mod, ir.FunctionType(ret, args), name)


class _Callee:
    """An indirect callee for ``IRBuilder.call``: with opaque pointers llvmlite
    needs the function type from the callee object itself."""

    def __init__(self, ptr: ir.Value, ftype: ir.FunctionType):
        self.ptr, self.function_type, self.type = ptr, ftype, ptr.type

    def get_reference(self) -> str:
        return self.ptr.get_reference()


def _trampoline(mod: ir.Module) -> ir.Function:
    """``ptr @wia.par.tramp(ptr %rec)``: the pthread start routine of one chunk."""
    name = "wia.par.tramp"
    if name in mod.globals:
        return mod.globals[name]
    fn = ir.Function(mod, ir.FunctionType(PTR, [PTR]), name)
    fn.linkage = "internal"
    (rec,) = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    slot = [b.gep(rec, [_i(j)], source_etype=I64) for j in range(_REC)]
    worker = _Callee(b.inttoptr(b.load(slot[0], typ=I64), PTR), WORKER_TYPE)
    ctx = b.inttoptr(b.load(slot[1], typ=I64), PTR)
    rc = b.call(worker, [ctx, b.load(slot[2], typ=I64), b.load(slot[3], typ=I64)])
    b.store(b.sext(rc, I64), slot[4])
    b.ret(ir.Constant(PTR, None))
    return fn


def parallel_for(mod: ir.Module) -> ir.Function:
    """Declare (once per module) and return ``wia.parallel_for``."""
    name = "wia.parallel_for"
    if name in mod.globals:
        return mod.globals[name]
    fn = ir.Function(mod, ir.FunctionType(I32, [PTR, PTR, I64, I64, I64, I64]), name)
    fn.linkage = "internal"
    worker, ctx, lo, hi, align, threads = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    tramp = _trampoline(mod)
    create = _declare(mod, "pthread_create", I32, [PTR, PTR, PTR, PTR])
    join = _declare(mod, "pthread_join", I32, [I64, PTR])
    recs = b.alloca(I64, size=_REC * THREADS)
    tids = b.alloca(I64, size=THREADS)
    started = b.alloca(I1, size=THREADS)
    # per = ceil(ceil(n / threads) / align) * align, so chunks stay aligned
    n = b.sub(hi, lo)
    t = b.select(b.icmp_signed("<", threads, _i(1)), _i(1), threads)
    t = b.select(b.icmp_signed(">", t, _i(THREADS)), _i(THREADS), t)
    per = b.sdiv(b.add(n, b.sub(t, _i(1))), t)
    per = b.mul(b.sdiv(b.add(per, b.sub(align, _i(1))), align), align)
    wi, ci = b.ptrtoint(worker, I64), b.ptrtoint(ctx, I64)
    for k in range(THREADS):
        c_lo = b.add(lo, b.mul(per, _i(k)))
        c_lo = b.select(b.icmp_signed("<", c_lo, hi), c_lo, hi)
        c_hi = b.add(c_lo, per)
        c_hi = b.select(b.icmp_signed("<", c_hi, hi), c_hi, hi)
        rec = b.gep(recs, [_i(_REC * k)], source_etype=I64)
        for j, v in enumerate((wi, ci, c_lo, c_hi, _i(0))):
            b.store(v, b.gep(rec, [_i(j)], source_etype=I64))
        flag = b.gep(started, [_i(k)], source_etype=I1)
        b.store(ir.Constant(I1, 0), flag)
        if k == 0:
            continue
        with b.if_then(b.and_(b.icmp_signed("<", c_lo, c_hi), b.icmp_signed("<", _i(k), t))):
            err = b.call(create, [b.gep(tids, [_i(k)], source_etype=I64), ir.Constant(PTR, None), tramp, rec])
            b.store(b.icmp_signed("==", err, ir.Constant(I32, 0)), flag)
    b.call(tramp, [recs])
    rc = ir.Constant(I64, 0)
    for k in range(1, THREADS):
        rec = b.gep(recs, [_i(_REC * k)], source_etype=I64)
        flag = b.load(b.gep(started, [_i(k)], source_etype=I1), typ=I1)
        with b.if_else(flag) as (joined, inline):
            with joined:
                b.call(join, [b.load(b.gep(tids, [_i(k)], source_etype=I64), typ=I64), ir.Constant(PTR, None)])
            with inline:  # never started (empty chunk or no thread): run it here
                lo_k = b.load(b.gep(rec, [_i(2)], source_etype=I64), typ=I64)
                hi_k = b.load(b.gep(rec, [_i(3)], source_etype=I64), typ=I64)
                with b.if_then(b.icmp_signed("<", lo_k, hi_k)):
                    b.call(tramp, [rec])
    for k in range(THREADS):
        rc_k = b.load(b.gep(recs, [_i(_REC * k + 4)], source_etype=I64), typ=I64)
        rc = b.select(b.icmp_signed("!=", rc, _i(0)), rc, rc_k)
    b.ret(b.trunc(rc, I32))
    return fn


def worth_threads(b: ir.IRBuilder, work: ir.Value) -> ir.Value:
    """``i1``: whether ``work`` (scalar operations) pays for the thread hand-off."""
    if THREADS <= 1:
        return ir.Constant(I1, 0)
    return b.icmp_signed(">=", work, _i(MIN_PARALLEL_WORK))


def to_slot(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    """A register value as the i64 of a context slot (``from_slot`` inverts it)."""
    t = v.type
    if isinstance(t, ir.PointerType):
        return b.ptrtoint(v, I64)
    if isinstance(t, ir.IntType):
        return v if t.width == 64 else b.zext(v, I64)
    bits = {"half": 16, "float": 32, "double": 64}[str(t)]
    raw = b.bitcast(v, ir.IntType(bits))
    return raw if bits == 64 else b.zext(raw, I64)


def from_slot(b: ir.IRBuilder, raw: ir.Value, t: ir.Type) -> ir.Value:
    if isinstance(t, ir.PointerType):
        return b.inttoptr(raw, t)
    if isinstance(t, ir.IntType):
        return raw if t.width == 64 else b.trunc(raw, t)
    bits = {"half": 16, "float": 32, "double": 64}[str(t)]
    return b.bitcast(raw if bits == 64 else b.trunc(raw, ir.IntType(bits)), t)


def free_arena(b: ir.IRBuilder, arena: ir.Value) -> None:
    """Free every buffer recorded in ``arena`` (runtime.py's layout) and its table."""
    mod = b.module
    free = _declare(mod, "free", ir.VoidType(), [PTR])
    table = b.load(b.gep(arena, [_i(0)], source_etype=I64), typ=PTR)
    count = b.load(b.gep(arena, [_i(1)], source_etype=I64), typ=I64)
    fn = b.function
    head, body, done = (fn.append_basic_block(f"arena.{n}") for n in ("head", "body", "done"))
    pre = b.block
    b.branch(head)
    b.position_at_end(head)
    i = b.phi(I64)
    i.add_incoming(_i(0), pre)
    b.cbranch(b.icmp_signed("<", i, count), body, done)
    b.position_at_end(body)
    b.call(free, [b.load(b.gep(table, [i], source_etype=PTR), typ=PTR)])
    i.add_incoming(b.add(i, _i(1)), b.block)
    b.branch(head)
    b.position_at_end(done)
    b.call(free, [table])


def call_worker(mod: ir.Module, callee: ir.Function, captured: list[ir.Type]) -> ir.Function:
    """``i32 worker(ptr ctx, i64 lo, i64 hi)`` calling an outlined loop ``callee(arena, lo,
    hi, captured..., results)`` with its captured values read from ``ctx`` (one i64 slot
    each) and an arena of its own: allocation is not thread-safe across arenas, and an
    outlined loop returns nothing, so everything it allocated is freed here."""
    name = f"{callee.name}.worker"
    if name in mod.globals:
        return mod.globals[name]
    fn = ir.Function(mod, WORKER_TYPE, name)
    fn.linkage = "internal"
    ctx, lo, hi = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    arena = b.alloca(I64, size=3)
    for j in range(3):
        b.store(_i(0), b.gep(arena, [_i(j)], source_etype=I64))
    results = b.alloca(I64, size=1)
    vals = [from_slot(b, b.load(b.gep(ctx, [_i(j)], source_etype=I64), typ=I64), t)
            for j, t in enumerate(captured)]
    rc = b.call(callee, [arena, lo, hi, *vals, results])
    free_arena(b, arena)
    b.ret(rc)
    return fn


def emit_parallel_call(b: ir.IRBuilder, alloca_block: ir.Block, arena: ir.Value, callee: ir.Function,
                       op: Operation, flat: list[ir.Value]) -> ir.Value:
    """The i32 code of ``func.call {parallel = cost}`` (parallelize.py): ``flat`` is
    (lo, hi, captured...) flattened. Runs on ``THREADS`` when ``(hi - lo) * cost``
    reaches ``MIN_PARALLEL_WORK``, else calls the outlined loop directly."""
    lo, hi, rest = flat[0], flat[1], flat[2:]
    with b.goto_block(alloca_block):
        ctx = b.alloca(I64, size=max(1, len(rest)))
        slots = b.alloca(I64, size=1)
    for j, v in enumerate(rest):
        b.store(to_slot(b, v), b.gep(ctx, [_i(j)], source_etype=I64))
    work = b.mul(b.sub(hi, lo), _i(int(op.attributes["parallel"])))
    go = worth_threads(b, work)
    with b.if_else(go) as (threaded, serial):
        with threaded:
            worker = call_worker(b.module, callee, [v.type for v in rest])
            rc_par = b.call(parallel_for(b.module), [worker, ctx, lo, hi, _i(8), _i(THREADS)])
            par_block = b.block
        with serial:
            rc_ser = b.call(callee, [arena, *flat, slots])
            ser_block = b.block
    rc = b.phi(I32)
    rc.add_incoming(rc_par, par_block)
    rc.add_incoming(rc_ser, ser_block)
    return rc


__all__ = ["THREADS", "WORKER_TYPE", "emit_parallel_call", "parallel_for", "worth_threads"]
