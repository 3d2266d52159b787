"""IR surgery shared by the loop transformations (unroll, tile, split-accumulators,
pipeline-loads): typed index arithmetic that folds, new counted loops placed
before an existing one, body cloning, and the eligibility checks they share.

Invariants:
- ``Emit`` appends at the end of a block that has no terminator yet (like
  ``LoopBuilder``), but its arithmetic works on the operands' own integer type,
  so loops whose induction variable is ``i64`` (the frontend's ``for``) are
  handled like ``index`` ones. Constants fold; ``arith.add %iv, c`` is always
  emitted for a back edge, so ``find_counted_loops`` recognizes the new loops.
- New blocks go right before an anchor block (the loop being transformed), so
  printed IR reads top to bottom in execution order.
- ``give_exits_iteration_values`` only re-routes values: after it, a loop whose
  exit read the header's iteration values directly passes them as exit block
  arguments instead (what ``CountedLoop`` requires); meaning is unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..ir.copying import clone_op
from ..ir.core import Block, BlockArgument, Operation, OpResult, Value
from ..ir.dominance import DominanceInfo
from ..ir.module import FuncOp
from ..ir.ops import create_op
from ..ir.types import IRType
from ..rewrite.utils import erase_blocks
from .builder import I1, const_value
from .counted import CountedLoop, find_counted_loops
from .parallelize import natural_loop, predecessors

_FOLD: dict[str, Callable[[int, int], int]] = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a // b if b else 0, "max": max, "min": min,
}

EmitBody = Callable[["Emit", Value, list[Value]], Sequence[Value]]


class Emit:
    """Creates ops at the end of ``block``; new blocks go before ``anchor``."""

    def __init__(self, func: FuncOp, block: Block, anchor: Block):
        self.func, self.block, self.anchor = func, block, anchor
        self._consts: dict[tuple[str, object], Value] = {}
        self.last_header: Block | None = None  #: the header of the latest ``loop``

    def move_to(self, block: Block) -> None:
        self.block = block
        self._consts = {}  # a constant must dominate its uses: one cache per block

    def new_block(self, types: Sequence[IRType] = (), name: str | None = None) -> Block:
        block = Block(list(types), None, name)
        self.func.body.add_block(block, self.func.blocks.index(self.anchor))
        return block

    def create(self, name: str, operands: Sequence[Value], types: Sequence[IRType] = (),
               attrs: dict | None = None,
               successors: Sequence[tuple[Block, Sequence[Value]]] = ()) -> Operation:
        op = create_op(name, list(operands), list(types), attrs, [(b, list(a)) for b, a in successors], None)
        return self.block.append(op)

    def const(self, value: int | float | bool, t: IRType) -> Value:
        key = (str(t), repr(value))
        if key not in self._consts:
            self._consts[key] = self.create("arith.constant", [], [t], {"value": value}).result
        return self._consts[key]

    def arith(self, fn: str, a: Value, b: Value) -> Value:
        """``arith.<fn> a, b`` on integers/index; two constants fold, identities vanish."""
        ca, cb = const_value(a), const_value(b)
        if ca is not None and cb is not None:
            return self.const(_FOLD[fn](int(ca), int(cb)), a.type)
        if fn in ("add", "sub") and cb == 0 or fn in ("mul", "div") and cb == 1:
            return a
        if fn == "add" and ca == 0 or fn == "mul" and ca == 1:
            return b
        return self.create(f"arith.{fn}", [a, b], [a.type]).result

    def add_const(self, a: Value, c: int) -> Value:
        return self.arith("add", a, self.const(c, a.type))

    def slt(self, a: Value, b: Value) -> Value:
        ca, cb = const_value(a), const_value(b)
        if ca is not None and cb is not None:
            return self.const(bool(int(ca) < int(cb)), I1)
        return self.create("arith.cmpi", [a, b], [I1], {"predicate": "slt"}).result

    def select(self, c: Value, a: Value, b: Value) -> Value:
        return self.create("arith.select", [c, a, b], [a.type]).result

    def br(self, dest: Block, args: Sequence[Value]) -> Operation:
        return self.create("cf.br", [], successors=[(dest, args)])

    def cond_br(self, c: Value, yes: Block, yes_args: Sequence[Value], no: Block,
                no_args: Sequence[Value], parallel: bool = False) -> Operation:
        op = self.create("cf.cond_br", [c], successors=[(yes, yes_args), (no, no_args)])
        if parallel:
            op.attributes["parallel"] = True
        return op

    def loop(self, lo: Value, hi: Value, step: int, inits: Sequence[Value], body: EmitBody,
             parallel: bool = False) -> list[Value]:
        """A LoopBuilder-shaped ``for iv in range(lo, hi, step)``; the exit's values.
        The insertion point ends in the new loop's exit block."""
        header = self.new_block([lo.type, *(v.type for v in inits)], "loop")
        self.last_header = header
        body_block, done = self.new_block((), "body"), self.new_block([v.type for v in inits], "done")
        self.br(header, [lo, *inits])
        self.move_to(header)
        iv = header.args[0]
        self.cond_br(self.create("arith.cmpi", [iv, hi], [I1], {"predicate": "slt"}).result,
                     body_block, [], done, header.args[1:], parallel)
        self.move_to(body_block)
        nexts = list(body(self, iv, list(header.args[1:])))
        # never folded: find_counted_loops reads the step from this add
        step_op = self.create("arith.add", [iv, self.const(step, iv.type)], [iv.type])
        self.br(header, [step_op.result, *nexts])
        self.move_to(done)
        return list(done.args)

    def clone(self, ops: Sequence[Operation], mapping: dict[int, Value]) -> None:
        """Copies of ``ops`` (no terminators) reading ``mapping``'s values; results are mapped."""
        for op in ops:
            self.block.append(clone_op(op, mapping))


