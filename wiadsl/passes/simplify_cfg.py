"""``simplify-cfg``: merge straight-line blocks and remove forwarding blocks.

Invariants:
- A block B (not the entry) whose only predecessor P ends in ``br ^B(vals)`` is
  merged into P: B's arguments are replaced by ``vals`` and B's ops move to P.
- A forwarding block F (only ``br ^T(args)``, T not F) is bypassed: each edge
  P -> F(vals) becomes P -> T(args with F's arguments replaced by vals). Values F
  forwards that it did not receive dominate F, hence every predecessor of F.
- Unreachable blocks are removed.
"""

from __future__ import annotations

from ..ir.core import Block
from ..ir.module import FuncOp, ModuleOp
from ..records import record
from .base import Pass, PassContext, register_pass
from .dce import remove_unreachable


def merge_into_predecessor(func: FuncOp, block: Block) -> bool:
    preds = block.predecessors
    if block is func.entry or len(preds) != 1:
        return False
    pred = preds[0]
    term = pred.terminator
    if pred is block or term is None or term.name != "cf.br":
        return False
    (succ,) = term.successors
    for arg, value in zip(block.args, succ.args, strict=True):
        arg.replace_all_uses_with(value)
    term.erase()
    for op in list(block.ops):
        op.detach()
        pred.append(op)
    func.body.remove_block(block)
    return True


def bypass_forwarder(func: FuncOp, block: Block) -> bool:
    if block is func.entry or len(block.ops) != 1 or block.ops[0].name != "cf.br":
        return False
    br = block.ops[0]
    (out,) = br.successors
    if out.block is block or not block.predecessors:
        return False
    if any(u is not br for a in block.args for u in a.users):
        return False  # an argument read past the branch must stay a block argument
    for pred in block.predecessors:
        term = pred.terminator
        assert term is not None
        for i, s in enumerate(term.successors):
            if s.block is block:
                mapping = {id(a): v for a, v in zip(block.args, s.args, strict=True)}
                term.set_successor(i, out.block, [mapping.get(id(v), v) for v in out.args])
    return True


def simplify_func(func: FuncOp) -> int:
    changes, changed = 0, True
    while changed:
        changed = bool(remove_unreachable(func))
        for block in list(func.blocks):
            if block.parent is None:
                continue
            if merge_into_predecessor(func, block) or bypass_forwarder(func, block):
                changes += 1
                changed = True
    return changes


@register_pass
@record(frozen=True)
class SimplifyCFG(Pass):
    name = "simplify-cfg"

    def run(self, module: ModuleOp, ctx: PassContext) -> None:
        for func in module:
            ctx.count("blocks simplified", simplify_func(func))
