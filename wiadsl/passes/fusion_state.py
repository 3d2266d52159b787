"""Shared state and legality helpers of the ``fuse`` steps (one block at a time).

Invariants:
- ``FusionState.pos`` is the op order of the block as of the last ``renumber``;
  steps renumber after every rewrite that inserts or erases ops.
- ``escape_reason`` is the seed's ``can_fuse`` core: a value may be folded into
  a fused op only when every reader is inside that op; otherwise it names why.
- ``replace_and_erase`` leaves no use of an erased op behind (it asserts so).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeGuard

from ..ir.core import Block, Operation, OpResult, Value
from ..records import field, record
from .base import PassContext
from .extents import Extents
from .fusion_body import is_fusible

if TYPE_CHECKING:
    from .fuse import Fuse


def vname(v: Value) -> str:
    return "%" + (v.name_hint or "?")


def producer(v: Value) -> Operation | None:
    return v.op if isinstance(v, OpResult) else None


def short_name(op: Operation) -> str:
    return op.name.split(".", 1)[1]


def escape_reason(v: Value, allowed: set[int]) -> str | None:
    """Why ``v`` must stay materialized (None: every reader is in ``allowed``)."""
    others = [u for u in v.users if id(u) not in allowed]
    if not others:
        return None
    if any(u.is_terminator for u in others):
        return f"{vname(v)} escapes (returned or passed to another block)"
    return f"{vname(v)} has {len(v.users)} consumers"


@record
class FusionState:
    """One block being fused: its context, the pass options and the op order."""

    block: Block
    ctx: PassContext
    opts: Fuse
    pos: dict[int, int] = field(default_factory=dict)

    def renumber(self) -> None:
        self.pos = {id(op): i for i, op in enumerate(self.block.ops)}

    def ordered(self, ops) -> list[Operation]:
        return sorted(ops, key=lambda o: self.pos[id(o)])

    def same_block_fusible(self, op: Operation | None) -> TypeGuard[Operation]:
        return op is not None and op.parent is self.block and is_fusible(op)

    def extents(self) -> Extents:
        """A fresh symbolic-extent analysis (answers reflect the IR as it is now)."""
        return Extents()

    def defined_before(self, x: Value, op: Operation) -> bool:
        p = producer(x)
        if p is None or p.parent is not self.block:
            return True  # block arguments and values of dominating blocks
        return self.pos.get(id(p), 1 << 30) < self.pos[id(op)]


def adopt_loc(fused: Operation, loc: object) -> None:
    """Give ``fused`` and every body op without a location ``loc`` (the root's)."""
    fused.loc = loc
    for region in fused.regions:
        for b in region.blocks:
            for op in b.ops:
                if op.loc is None:
                    op.loc = loc


def op_names(ops) -> str:
    """``%hb, %r`` for a remark: result names, or the op kind for unnamed ones."""
    names = [("%" + op.results[0].name_hint) if op.results and op.results[0].name_hint
             else short_name(op) for op in ops]
    return ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")


def replace_and_erase(ops: list[Operation], results: list[Value], new: list[Value]) -> None:
    """Point every use of ``results`` at ``new`` and erase ``ops`` (last first)."""
    for old, nv in zip(results, new, strict=True):
        if nv.name_hint is None:
            nv.name_hint = old.name_hint
        old.replace_all_uses_with(nv)
    for op in reversed(ops):
        for r in op.results:
            for u in list(r.uses):
                raise AssertionError(f"fusion left a use of {op.name} in {u.owner.name}")
        op.erase()
