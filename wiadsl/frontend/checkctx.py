"""The state of checking one body (a kernel, a func instantiation, or a const).

Invariants:
- Errors and shape constraints go through ``report``/``apply``; while ``silent``
  is raised (the speculative passes of a loop's fixed point) both are dropped, so
  each error is reported from the final pass only.
- ``apply`` runs a pure rule and turns its ``RuleError`` into a spanned error and
  its constraints into spanned ``ShapeConstraint``\\ s.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Literal, Protocol

from .. import records
from ..diagnostics import Span, WiaError, WiaShapeError, WiaTypeError
from ..records import field, record
from . import ast
from .builtins import Operand, Static
from .scope import ModuleScope
from .typerules import UNKNOWN, RuleError, ShapeConstraint, ShapeRuleError, Type

BodyKind = Literal["kernel", "func", "const"]


class Services(Protocol):
    """What a body needs from the whole-program checker."""

    scopes: dict[str, ModuleScope]

    def call_func(self, ctx: BodyCtx, module: str, func: ast.Func, args: list[Operand],
                  call: ast.Call) -> Operand: ...

    def const_value(self, module: str, name: str, span: Span) -> Operand: ...

    def func_default(self, module: str, func: ast.Func, param: ast.FuncParam) -> Operand: ...


@record
class BodyCtx:
    """One body being checked. ``dims`` maps dim names to ``Sym`` or a bound extent."""

    services: Services
    scope: ModuleScope
    kind: BodyKind
    name: str
    dims: dict[str, Static] = field(default_factory=dict)
    outputs: dict[str, Type] = field(default_factory=dict)
    #: dims that only outputs declare: no input gives their extent, so they are no values
    output_only_dims: frozenset[str] = frozenset()
    returns: list[tuple[Operand, Span]] = field(default_factory=list)
    errors: list[WiaError] = field(default_factory=list)
    constraints: list[ShapeConstraint] = field(default_factory=list)
    silent: int = 0

    def report(self, error: WiaError) -> None:
        if not self.silent:
            self.errors.append(error)

    def report_all(self, errors: list[WiaError], constraints: list[ShapeConstraint]) -> None:
        for e in errors:
            self.report(e)
        for c in constraints:
            self.add_constraint(c)

    def add_constraint(self, c: ShapeConstraint) -> None:
        if not self.silent and c not in self.constraints:
            self.constraints.append(c)

    @contextlib.contextmanager
    def silenced(self) -> Iterator[None]:
        self.silent += 1
        try:
            yield
        finally:
            self.silent -= 1

    def apply(self, span: Span | Callable[[], Span], rule: Callable[[list[ShapeConstraint]], Type]) -> Type:
        """Run ``rule(constraints)``; a rule error becomes a spanned error and ``UNKNOWN``.
        ``span`` may be a function giving it: then it is computed only when an error or
        a constraint needs it (an operator's span costs a search of the source)."""
        local: list[ShapeConstraint] = []
        try:
            result = rule(local)
        except ShapeRuleError as e:
            self.report(WiaShapeError(e.message, span() if callable(span) else span))
            return UNKNOWN
        except RuleError as e:
            self.report(WiaTypeError(e.message, span() if callable(span) else span))
            return UNKNOWN
        if local:
            at = span() if callable(span) else span
            for c in local:
                self.add_constraint(records.replace(c, span=at))
        return result
