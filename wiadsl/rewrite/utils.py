"""IR surgery shared by passes: cloning ops, erasing blocks, CFG edits.

Invariants:
- ``clone_op`` maps operands through ``mapping`` (values not in it are kept),
  clones regions recursively and records result -> clone in ``mapping``.
- ``erase_blocks`` drops every reference of the blocks' ops first, so blocks
  that use each other's values can be erased together.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..ir.core import Block, Operation, OpResult, Region, Value
from ..ir.ops import op_class


def clone_op(op: Operation, mapping: dict[int, Value],
             block_map: dict[int, Block] | None = None) -> Operation:
    """A detached copy of ``op`` reading mapped operands and targeting mapped blocks."""
    def get(v: Value) -> Value:
        return mapping.get(id(v), v)

    succs = [((block_map or {}).get(id(s.block), s.block), [get(a) for a in s.args])
             for s in op.successors]
    regions = [clone_region(r, mapping) for r in op.regions]
    new = op_class(op.name)([get(v) for v in op.operands], list(op.result_types),
                            _copy_attrs(op.attributes), succs, regions,
                            [r.name_hint for r in op.results])
    new.loc = op.loc
    for old, res in zip(op.results, new.results, strict=True):
        mapping[id(old)] = res
    return new


def _copy_attrs(attrs: dict[str, Any]) -> dict[str, Any]:
    return {k: (list(v) if isinstance(v, list) else v) for k, v in attrs.items()}


def clone_region(region: Region, mapping: dict[int, Value]) -> Region:
    blocks = []
    for block in region.blocks:
        nb = Block(block.arg_types, [a.name_hint for a in block.args], block.name_hint)
        for a, na in zip(block.args, nb.args, strict=True):
            mapping[id(a)] = na
        blocks.append((block, nb))
    for block, nb in blocks:
        for op in block.ops:
            nb.append(clone_op(op, mapping))
    return Region([nb for _, nb in blocks])


def erase_blocks(blocks: Iterable[Block]) -> None:
    """Remove blocks (and their ops) from their region, whatever uses what."""
    blocks = list(blocks)
    for b in blocks:
        for op in b.ops:
            op.drop_all_references()
    for b in blocks:
        for op in list(b.ops):
            for r in op.results:
                for use in list(r.uses):
                    # Reachable code cannot read a value of a dead block (dominance),
                    # so remaining readers are themselves dead ops elsewhere.
                    use.owner.drop_all_references()
            op.detach()
        if b.parent is not None:
            b.parent.remove_block(b)


def producer(value: Value) -> Operation | None:
    return value.op if isinstance(value, OpResult) else None


def single_user(value: Value) -> Operation | None:
    users = value.users
    return users[0] if len(users) == 1 else None


def replace_terminator_edge(block: Block, old: Block, new: Block, args: list[Value]) -> None:
    """Retarget every edge of ``block``'s terminator from ``old`` to ``new`` with ``args``."""
    term = block.terminator
    assert term is not None
    for i, s in enumerate(term.successors):
        if s.block is old:
            term.set_successor(i, new, args)


def value_in(value: Value, block_ids: set[int]) -> bool:
    """Whether ``value`` is defined in one of the blocks (ids) given."""
    from ..ir.core import value_block
    b = value_block(value)
    return b is not None and id(b) in block_ids