def main_bound(e: Emit, lo: Value, hi: Value, step: int, factor: int) -> Value:
    """Where a loop of ``range(lo, hi, step)`` run ``factor`` iterations at a time stops:
    ``lo + (trips // factor) * factor * step`` with ``trips = max(0, ceil((hi - lo) / step))``.
    The remaining ``trips % factor`` iterations start there."""
    span = e.arith("sub", hi, lo)
    if step > 1:
        span = e.arith("div", e.add_const(span, step - 1), e.const(step, lo.type))
    trips = e.arith("max", span, e.const(0, lo.type))
    whole = e.arith("mul", e.arith("div", trips, e.const(factor, lo.type)), e.const(factor * step, lo.type))
    return e.arith("add", lo, whole)


def finish_main_loop(e: Emit, loop: CountedLoop, stop: Value, outs: Sequence[Value],
                     trip: int | None, factor: int) -> list[Block]:
    """End the code after a main loop that ran ``factor`` iterations at a time up to
    ``stop``: the original ``loop`` runs the rest from ``stop`` with ``outs``, unless a
    static trip count divides evenly (then ``loop`` is erased). The headers made."""
    main_header = e.last_header
    assert main_header is not None
    if trip is not None and trip % factor == 0:
        e.br(loop.exit, list(outs))
        erase_loop(loop)
        return [main_header]
    e.br(loop.header, [stop, *outs])
    return [main_header, loop.header]


def transform_innermost(func: FuncOp, transform: Callable[[CountedLoop], list[Block]]) -> int:
    """Apply ``transform`` once to every innermost single-block counted loop of ``func``,
    including loops it creates (it returns the headers it made, or [] when it left the
    loop alone: those are not visited again); how many loops it changed."""
    give_exits_iteration_values(func)
    seen: dict[int, Block] = {}  # headers handled (kept alive so ids stay unique)
    changed = 0
    while True:
        todo = [lp for lp in find_counted_loops(func) if id(lp.header) not in seen and single_block(lp)]
        if not todo:
            return changed
        seen[id(todo[0].header)] = todo[0].header
        made = transform(todo[0])
        changed += bool(made)
        seen.update((id(b), b) for b in made)


