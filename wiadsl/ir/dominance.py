"""Dominator trees of a function's CFG (Cooper, Harvey and Kennedy's iterative
algorithm, "A Simple, Fast Dominance Algorithm", 2001).

Invariants:
- Only blocks reachable from the entry have an immediate dominator; the entry
  is its own. ``dominates`` is reflexive; unreachable blocks dominate nothing
  and are dominated by nothing.
"""

from __future__ import annotations

from .core import Block, BlockArgument, Operation, OpResult, Value
from .module import FuncOp


def reverse_postorder(entry: Block) -> list[Block]:
    """Blocks reachable from ``entry`` in reverse postorder (iterative DFS)."""
    seen = {id(entry)}
    post: list[Block] = []
    stack: list[tuple[Block, int]] = [(entry, 0)]
    succ_of: dict[int, list[Block]] = {}  # each block's successors, computed once
    while stack:
        block, i = stack.pop()
        succs = succ_of.get(id(block))
        if succs is None:
            succs = succ_of[id(block)] = block.successors
        if i < len(succs):
            stack.append((block, i + 1))
            nxt = succs[i]
            if id(nxt) not in seen:
                seen.add(id(nxt))
                stack.append((nxt, 0))
        else:
            post.append(block)
    return post[::-1]


class DominanceInfo:
    """Immediate dominators of ``func``'s reachable blocks, and dominance queries."""

    def __init__(self, func: FuncOp):
        self.order = reverse_postorder(func.entry)
        self.rpo_index = {id(b): i for i, b in enumerate(self.order)}
        preds: dict[int, list[Block]] = {id(b): [] for b in self.order}
        for b in self.order:
            for s in b.successors:
                preds[id(s)].append(b)
        entry = func.entry
        self.idom: dict[int, Block] = {id(entry): entry}
        changed = True
        while changed:
            changed = False
            for b in self.order[1:]:
                done = [p for p in preds[id(b)] if id(p) in self.idom]
                new = done[0]
                for p in done[1:]:
                    new = self._intersect(p, new)
                if self.idom.get(id(b)) is not new:
                    self.idom[id(b)] = new
                    changed = True
        self.op_index: dict[int, int] = {
            id(op): i for b in func.blocks for i, op in enumerate(b.ops)}

    def _intersect(self, a: Block, b: Block) -> Block:
        idx = self.rpo_index
        while a is not b:
            while idx[id(a)] > idx[id(b)]:
                a = self.idom[id(a)]
            while idx[id(b)] > idx[id(a)]:
                b = self.idom[id(b)]
        return a

    def is_reachable(self, block: Block) -> bool:
        return id(block) in self.idom

    def dominates(self, a: Block, b: Block) -> bool:
        """Whether every path from the entry to ``b`` passes through ``a``."""
        if not (self.is_reachable(a) and self.is_reachable(b)):
            return False
        while True:
            if b is a:
                return True
            parent = self.idom[id(b)]
            if parent is b:
                return False
            b = parent

    def value_dominates(self, value: Value, user: Operation) -> bool:
        """Whether ``value`` is available at ``user`` (uses in unreachable blocks
        are not checked, as in MLIR)."""
        use_block = user.parent
        assert use_block is not None
        if not self.is_reachable(use_block):
            return True
        if isinstance(value, BlockArgument):
            return self.dominates(value.block, use_block)
        if not isinstance(value, OpResult) or value.op.parent is None:
            return False
        def_block = value.op.parent
        if def_block is use_block:
            return self.op_index[id(value.op)] < self.op_index[id(user)]
        return self.dominates(def_block, use_block)
