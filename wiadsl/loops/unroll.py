"""``unroll{factor=4}``: unroll innermost counted loops by ``factor``.

    for iv in range(lo, hi, s): body(iv, iters)
becomes
    m = lo + (trips // factor) * factor * s
    for iv in range(lo, m, s * factor):           // main loop
        iters = body(iv, iters); iters = body(iv + s, iters); ...   (factor copies)
    for iv in range(m, hi, s): body(iv, iters)    // remainder: the original loop

Invariants:
- Only innermost loops whose body is one block (the header's true target is the
  latch) are unrolled; a body with inner control flow is left alone. Loops any of
  whose values are used past the exit other than through the exit's arguments
  (``loop_edit.escapes``) are left alone too.
- Iteration values thread through the copies in order, so every iteration runs
  exactly as before and in the same order: the result is bit-identical.
- A static trip count of at most ``factor`` is unrolled fully (straight-line
  code, no loop); a static trip count divisible by ``factor`` keeps no remainder.
- The main loop keeps the ``parallel`` mark of the original (its iterations are
  groups of the original ones, so the promise still holds).
- Loops the pass created or already handled are not unrolled again.
"""

from __future__ import annotations

from typing import ClassVar

from ..diagnostics import WiaUsageError
from ..ir.core import Block, Value
from ..ir.module import FuncOp, ModuleOp
from ..passes.base import Pass, PassContext
from ..records import record
from .counted import CountedLoop
from .loop_edit import (
    Emit,
    body_ops,
    entry_emit,
    erase_loop,
    escapes,
    finish_main_loop,
    main_bound,
    single_block,
    transform_innermost,
)


def copies(e: Emit, loop: CountedLoop, iv: Value, iters: list[Value], n: int) -> list[Value]:
    """``n`` copies of the body for ``iv, iv + step, ...``; the iteration values after them."""
    for k in range(n):
        mapping: dict[int, Value] = {id(loop.iv): e.add_const(iv, k * loop.step)}
        mapping.update((id(a), v) for a, v in zip(loop.iters, iters, strict=True))
        e.clone(body_ops(loop), mapping)
        iters = [mapping.get(id(v), v) for v in loop.nexts]
    return iters


def unroll_loop(func: FuncOp, loop: CountedLoop, factor: int) -> list[Block]:
    """Unroll ``loop`` by ``factor``; the headers of the loops left (none when fully
    unrolled), or an empty list without a change when it does not qualify."""
    trip = loop.trip_count()
    if factor < 2 or not single_block(loop) or escapes(loop) or trip == 0:
        return []
    lo, hi, step, inits = loop.lo, loop.hi, loop.step, loop.inits
    e = entry_emit(func, loop)
    if trip is not None and trip <= factor:
        e.br(loop.exit, copies(e, loop, lo, inits, trip))
        erase_loop(loop)
        return [e.block]  # no loop left: report the preheader so nothing re-visits it
    stop = main_bound(e, lo, hi, step, factor)
    outs = e.loop(lo, stop, step * factor, inits,
                  lambda e2, iv, its: copies(e2, loop, iv, its, factor), loop.parallel)
    return finish_main_loop(e, loop, stop, outs, trip, factor)


def unroll_func(func: FuncOp, factor: int) -> int:
    """Unroll every qualifying innermost loop of ``func``; how many."""
    return transform_innermost(func, lambda loop: unroll_loop(func, loop, factor))


@record(frozen=True)
class Unroll(Pass):
    """Unroll innermost single-block counted loops by ``factor`` (unroll.py)."""

    name: ClassVar[str] = "unroll"
    factor: int = 4

    def __post_init__(self) -> None:
        if self.factor < 1:
            raise WiaUsageError(f"option 'factor' of pass 'unroll' must be at least 1, got {self.factor}")

    def run(self, module: ModuleOp, ctx: PassContext) -> None:
        for func in list(module):
            ctx.count("loops unrolled", unroll_func(func, self.factor))


__all__ = ["Unroll", "unroll_func", "unroll_loop"]
