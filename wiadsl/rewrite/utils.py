"""IR surgery shared by passes: erasing blocks, CFG edits (cloning ops is the
IR's own: ``ir/copying.py``).

Invariants:
- ``erase_blocks`` drops every reference of the blocks' ops first, so blocks
  that use each other's values can be erased together.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..ir.core import Block, Operation, OpResult, Value


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
