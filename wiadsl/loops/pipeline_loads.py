"""``pipeline-loads``: software pipelining of loads by one iteration.

In an innermost single-block loop, a ``loop.load`` whose offset is computed from
the induction variable and loop invariants only is issued one iteration ahead:

    if lo < hi: v = load(buf, off(lo))              // prologue, guarded
    for iv in range(lo, hi, s) carrying v:
        ... uses of the load read v ...
        nx = iv + s
        v' = load(buf, off(nx < hi ? nx : iv))      // next iteration's value
        back edge passes v'

so the load's latency overlaps the rest of the iteration.

Invariants (correctness first):
- Zero trips never load: the prologue sits behind ``lo < hi`` (a static trip
  count >= 1 needs no guard; a static 0 leaves the loop alone).
- Every load the pipelined loop issues, the original issued too: the prologue
  loads iteration ``lo``'s address, and the last iteration re-loads its own
  address instead of one past the end. That holds because the load runs in every
  iteration: no op before it in the body may fail (``loop.check`` or an op whose
  ``may_trap`` is true; ``loop.load``s are in range by construction of the lowering).
- The value cannot change between the early load and the iteration that uses it:
  the buffer is a function parameter (read-only at the loop level) or nothing in
  the loop writes memory (only pure ops and ``loop.check``).
- The buffer is a loop invariant; the offset's computation (its "address slice")
  uses only pure, non-trapping ``arith`` ops on the induction variable, constants
  and invariants, and is re-emitted for the prologue and for the next iteration.
- The pipelined values are extra iteration values; the exit block gets matching
  (unused) arguments, so the loop stays a ``CountedLoop`` for later passes. Loops
  whose exit has other predecessors are left alone.
"""

from __future__ import annotations

from typing import ClassVar

from ..ir.core import BlockArgument, Operation, OpResult, Trait, Value
from ..ir.module import FuncOp, ModuleOp
from ..passes.base import Pass, PassContext
from ..records import record
from .counted import CountedLoop
from .loop_edit import (
    Emit,
    body_ops,
    defined_inside,
    entry_emit,
    escapes,
    is_param,
    single_block,
    transform_innermost,
)
from .parallelize import predecessors


def address_slice(loop: CountedLoop, off: Value) -> list[Operation] | None:
    """The body ops computing ``off`` from the induction variable and invariants (in
    body order), or None when it depends on anything else."""
    needed: dict[int, Operation] = {}
    stack = [off]
    while stack:
        v = stack.pop()
        if v is loop.iv or not defined_inside(loop, v):
            continue  # constants inside the loop are copied with the slice
        if isinstance(v, BlockArgument) or not isinstance(v, OpResult):
            return None  # an iteration value
        op = v.op
        if not op.name.startswith("arith.") or not op.has_trait(Trait.PURE) or op.may_trap():
            return None
        if id(op) not in needed:
            needed[id(op)] = op
            stack.extend(op.operands)
    return [op for op in body_ops(loop) if id(op) in needed]


def _writes_memory(op: Operation) -> bool:
    return not op.has_trait(Trait.PURE) and op.name != "loop.check"


def pipelinable_loads(func: FuncOp, loop: CountedLoop) -> list[tuple[Operation, list[Operation]]]:
    """The loads to issue early, each with its address slice."""
    ops = body_ops(loop)
    writes = any(_writes_memory(op) for op in ops)
    out = []
    for op in ops:
        if op.name == "loop.load":
            buf, off = op.operands
            if not defined_inside(loop, buf) and (not writes or is_param(func, buf)):
                sl = address_slice(loop, off)
                if sl is not None:
                    out.append((op, sl))
        elif op.name == "loop.check" or op.may_trap():
            break  # later loads may be guarded by this op: they stay where they are
    return out


def _load_at(e: Emit, loop: CountedLoop, iv: Value, loads: list[tuple[Operation, list[Operation]]]
             ) -> list[Value]:
    """Copies of the loads (and their address slices) for induction value ``iv``."""
    mapping: dict[int, Value] = {id(loop.iv): iv}
    out = []
    for load, sl in loads:
        e.clone([op for op in sl if id(op.results[0]) not in mapping], mapping)
        e.clone([load], mapping)
        out.append(mapping[id(load.results[0])])
    return out


def pipeline_loop(func: FuncOp, loop: CountedLoop) -> bool:
    """Issue ``loop``'s qualifying loads one iteration ahead; whether anything changed."""
    trip = loop.trip_count()
    if not single_block(loop) or escapes(loop) or trip == 0 \
            or [id(p) for p in predecessors(func)[id(loop.exit)]] != [id(loop.header)]:
        return False
    loads = pipelinable_loads(func, loop)
    if not loads:
        return False
    lo, hi, inits = loop.lo, loop.hi, loop.inits
    types = [load.results[0].type for load, _ in loads]
    e = entry_emit(func, loop)
    if trip is not None:  # at least one iteration: the first load is safe unguarded
        firsts = _load_at(e, loop, lo, loads)
    else:
        prologue, join = e.new_block((), "prologue"), e.new_block(types, "pipelined")
        e.cond_br(e.slt(lo, hi), prologue, [], join, [e.const(_zero(t), t) for t in types])
        e.move_to(prologue)
        e.br(join, _load_at(e, loop, lo, loads))
        e.move_to(join)
        firsts = list(join.args)
    e.br(loop.header, [lo, *inits, *firsts])
    current = [loop.header.add_arg(t) for t in types]
    for a in current:
        loop.exit.add_arg(a.type)  # unused: keeps the exit taking exactly the iteration values
    loop.branch.set_successor(1, loop.exit, list(loop.header.args[1:]))
    back = loop.back_edge
    back.detach()
    e.move_to(loop.latch)
    stepped = e.add_const(loop.iv, loop.step)
    ahead = _load_at(e, loop, e.select(e.slt(stepped, hi), stepped, loop.iv), loads)
    e.br(loop.header, [*back.successors[0].args, *ahead])
    back.drop_all_references()
    for (load, _), v in zip(loads, current, strict=True):  # the body reads the early values
        load.results[0].replace_all_uses_with(v)
        load.erase()
    return True


def _zero(t: object) -> int | float | bool:
    """A placeholder value of ``t`` for the zero-trip edge (never read)."""
    dtype = getattr(t, "dtype", None)
    return 0.0 if dtype is not None and dtype.is_float else False if dtype is not None and dtype.kind == 0 else 0


def pipeline_func(func: FuncOp) -> int:
    """Pipeline the loads of every qualifying loop of ``func``; how many loops."""
    return transform_innermost(func, lambda loop: [loop.header] if pipeline_loop(func, loop) else [])


@record(frozen=True)
class PipelineLoads(Pass):
    """Issue affine loads of innermost loops one iteration ahead (pipeline_loads.py)."""

    name: ClassVar[str] = "pipeline-loads"

    def run(self, module: ModuleOp, ctx: PassContext) -> None:
        for func in list(module):
            ctx.count("loops pipelined", pipeline_func(func))


__all__ = ["PipelineLoads", "address_slice", "pipeline_func", "pipeline_loop", "pipelinable_loads"]
