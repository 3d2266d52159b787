"""Liveness of tensor-level values, for in-place updates and copies on CFG edges.

``Liveness(func)`` answers, for the *tensor-level* function being lowered:
- ``live_in[block]``: values read in the block or later without being defined
  there first (successor arguments count as reads of the branching block);
- ``dead_after(op, v)``: no later op of ``op``'s block reads ``v`` and it is not
  live out of the block, so a buffer holding only ``v`` may be overwritten.
"""

from __future__ import annotations

from ..ir.core import Block, Operation, Value
from ..ir.module import FuncOp


class Liveness:
    def __init__(self, func: FuncOp):
        self.live_in: dict[int, set[int]] = {id(b): set() for b in func.blocks}
        self._uses: dict[int, set[int]] = {}
        self._defs: dict[int, set[int]] = {}
        for b in func.blocks:
            uses: set[int] = set()
            defs = {id(a) for a in b.args}
            for op in b.ops:
                for v in op.all_operands:
                    if id(v) not in defs:
                        uses.add(id(v))
                defs.update(id(r) for r in op.results)
            self._uses[id(b)], self._defs[id(b)] = uses, defs
        changed = True
        blocks = list(reversed(func.blocks))
        while changed:
            changed = False
            for b in blocks:
                new = self._uses[id(b)] | (self.live_out(b) - self._defs[id(b)])
                if new != self.live_in[id(b)]:
                    self.live_in[id(b)] = new
                    changed = True

    def live_out(self, block: Block) -> set[int]:
        out: set[int] = set()
        for s in block.successors:
            out |= self.live_in[id(s)]
        return out

    def dead_after(self, op: Operation, value: Value) -> bool:
        block = op.parent
        assert block is not None
        later = block.ops[block.ops.index(op) + 1:]
        if any(value is v for o in later for v in o.all_operands):
            return False
        if sum(v is value for v in op.all_operands) > 1:
            return False
        return id(value) not in self.live_out(block)
