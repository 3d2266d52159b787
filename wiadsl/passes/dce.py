"""``dce``: dead pure ops, unreachable blocks and unused block arguments.

Invariants: an op is dead when it is pure, not a terminator, and every result is
unused (after removing other dead ops: the walk goes backwards to a fixpoint). A
block argument is unused when nothing reads it; it is dropped together with the
matching value on every incoming edge (the entry block's arguments are the
function's parameters and stay).
"""

from __future__ import annotations

from ..ir.core import Block
from ..ir.dominance import reverse_postorder
from ..ir.module import FuncOp, ModuleOp
from ..records import record
from ..rewrite.pattern import is_trivially_dead
from ..rewrite.utils import erase_blocks
from .base import Pass, PassContext, register_pass


def remove_unreachable(func: FuncOp) -> int:
    reachable = {id(b) for b in reverse_postorder(func.entry)}
    dead = [b for b in func.blocks if id(b) not in reachable]
    erase_blocks(dead)
    return len(dead)


def remove_dead_ops(func: FuncOp) -> int:
    removed, changed = 0, True
    while changed:
        changed = False
        for block in reversed(func.blocks):
            for op in reversed(list(block.ops)):
                if is_trivially_dead(op):
                    op.erase()
                    removed += 1
                    changed = True
    return removed


def remove_unused_block_args(func: FuncOp) -> int:
    removed = 0
    for block in func.blocks[1:]:
        for arg in reversed(list(block.args)):
            if arg.uses:
                continue
            drop_block_arg(block, arg.index)
            removed += 1
    return removed


def drop_block_arg(block: Block, index: int) -> None:
    """Remove argument ``index`` of ``block`` and the value every edge passes for it."""
    for pred in block.predecessors:
        term = pred.terminator
        assert term is not None
        for i, s in enumerate(term.successors):
            if s.block is block:
                args = list(s.args)
                del args[index]
                term.set_successor(i, block, args)
    del block.args[index]
    for i, a in enumerate(block.args):
        a.index = i


@register_pass
@record(frozen=True)
class DeadCodeElimination(Pass):
    name = "dce"

    def run(self, module: ModuleOp, ctx: PassContext) -> None:
        for func in module:
            ctx.count("blocks removed", remove_unreachable(func))
            changed = True
            while changed:
                n_ops = remove_dead_ops(func)
                n_args = remove_unused_block_args(func)
                ctx.count("block args removed", n_args)
                changed = bool(n_ops or n_args)
