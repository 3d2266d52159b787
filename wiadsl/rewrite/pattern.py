"""Rewrite patterns and the greedy driver that applies them to a fixpoint.

Invariants:
- A ``RewritePattern`` matches one root op (``root`` names its op, or None for
  any op) and either rewrites through the ``PatternRewriter`` and returns True,
  or changes nothing and returns False.
- The driver keeps a worklist of ops; after a rewrite, the new ops and the users
  of replaced values are revisited. It also folds ops (``Operation.fold``) into
  constants and erases trivially dead pure ops, as MLIR's greedy driver does.
- Patterns an op owns come from ``type(op).canonicalization_patterns()`` when the
  op class defines it, plus the table ``OWNED`` (op name -> patterns) filled by
  modules that cannot edit the op classes; both are applied by ``canonicalize``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

import numpy as np

from ..ir.builder import Builder
from ..ir.core import Block, Operation, OpResult, Trait, Value
from ..ir.module import FuncOp, ModuleOp
from ..ir.types import TensorType

#: Largest tensor a fold may materialize as a constant (elements): bigger
#: results stay computed at run time instead of bloating the IR.
MAX_FOLD_ELEMENTS = 1 << 16


class RewritePattern(ABC):
    """One local rewrite; subclasses set ``root`` and implement ``match_and_rewrite``."""

    root: ClassVar[str | None] = None
    benefit: ClassVar[int] = 1

    @abstractmethod
    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> bool:
        """Rewrite ``op`` through ``rewriter`` when it matches; whether it did."""

    @property
    def label(self) -> str:
        return type(self).__name__


OWNED: dict[str, list[RewritePattern]] = {}


def owned_patterns(op_name: str, op_class: type[Operation]) -> list[RewritePattern]:
    own = getattr(op_class, "canonicalization_patterns", None)
    return [*(own() if own is not None else []), *OWNED.get(op_name, [])]


def is_trivially_dead(op: Operation) -> bool:
    """A pure, non-terminator op that cannot fail and whose results nobody reads."""
    return (Trait.PURE in op.traits and not op.is_terminator
            and all(not r.uses for r in op.results) and not op.may_trap())


class PatternRewriter:
    """The only way patterns mutate IR: keeps the driver's worklist informed."""

    def __init__(self, driver: GreedyDriver | None = None):
        self.driver = driver
        self.changed = False

    def builder_before(self, op: Operation) -> Builder:
        return Builder.before(op)

    def notify_new(self, op: Operation) -> None:
        self.changed = True
        if self.driver is not None:
            self.driver.push(op)

    def create_before(self, anchor: Operation, op_name: str, operands: Sequence[Value],
                      result_types: Sequence[Any], attributes: dict[str, Any] | None = None,
                      result_names: Sequence[str | None] | None = None) -> Operation:
        op = Builder.before(anchor).create(op_name, operands, result_types, attributes, (),
                                           result_names)
        op.loc = anchor.loc
        self.notify_new(op)
        return op

    def insert_before(self, anchor: Operation, op: Operation) -> Operation:
        anchor.insert_before(op)
        if op.loc is None:
            op.loc = anchor.loc
        self.notify_new(op)
        return op

    def replace_value(self, old: Value, new: Value) -> None:
        if old is new:
            return
        if self.driver is not None:
            for user in old.users:
                self.driver.push(user)
        if new.name_hint is None and old.name_hint is not None:
            new.name_hint = old.name_hint  # keep the source name readable
        old.replace_all_uses_with(new)
        self.changed = True

    def replace_op(self, op: Operation, new_values: Sequence[Value]) -> None:
        """Replace every result of ``op`` and erase it."""
        for old, new in zip(op.results, new_values, strict=True):
            self.replace_value(old, new)
        self.erase_op(op)

    def erase_op(self, op: Operation) -> None:
        if self.driver is not None:
            for v in op.all_operands:
                if isinstance(v, OpResult):
                    self.driver.push(v.op)
            self.driver.forget(op)
        op.erase()
        self.changed = True

    def constant(self, anchor: Operation, value: Any, type: Any) -> Value:
        """A constant of ``type`` right before ``anchor``."""
        v = Builder.before(anchor).constant(value, type)
        assert isinstance(v, OpResult)
        v.op.loc = anchor.loc
        self.notify_new(v.op)
        return v


