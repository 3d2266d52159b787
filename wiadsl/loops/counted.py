"""Counted loops recognized in a loop-level function's CFG.

The loop level has no structured ``for`` op: ``LoopBuilder.loop`` emits

    ^pre:     ... br ^loop(%lo, %inits...)
    ^loop(%i: index, %iters...):
              %c = arith.cmpi slt, %i, %hi : index
              cond_br %c, ^body, ^done(%iters...)
    ^body:    ...            (any blocks, inner loops included)
    ^latch:   ... br ^loop(%i + step, %nexts...)
    ^done(%out...): ...

``find_counted_loops(func)`` finds exactly that shape (a single entry edge, a
single back edge, the header holding only the compare) and describes it as a
``CountedLoop``, so transformations (tiling, unrolling, accumulator splitting,
vectorization, prefetching) read one description instead of re-matching the CFG.

Invariants:
- ``step`` is a positive constant; ``lo``/``hi`` are any ``index`` values that
  dominate the header (the loop reads them once per iteration).
- ``blocks`` is the natural loop: header first, then the body in function order;
  ``latch`` is the one block whose ``br`` goes back to the header.
- ``exit`` is the header's false target and takes exactly the iteration values.
- Loops are returned innermost first; ``parent`` links each to the loop around it.
"""

from __future__ import annotations

from ..ir.core import Block, BlockArgument, Operation, OpResult, Value
from ..ir.dominance import DominanceInfo
from ..ir.module import FuncOp
from ..records import field, record
from .builder import const_value
from .parallelize import natural_loop, predecessors


@record(eq=False)
class CountedLoop:
    """``for iv in range(lo, hi, step)`` carrying ``iters`` (see the module docstring)."""

    header: Block
    blocks: list[Block]
    preheader: Block
    latch: Block
    exit: Block
    lo: Value
    hi: Value
    step: int
    parallel: bool
    parent: CountedLoop | None = None
    children: list[CountedLoop] = field(default_factory=list)

    @property
    def iv(self) -> BlockArgument:
        return self.header.args[0]

    @property
    def iters(self) -> list[BlockArgument]:
        return list(self.header.args[1:])

    @property
    def body_entry(self) -> Block:
        """The header's true target: where an iteration starts."""
        return self.branch.successors[0].block

    @property
    def branch(self) -> Operation:
        term = self.header.terminator
        assert term is not None
        return term

    @property
    def back_edge(self) -> Operation:
        term = self.latch.terminator
        assert term is not None
        return term

    @property
    def inits(self) -> list[Value]:
        """The values the entry edge passes for the iteration values."""
        return list(self._entry_edge.successors[0].args[1:])

    @property
    def nexts(self) -> list[Value]:
        """The values the back edge passes for the iteration values."""
        return list(self.back_edge.successors[0].args[1:])

    @property
    def _entry_edge(self) -> Operation:
        term = self.preheader.terminator
        assert term is not None
        return term

    def trip_count(self) -> int | None:
        """The number of iterations when ``lo`` and ``hi`` are constants, else None."""
        lo, hi = const_value(self.lo), const_value(self.hi)
        if lo is None or hi is None:
            return None
        return max(0, -(-(int(hi) - int(lo)) // self.step))

    @property
    def is_innermost(self) -> bool:
        return not self.children

    def contains(self, block: Block) -> bool:
        return any(b is block for b in self.blocks)

    def defines(self, value: Value) -> bool:
        """Whether ``value`` is defined inside the loop (so it varies per iteration)."""
        if isinstance(value, BlockArgument):
            return self.contains(value.block)
        assert isinstance(value, OpResult)
        return value.op.parent is not None and self.contains(value.op.parent)


def find_counted_loops(func: FuncOp) -> list[CountedLoop]:
    """Every counted loop of ``func``, innermost first, with parent/children links."""
    dom, preds = DominanceInfo(func), predecessors(func)
    order = {id(b): i for i, b in enumerate(func.blocks)}
    loops = [loop for b in func.blocks if (loop := _match(b, dom, preds, order)) is not None]
    # innermost first: a loop nested in another has fewer blocks
    loops.sort(key=lambda lp: len(lp.blocks))
    for i, inner in enumerate(loops):
        for outer in loops[i + 1:]:
            if outer is not inner and outer.contains(inner.header):
                inner.parent = outer
                outer.children.append(inner)
                break
    return loops


def _match(header: Block, dom: DominanceInfo, preds: dict[int, list[Block]],
           order: dict[int, int]) -> CountedLoop | None:
    blocks = natural_loop(header, dom, preds)
    branch = header.terminator
    if blocks is None or branch is None or branch.name != "cf.cond_br" or not header.args:
        return None
    blocks = [header, *sorted(blocks[1:], key=lambda b: order[id(b)])]
    if len(header.ops) != 2:
        return None
    cmp = header.ops[0]
    iv = header.args[0]
    if cmp.name != "arith.cmpi" or cmp.attributes.get("predicate") != "slt" \
            or cmp.operands[0] is not iv or branch.operands[0] is not cmp.results[0]:
        return None
    body, exit_edge = branch.successors
    inside = {id(b) for b in blocks}
    if id(body.block) not in inside or id(exit_edge.block) in inside or body.args \
            or list(exit_edge.args) != list(header.args[1:]):
        return None
    entries = [p for p in preds[id(header)] if id(p) not in inside]
    latches = [p for p in preds[id(header)] if id(p) in inside]
    if len(entries) != 1 or len(latches) != 1:
        return None
    enter, back = entries[0].terminator, latches[0].terminator
    if enter is None or back is None or enter.name != "cf.br" or back.name != "cf.br":
        return None
    step = _step(back.successors[0].args[0], iv)
    if step is None:
        return None
    hi = cmp.operands[1]
    if isinstance(hi, BlockArgument) and id(hi.block) in inside or \
            isinstance(hi, OpResult) and hi.op.parent is not None and id(hi.op.parent) in inside:
        return None
    return CountedLoop(header, blocks, entries[0], latches[0], exit_edge.block,
                       enter.successors[0].args[0], hi, step, bool(branch.attributes.get("parallel")))


def _step(next_iv: Value, iv: Value) -> int | None:
    """``c`` when ``next_iv`` is ``arith.add %iv, c`` with a constant ``c > 0``."""
    if not isinstance(next_iv, OpResult) or next_iv.op.name != "arith.add":
        return None
    a, b = next_iv.op.operands
    c = const_value(b) if a is iv else const_value(a) if b is iv else None
    return int(c) if c is not None and int(c) > 0 else None


__all__ = ["CountedLoop", "find_counted_loops"]
