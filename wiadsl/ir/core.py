"""The SSA IR's structure: values, operations, blocks and regions.

Invariants:
- Every ``Value`` is defined once: an ``OpResult`` of one operation or a
  ``BlockArgument`` of one block. ``value.uses`` lists exactly the operand
  slots (``Use``) that currently read it, so ``replace_all_uses_with`` is exact.
- An operation's operand list is flat: its regular operands followed by the
  arguments of each successor (MLIR's successor operands); ``operands`` and
  ``successors`` are views over it.
- An operation belongs to at most one block (``parent``); a block to at most one
  region. Ops are created detached and placed with ``Block.append``/``insert``
  or ``Builder``.
- Op kinds are subclasses registered by name (``ops.OPS``); ``Operation`` itself
  holds no per-kind logic beyond the ``verify``/``fold`` hooks.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from enum import Enum
from typing import Any, ClassVar

from ..diagnostics import WiaIRError
from ..records import record
from .types import IRType


class Trait(Enum):
    """Static properties of an op kind that passes query instead of op names."""

    PURE = "pure"                # no side effects: may be removed if unused, CSE'd, hoisted
    TERMINATOR = "terminator"    # must end its block
    COMMUTATIVE = "commutative"  # operands 0 and 1 may be swapped
    ELEMENTWISE = "elementwise"  # result[i] depends on operand[i] only (with broadcasting)


@record(frozen=True, eq=False)
class Use:
    """One operand slot: ``owner.all_operands[index]`` reads the value."""

    owner: Operation
    index: int


class Value:
    """An SSA value: a ``type``, an optional printer ``name_hint``, and its uses."""

    def __init__(self, type: IRType, name_hint: str | None = None):
        self.type = type
        self.name_hint = name_hint
        self.uses: list[Use] = []

    @property
    def has_uses(self) -> bool:
        return bool(self.uses)

    @property
    def users(self) -> list[Operation]:
        """The distinct operations reading this value, in use order."""
        seen: dict[int, Operation] = {}
        for u in self.uses:
            seen.setdefault(id(u.owner), u.owner)
        return list(seen.values())

    def replace_all_uses_with(self, other: Value) -> None:
        """Make every reader of ``self`` read ``other`` instead."""
        if other is self:
            return
        for use in list(self.uses):
            use.owner.set_operand(use.index, other)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} %{self.name_hint or '?'}: {self.type}>"


class OpResult(Value):
    """Result ``index`` of ``op``."""

    def __init__(self, type: IRType, op: Operation, index: int, name_hint: str | None = None):
        super().__init__(type, name_hint)
        self.op = op
        self.index = index


class BlockArgument(Value):
    """Argument ``index`` of ``block`` (the IR's phi nodes; a func's entry args)."""

    def __init__(self, type: IRType, block: Block, index: int, name_hint: str | None = None):
        super().__init__(type, name_hint)
        self.block = block
        self.index = index


@record(frozen=True)
class Successor:
    """A read-only view of one CFG edge: the target block and the values it passes."""

    block: Block
    args: tuple[Value, ...]


class Operation:
    """An operation instance. Subclasses set ``name`` and ``traits`` and may
    override ``verify`` (raise ``WiaIRError``) and ``fold``."""

    name: ClassVar[str] = ""
    traits: ClassVar[frozenset[Trait]] = frozenset()
    #: Optional source location (a ``diagnostics.Span``) of the code this op came
    #: from; set by the lowering, kept by passes, read by optimization remarks.
    loc: Any = None

    def __init__(self, operands: Sequence[Value] = (), result_types: Sequence[IRType] = (),
                 attributes: dict[str, Any] | None = None,
                 successors: Sequence[tuple[Block, Sequence[Value]]] = (),
                 regions: Sequence[Region] = (), result_names: Sequence[str | None] | None = None):
        names = list(result_names) if result_names is not None else [None] * len(result_types)
        self.results = [OpResult(t, self, i, n) for i, (t, n) in enumerate(zip(result_types, names, strict=False))]
        self.attributes: dict[str, Any] = dict(attributes or {})
        self.parent: Block | None = None
        self.regions: list[Region] = []
        for r in regions:
            r.parent = self
            self.regions.append(r)
        self._operands: list[Value] = []
        self._num_regular = 0
        self._succ_blocks: list[Block] = []
        self._succ_sizes: list[int] = []
        self._set_all(list(operands), [(b, list(a)) for b, a in successors])

    # ----------------------------------------------------------- operands

    def _set_all(self, operands: list[Value], succs: list[tuple[Block, list[Value]]]) -> None:
        """Replace every operand and successor, keeping use lists exact."""
        self._drop_uses()
        flat = list(operands)
        for _, args in succs:
            flat.extend(args)
        self._operands = flat
        self._num_regular = len(operands)
        self._succ_blocks = [b for b, _ in succs]
        self._succ_sizes = [len(a) for _, a in succs]
        for i, v in enumerate(flat):
            if not isinstance(v, Value):
                raise TypeError(f"operand {i} of {self.name} is {v!r}, not a Value")
            v.uses.append(Use(self, i))

    def _drop_uses(self) -> None:
        for i, v in enumerate(self._operands):
            v.uses[:] = [u for u in v.uses if not (u.owner is self and u.index == i)]

    @property
    def operands(self) -> tuple[Value, ...]:
        """The regular operands (not the successor arguments)."""
        return tuple(self._operands[: self._num_regular])

    @property
    def all_operands(self) -> tuple[Value, ...]:
        """Regular operands followed by every successor's arguments."""
        return tuple(self._operands)

    def set_operand(self, index: int, value: Value) -> None:
        """Set slot ``index`` of ``all_operands``."""
        old = self._operands[index]
        old.uses[:] = [u for u in old.uses if not (u.owner is self and u.index == index)]
        self._operands[index] = value
        value.uses.append(Use(self, index))

    def set_operands(self, operands: Sequence[Value]) -> None:
        self._set_all(list(operands), [(s.block, list(s.args)) for s in self.successors])

    @property
    def successors(self) -> tuple[Successor, ...]:
        out, pos = [], self._num_regular
        for block, size in zip(self._succ_blocks, self._succ_sizes, strict=False):
            out.append(Successor(block, tuple(self._operands[pos:pos + size])))
            pos += size
        return tuple(out)

    @property
    def successor_blocks(self) -> tuple[Block, ...]:
        """The target blocks alone (what CFG walks need, without their arguments)."""
        return tuple(self._succ_blocks)

    def set_successor(self, index: int, block: Block, args: Sequence[Value]) -> None:
        succs = [(s.block, list(s.args)) for s in self.successors]
        succs[index] = (block, list(args))
        self._set_all(list(self.operands), succs)

    # ------------------------------------------------------------ results

    @property
    def result(self) -> OpResult:
        """The only result; an error for ops with zero or several results."""
        if len(self.results) != 1:
            raise WiaIRError(f"'{self.name}' has {len(self.results)} results, not 1")
        return self.results[0]

    @property
    def result_types(self) -> tuple[IRType, ...]:
        return tuple(r.type for r in self.results)

    @property
    def operand_types(self) -> tuple[IRType, ...]:
        return tuple(v.type for v in self.operands)

    # ------------------------------------------------------------- traits

    @classmethod
    def has_trait(cls, trait: Trait) -> bool:
        return trait in cls.traits

    @property
    def is_terminator(self) -> bool:
        return Trait.TERMINATOR in self.traits

    # -------------------------------------------------------------- hooks

    @classmethod
    def short_form_results(cls, operand_type: IRType, num_results: int) -> list[IRType]:
        """The result types the one-type text form ``: T`` stands for when every
        operand has type ``T``. Default: every result is ``T`` too."""
        return [operand_type] * num_results

    def verify(self) -> None:
        """Check operand/result counts and types and attributes; raise WiaIRError."""

    def fold(self) -> list[Any] | None:
        """Constant results (NumPy scalars/arrays) when every needed operand is a
        constant, else None. Default: never folds."""
        return None

    def may_trap(self) -> bool:
        """Whether running the op can raise a runtime error (an index out of range, a
        reduction over no elements, extents that disagree only at run time).

        Errors are part of a program's meaning: DCE keeps such an op even when nothing
        reads its results, so a program fails alike at -O0 and -O3. Ops whose checks
        the types already decide (static shapes, constant indices) answer False.
        """
        return False

    def evaluate(self, args: list[Any]) -> list[Any]:
        """NumPy semantics: operand values in (arrays / NumPy scalars), result
        values out, each already in its result type's storage. Control-flow ops
        are run by the interpreter instead."""
        raise WiaIRError(f"'{self.name}' has no evaluation semantics")

    def error(self, message: str) -> WiaIRError:
        """An error naming this op, for ``verify`` to raise."""
        return WiaIRError(f"'{self.name}' op {message}")

    # ---------------------------------------------------------- placement

    def detach(self) -> Operation:
        """Remove from the parent block, keeping operands and uses."""
        if self.parent is not None:
            self.parent.ops.remove(self)
            self.parent = None
        return self

    def erase(self) -> None:
        """Detach and drop operand uses; the results must be unused."""
        for r in self.results:
            if r.uses:
                raise WiaIRError(f"cannot erase '{self.name}': result still has uses")
        self.detach()
        self._drop_uses()
        self._operands = []

    def drop_all_references(self) -> None:
        """Forget every operand and successor (their use lists too), as MLIR's
        ``dropAllReferences``: lets a group of ops that use each other be erased."""
        self._set_all([], [])

    def insert_before(self, op: Operation) -> None:
        """Insert ``op`` (detached) right before ``self``."""
        assert self.parent is not None
        self.parent.insert(self.parent.ops.index(self), op)

    def insert_after(self, op: Operation) -> None:
        assert self.parent is not None
        self.parent.insert(self.parent.ops.index(self) + 1, op)

    def __repr__(self) -> str:
        return f"<{self.name} {len(self._operands)} operands -> {list(map(str, self.result_types))}>"


