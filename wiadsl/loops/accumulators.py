"""``split-accumulators{count=4}``: independent accumulators for reduction loops.

A reduction ``acc = acc <op> x`` is a chain of dependent ops: each iteration waits
for the previous one's result (4 cycles per float add, whatever the core's
width). With ``count`` accumulators the chains are independent:

    m = lo + (trips // count) * count * s
    for iv in range(lo, m, s * count):             // count body copies
        a0 = a0 <op> x(iv); a1 = a1 <op> x(iv + s); ...
    acc = (a0 <op> a1) <op> (a2 <op> a3)           // combined after the loop
    for iv in range(m, hi, s): acc = acc <op> x(iv) // remainder: the original loop

``a0`` starts at the reduction's initial value, the others at ``<op>``'s identity
(0, 1, -inf/min, +inf/max).

Invariants:
- Only innermost loops with a single-block body qualify, and only iteration values
  whose one use in the loop is ``arith.add|mul|max|min`` with the value as an
  operand, whose result is the next value and is used by nothing else (so partial
  values are never observed). Other iteration values thread through the copies in
  order, as in ``unroll``.
- Integer reductions (wrapping add/mul, max, min) give identical results. Float
  ``max``/``min`` do too (NaN still propagates). Float ``add``/``mul`` are
  *reassociated*: the result differs from the sequential one by rounding, as
  NumPy's pairwise sum does; tests compare with tolerances. The combining ops
  copy the reduction op's attributes (``reassoc`` included).
- A static trip count divisible by ``count`` keeps no remainder loop; one below
  ``count`` is left alone (no main iteration would run).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from ..diagnostics import WiaUsageError
from ..ir.copying import clone_op
from ..ir.core import Block, Operation, OpResult, Value
from ..ir.module import FuncOp, ModuleOp
from ..ir.types import ScalarType
from ..passes.base import Pass, PassContext
from ..records import record
from .counted import CountedLoop
from .loop_edit import (
    Emit,
    body_ops,
    entry_emit,
    escapes,
    finish_main_loop,
    main_bound,
    single_block,
    transform_innermost,
)

REDUCTIONS = ("arith.add", "arith.mul", "arith.max", "arith.min")


def reduction_op(loop: CountedLoop, k: int) -> Operation | None:
    """The op updating iteration value ``k`` when it is a splittable reduction."""
    acc, nxt = loop.iters[k], loop.nexts[k]
    t = acc.type
    if not isinstance(t, ScalarType) or not (t.dtype.is_float or t.dtype.is_int):
        return None
    if not isinstance(nxt, OpResult) or nxt.op.name not in REDUCTIONS or nxt.op.parent is not loop.latch:
        return None
    op = nxt.op
    if [v is acc for v in op.operands].count(True) != 1:
        return None
    # acc: read by op and passed out on the exit edge only; op's result: the back edge only
    if any(u.owner is not op and u.owner is not loop.branch for u in acc.uses):
        return None
    if any(u.owner is not loop.back_edge for u in nxt.uses):
        return None
    return op


def identity(op: Operation, t: ScalarType) -> int | float:
    """The neutral element of the reduction ``op`` on ``t``."""
    kind = op.name.split(".")[1]
    if kind in ("add", "mul"):
        unit = 0 if kind == "add" else 1
        return float(unit) if t.dtype.is_float else unit
    if t.dtype.is_float:
        return float("-inf") if kind == "max" else float("inf")
    info = np.iinfo(t.dtype.numpy)
    return int(info.min) if kind == "max" else int(info.max)


def _combine(e: Emit, op: Operation, acc_index: int, parts: list[Value]) -> Value:
    """The partial accumulators reduced pairwise with (a copy of) ``op``."""
    while len(parts) > 1:
        nxt: list[Value] = []
        for a, b in zip(parts[0::2], parts[1::2], strict=False):
            operands = [b, b]
            operands[acc_index] = a
            c = clone_op(op, {id(op.operands[0]): operands[0], id(op.operands[1]): operands[1]})
            nxt.append(e.block.append(c).result)
        if len(parts) % 2:
            nxt.append(parts[-1])
        parts = nxt
    return parts[0]


def split_loop(func: FuncOp, loop: CountedLoop, count: int) -> list[Block]:
    """Split ``loop``'s reductions into ``count`` accumulators; the headers of the loops
    left (empty: nothing changed)."""
    trip = loop.trip_count()
    if count < 2 or not single_block(loop) or escapes(loop) or trip is not None and trip < count:
        return []
    reductions = {k: op for k in range(len(loop.iters)) if (op := reduction_op(loop, k)) is not None}
    if not reductions:
        return []
    lo, hi, step, inits = loop.lo, loop.hi, loop.step, loop.inits
    e = entry_emit(func, loop)
    stop = main_bound(e, lo, hi, step, count)
    slots: list[list[int]] = []  # per iteration value: its slots in the main loop's values
    main_inits: list[Value] = []
    for k, init in enumerate(inits):
        n = count if k in reductions else 1
        slots.append(list(range(len(main_inits), len(main_inits) + n)))
        main_inits.append(init)
        t = init.type
        assert isinstance(t, ScalarType) or n == 1
        main_inits.extend(e.const(identity(reductions[k], t), t) for _ in range(n - 1))  # type: ignore[arg-type]

    def body(e2: Emit, iv: Value, values: list[Value]) -> list[Value]:
        values = list(values)
        for c in range(count):
            mapping: dict[int, Value] = {id(loop.iv): e2.add_const(iv, c * step)}
            for k, a in enumerate(loop.iters):
                mapping[id(a)] = values[slots[k][c if k in reductions else 0]]
            e2.clone(body_ops(loop), mapping)
            for k, nxt in enumerate(loop.nexts):
                values[slots[k][c if k in reductions else 0]] = mapping.get(id(nxt), nxt)
        return values

    outs = e.loop(lo, stop, step * count, main_inits, body, loop.parallel)
    finals = [outs[s[0]] if k not in reductions else
              _combine(e, reductions[k], reductions[k].operands.index(loop.iters[k]), [outs[i] for i in s])
              for k, s in enumerate(slots)]
    return finish_main_loop(e, loop, stop, finals, trip, count)


def split_func(func: FuncOp, count: int) -> int:
    """Split the accumulators of every qualifying loop of ``func``; how many loops."""
    return transform_innermost(func, lambda loop: split_loop(func, loop, count))


@record(frozen=True)
class SplitAccumulators(Pass):
    """``count`` independent accumulators per reduction of innermost loops
    (accumulators.py; float add/mul are reassociated)."""

    name: ClassVar[str] = "split-accumulators"
    count: int = 4

    def __post_init__(self) -> None:
        if self.count < 1:
            raise WiaUsageError(f"option 'count' of pass 'split-accumulators' must be at least 1, "
                                f"got {self.count}")

    def run(self, module: ModuleOp, ctx: PassContext) -> None:
        for func in list(module):
            ctx.count("loops split", split_func(func, self.count))


__all__ = ["REDUCTIONS", "SplitAccumulators", "identity", "reduction_op", "split_func", "split_loop"]
