"""``cse``: common subexpression elimination over the dominator tree.

Invariants: only pure ops without regions or successors are candidates; the key
is (name, operands by identity, attributes, result types), so two ops that differ
in an attribute or a type are never merged. A scoped table follows the dominator
tree: an op is replaced by an equal op of a dominating block (or earlier in its
own block), never by one on a sibling path.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.core import Block, Operation, Trait
from ..ir.dominance import DominanceInfo
from ..ir.module import FuncOp, ModuleOp
from ..records import record
from .base import Pass, PassContext, register_pass


def _freeze(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, float) and value != value:
        return ("nan",)
    return (type(value).__name__, value)


def op_key(op: Operation) -> tuple | None:
    if Trait.PURE not in op.traits or op.regions or op.successors or not op.results:
        return None
    attrs = tuple(sorted((k, _freeze(v)) for k, v in op.attributes.items()))
    return (op.name, tuple(id(v) for v in op.operands), attrs, op.result_types)


def cse_func(func: FuncOp) -> int:
    dom = DominanceInfo(func)
    children: dict[int, list[Block]] = {}
    for b in dom.order[1:]:
        children.setdefault(id(dom.idom[id(b)]), []).append(b)
    removed = 0
    stack: list[tuple[Block, dict]] = [(func.entry, {})]
    while stack:
        block, outer = stack.pop()
        table = dict(outer)  # scoped: a copy per dominator-tree node
        for op in list(block.ops):
            key = op_key(op)
            if key is None:
                continue
            prev = table.get(key)
            if prev is None:
                table[key] = op
                continue
            for old, new in zip(op.results, prev.results, strict=True):
                old.replace_all_uses_with(new)
            op.erase()
            removed += 1
        for child in children.get(id(block), []):
            stack.append((child, table))
    return removed


@register_pass
@record(frozen=True)
class CommonSubexpressionElimination(Pass):
    name = "cse"

    def run(self, module: ModuleOp, ctx: PassContext) -> None:
        for func in module:
            ctx.count("ops deduplicated", cse_func(func))