class Block:
    """A straight-line list of ops ending in one terminator; ``args`` are its phis."""

    def __init__(self, arg_types: Sequence[IRType] = (), arg_names: Sequence[str | None] | None = None,
                 name_hint: str | None = None):
        self.args: list[BlockArgument] = []
        self.ops: list[Operation] = []
        self.parent: Region | None = None
        self.name_hint = name_hint
        names = list(arg_names) if arg_names is not None else [None] * len(arg_types)
        for t, n in zip(arg_types, names, strict=False):
            self.add_arg(t, n)

    def add_arg(self, type: IRType, name_hint: str | None = None) -> BlockArgument:
        arg = BlockArgument(type, self, len(self.args), name_hint)
        self.args.append(arg)
        return arg

    @property
    def arg_types(self) -> tuple[IRType, ...]:
        return tuple(a.type for a in self.args)

    def append(self, op: Operation) -> Operation:
        return self.insert(len(self.ops), op)

    def insert(self, index: int, op: Operation) -> Operation:
        if op.parent is not None:
            raise WiaIRError(f"'{op.name}' is already in a block; detach it first")
        self.ops.insert(index, op)
        op.parent = self
        return op

    @property
    def terminator(self) -> Operation | None:
        """The last op when it is a terminator, else None (block under construction)."""
        return self.ops[-1] if self.ops and self.ops[-1].is_terminator else None

    @property
    def successors(self) -> list[Block]:
        term = self.terminator
        return list(term.successor_blocks) if term else []

    @property
    def predecessors(self) -> list[Block]:
        """Blocks of the same region whose terminator targets this one (once each)."""
        if self.parent is None:
            return []
        return [b for b in self.parent.blocks if any(s is self for s in b.successors)]

    def __repr__(self) -> str:
        return f"<Block ^{self.name_hint or '?'} {len(self.ops)} ops>"


