"""Functions and modules: the IR's top level (kept out of core.py for size).

Invariants:
- A ``FuncOp``'s entry block arguments *are* its parameters: their types are
  ``arg_types`` and their name hints are the parameter names.
- ``result_types`` is the signature every ``func.return`` must match.
- A ``ModuleOp`` holds functions in insertion order with unique names.
- Function attributes are plain values: ``kernel`` (bool: a user entry point),
  ``outputs`` (list of output names, in declaration order), others free-form.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from ..diagnostics import WiaIRError
from .core import Block, BlockArgument, Operation, Region
from .types import IRType


class FuncOp:
    """A function: a symbol name, a signature, attributes and a body region."""

    def __init__(self, name: str, arg_types: Sequence[IRType], result_types: Sequence[IRType],
                 arg_names: Sequence[str | None] | None = None,
                 attributes: dict[str, Any] | None = None, entry_name: str | None = "entry"):
        self.name = name
        self.result_types: tuple[IRType, ...] = tuple(result_types)
        self.attributes: dict[str, Any] = dict(attributes or {})
        self.parent: ModuleOp | None = None
        self.body = Region()
        self.body.parent = self
        self.body.add_block(Block(arg_types, arg_names, name_hint=entry_name))

    @property
    def entry(self) -> Block:
        return self.body.entry

    @property
    def args(self) -> list[BlockArgument]:
        return self.entry.args

    @property
    def arg_types(self) -> tuple[IRType, ...]:
        return self.entry.arg_types

    @property
    def arg_names(self) -> tuple[str | None, ...]:
        return tuple(a.name_hint for a in self.args)

    @property
    def blocks(self) -> list[Block]:
        return self.body.blocks

    @property
    def is_kernel(self) -> bool:
        return bool(self.attributes.get("kernel", False))

    def add_block(self, arg_types: Sequence[IRType] = (), arg_names: Sequence[str | None] | None = None,
                  name_hint: str | None = None) -> Block:
        """Append a new block with arguments to the body."""
        return self.body.add_block(Block(arg_types, arg_names, name_hint))

    def walk(self) -> Iterator[Operation]:
        return self.body.walk()

    def __str__(self) -> str:
        from .printer import print_func
        return print_func(self)

    def __repr__(self) -> str:
        return f"<FuncOp @{self.name} {len(self.blocks)} blocks>"


class ModuleOp:
    """An ordered set of uniquely named functions."""

    def __init__(self, funcs: Sequence[FuncOp] = ()):
        self._funcs: dict[str, FuncOp] = {}
        for f in funcs:
            self.add(f)

    def add(self, func: FuncOp) -> FuncOp:
        if func.name in self._funcs:
            raise WiaIRError(f"duplicate function @{func.name}")
        func.parent = self
        self._funcs[func.name] = func
        return func

    def remove(self, name: str) -> FuncOp:
        func = self._funcs.pop(name)
        func.parent = None
        return func

    def get(self, name: str) -> FuncOp | None:
        return self._funcs.get(name)

    def __getitem__(self, name: str) -> FuncOp:
        func = self._funcs.get(name)
        if func is None:
            raise WiaIRError(f"no function @{name} in module")
        return func

    def __contains__(self, name: str) -> bool:
        return name in self._funcs

    def __iter__(self) -> Iterator[FuncOp]:
        return iter(list(self._funcs.values()))

    def __len__(self) -> int:
        return len(self._funcs)

    @property
    def funcs(self) -> list[FuncOp]:
        return list(self._funcs.values())

    def __str__(self) -> str:
        from .printer import print_module
        return print_module(self)