def body_ops(loop: CountedLoop) -> list[Operation]:
    """The ops of a single-block body without its back edge."""
    return loop.latch.ops[:-1]


def single_block(loop: CountedLoop) -> bool:
    """Innermost, and the body is one block ending in the back edge (``body_entry is latch``)."""
    return loop.is_innermost and loop.body_entry is loop.latch and len(loop.blocks) == 2


def escapes(loop: CountedLoop) -> bool:
    """Whether a value defined in the loop is used outside it other than through the
    exit edge (then rebuilding the loop would leave that use without a definition)."""
    for b in loop.blocks:
        values: list[Value] = list(b.args)
        for op in b.ops:
            values.extend(op.results)
        for v in values:
            for use in v.uses:
                parent = use.owner.parent
                if parent is None or not loop.contains(parent):
                    return True
    return False


def entry_emit(func: FuncOp, loop: CountedLoop) -> Emit:
    """Remove the preheader's ``br`` into the loop; an ``Emit`` at the preheader's end."""
    term = loop.preheader.terminator
    assert term is not None
    term.erase()
    return Emit(func, loop.preheader, loop.header)


def erase_loop(loop: CountedLoop) -> None:
    """Drop the loop's blocks (nothing outside may use their values: see ``escapes``)."""
    erase_blocks(loop.blocks)


def give_exits_iteration_values(func: FuncOp) -> int:
    """Make loops whose exit block reads the header's iteration values directly (the
    frontend's ``for``) pass them as exit arguments; how many loops changed.

    Only when the header's false edge is the loop's one way out and the exit has no
    other predecessor: then every use outside the loop is dominated by the exit."""
    dom, preds = DominanceInfo(func), predecessors(func)
    changed = 0
    for header in list(func.blocks):
        term = header.terminator
        if term is None or term.name != "cf.cond_br" or len(header.args) < 2:
            continue
        exit_block = term.successors[1].block
        blocks = natural_loop(header, dom, preds)
        if blocks is None or exit_block.args or term.successors[1].args \
                or [id(p) for p in preds[id(exit_block)]] != [id(header)]:
            continue
        inside = {id(b) for b in blocks}
        if id(exit_block) in inside or any(id(s) not in inside and not (b is header and s is exit_block)
                                           for b in blocks for s in b.successors):
            continue
        iters = header.args[1:]
        new_args = [exit_block.add_arg(a.type, a.name_hint) for a in iters]
        for old, new in zip(iters, new_args, strict=True):
            for use in list(old.uses):
                owner = use.owner
                if owner.parent is not None and id(owner.parent) not in inside:
                    owner.set_operand(use.index, new)
        term.set_successor(1, exit_block, list(iters))
        changed += 1
    return changed


def is_param(func: FuncOp, v: Value) -> bool:
    """A function parameter (a read-only buffer at the loop level)."""
    return isinstance(v, BlockArgument) and v.block is func.entry


def defined_inside(loop: CountedLoop, v: Value) -> bool:
    if isinstance(v, BlockArgument):
        return loop.contains(v.block)
    assert isinstance(v, OpResult)
    return v.op.parent is not None and loop.contains(v.op.parent)


def invariant_copy(e: Emit, loop: CountedLoop, v: Value) -> Value | None:
    """``v`` usable before the loop: itself when defined outside, a fresh copy when it
    is a constant defined inside, else None."""
    if not defined_inside(loop, v):
        return v
    c = const_value(v)
    return None if c is None else e.const(c, v.type)


__all__ = ["Emit", "body_ops", "defined_inside", "entry_emit", "erase_loop", "escapes",
           "give_exits_iteration_values", "invariant_copy", "is_param", "main_bound", "single_block"]