class Region:
    """An ordered list of blocks; the first is the entry block."""

    def __init__(self, blocks: Sequence[Block] = ()):
        self.blocks: list[Block] = []
        self.parent: Any = None
        for b in blocks:
            self.add_block(b)

    def add_block(self, block: Block, index: int | None = None) -> Block:
        if block.parent is not None:
            raise WiaIRError("block already belongs to a region")
        block.parent = self
        self.blocks.insert(len(self.blocks) if index is None else index, block)
        return block

    def remove_block(self, block: Block) -> None:
        self.blocks.remove(block)
        block.parent = None

    @property
    def entry(self) -> Block:
        return self.blocks[0]

    def walk(self) -> Iterator[Operation]:
        """Every op, in block order then op order (a snapshot: safe to mutate)."""
        for block in list(self.blocks):
            yield from list(block.ops)


def defining_op(value: Value) -> Operation | None:
    """The op that defines ``value``, or None for a block argument."""
    return value.op if isinstance(value, OpResult) else None


def value_block(value: Value) -> Block | None:
    """The block in which ``value`` is defined (None for a detached op's result)."""
    if isinstance(value, BlockArgument):
        return value.block
    assert isinstance(value, OpResult)
    return value.op.parent


def walk_nested(blocks: Sequence[Block]) -> Iterator[Operation]:
    """Every op of ``blocks`` and, after each op, the ops of its regions (pre-order)."""
    for block in list(blocks):
        for op in list(block.ops):
            yield op
            for region in op.regions:
                yield from walk_nested(region.blocks)