class GreedyDriver:
    """Applies patterns, folding and trivial DCE over one function until nothing changes."""

    def __init__(self, patterns: Iterable[RewritePattern], fold: bool = True,
                 use_owned: bool = False, max_rewrites: int = 100_000):
        self.by_root: dict[str | None, list[RewritePattern]] = {}
        for p in patterns:
            self.by_root.setdefault(p.root, []).append(p)
        for plist in self.by_root.values():
            plist.sort(key=lambda p: -p.benefit)
        self.fold = fold
        self.use_owned = use_owned
        self.max_rewrites = max_rewrites
        self.worklist: list[Operation] = []
        self.queued: set[int] = set()
        self.applied: dict[str, int] = {}

    def push(self, op: Operation) -> None:
        if id(op) not in self.queued:
            self.queued.add(id(op))
            self.worklist.append(op)

    def forget(self, op: Operation) -> None:
        self.queued.discard(id(op))

    def run(self, func: FuncOp) -> bool:
        for block in reversed(func.blocks):
            for op in reversed(block.ops):
                self.push(op)
        self.worklist.reverse()  # process in program order first
        rewriter = PatternRewriter(self)
        budget = self.max_rewrites
        while self.worklist and budget > 0:
            op = self.worklist.pop()
            if id(op) not in self.queued:
                continue
            self.queued.discard(id(op))
            if op.parent is None or op.parent.parent is not func.body:
                continue
            if self.visit(op, rewriter):
                budget -= 1
        return rewriter.changed

    def visit(self, op: Operation, rewriter: PatternRewriter) -> bool:
        if is_trivially_dead(op):
            rewriter.erase_op(op)
            self.count("dce")
            return True
        if self.fold and self.try_fold(op, rewriter):
            self.count("fold")
            return True
        patterns = [*self.by_root.get(op.name, []), *self.by_root.get(None, [])]
        if self.use_owned:
            patterns = owned_patterns(op.name, type(op)) + patterns
        for p in patterns:
            if p.match_and_rewrite(op, rewriter):
                self.count(p.label)
                return True
        return False

    def count(self, label: str) -> None:
        self.applied[label] = self.applied.get(label, 0) + 1

    def try_fold(self, op: Operation, rewriter: PatternRewriter) -> bool:
        if Trait.PURE not in op.traits or not op.results or op.name in (
                "arith.constant", "tensor.constant"):
            return False
        values = op.fold()
        if values is None:
            return False
        for r in op.results:
            if isinstance(r.type, TensorType) and np.size(values[op.results.index(r)]) > MAX_FOLD_ELEMENTS:
                return False
        new = [rewriter.constant(op, v, r.type) for v, r in zip(values, op.results, strict=True)]
        rewriter.replace_op(op, new)
        return True


def apply_patterns_greedily(target: ModuleOp | FuncOp, patterns: Iterable[RewritePattern],
                            fold: bool = True, use_owned: bool = False) -> dict[str, int]:
    """Run the greedy driver on every function; how often each pattern applied."""
    funcs = list(target) if isinstance(target, ModuleOp) else [target]
    patterns = list(patterns)
    total: dict[str, int] = {}
    for f in funcs:
        driver = GreedyDriver(patterns, fold, use_owned)
        driver.run(f)
        for k, v in driver.applied.items():
            total[k] = total.get(k, 0) + v
    return total


def block_of(op: Operation) -> Block:
    assert op.parent is not None
    return op.parent
