"""The per-element expression DAG a loop kernel computes, and the kernel specs built from it.

A loop kernel iterates over a *domain* (a shape); its leading ``n_outer`` axes
are rows (one block per row when there are reduction stages), the rest columns.
Every tensor it reads or writes is a ``TensorArg``: a device buffer seen through
strides per domain axis (0 = broadcast) and an element offset, so transposes,
slices, broadcasts and reshapes of contiguous data are free views.

Invariants:
- Nodes are compared by identity (a DAG; shared nodes are computed once).
- ``Stage(i)`` is only valid after stage ``i`` has been reduced (row kernels),
  and stage ``i``'s own expression only uses ``Stage(j)`` with ``j < i``.
- Outputs of a row kernel either cover the domain (strides over every axis) or
  hold one value per row (a ``Stage`` node; strides 0 on the column axes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...dtypes import DType
from .symbolic import Sym


@dataclass(eq=False)
class Node:
    dtype: DType


@dataclass(eq=False)
class Load(Node):
    """Element of input ``arg`` at the current domain point."""

    arg: int


@dataclass(eq=False)
class Scalar(Node):
    """Scalar kernel parameter ``arg`` (a host value)."""

    arg: int


@dataclass(eq=False)
class Const(Node):
    value: Any


@dataclass(eq=False)
class Iota(Node):
    """The coordinate along domain axis ``axis``."""

    axis: int


@dataclass(eq=False)
class Apply(Node):
    """A scalar op: an elementwise fn name, ``cmp``, ``select`` or ``cast``."""

    fn: str
    args: list[Node]
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass(eq=False)
class Acc(Node):
    """The product accumulator of a matmul/conv kernel's epilogue."""


@dataclass(eq=False)
class Stage(Node):
    """The reduced value of reduction stage ``index`` for the current row."""

    index: int


@dataclass(frozen=True)
class TensorArg:
    """A buffer seen through ``strides`` (elements, one per domain axis) and ``offset``."""

    buffer: str
    dtype: DType
    strides: tuple[Sym, ...]
    offset: Sym = 0
    #: Zero-padding guards: (((axis, coef), ...), bias, limit): the element exists
    #: only where 0 <= sum(coef * coord[axis]) + bias < limit (else it reads as 0).
    guards: tuple[tuple[tuple[tuple[int, int], ...], int, Sym], ...] = ()


@dataclass(frozen=True)
class ScalarArg:
    """A host scalar (plan name) or a literal, passed by value."""

    value: str | int | float
    dtype: DType


REDUCE_KINDS = ("sum", "prod", "max", "min", "mean", "argmax", "argmin")


@dataclass
class ReduceStage:
    """One reduction over the column axes: ``kind`` of ``expr`` (in ``acc`` dtype)."""

    kind: str
    expr: Node
    dtype: DType


@dataclass
class LoopSpec:
    """A fused elementwise or row kernel."""

    name: str
    domain: tuple[Sym, ...]
    n_outer: int
    inputs: list[TensorArg] = field(default_factory=list)
    scalars: list[ScalarArg] = field(default_factory=list)
    stages: list[ReduceStage] = field(default_factory=list)
    outputs: list[tuple[Node, TensorArg]] = field(default_factory=list)

    @property
    def is_row(self) -> bool:
        return bool(self.stages)

    def add_input(self, arg: TensorArg) -> int:
        if arg not in self.inputs:
            self.inputs.append(arg)
        return self.inputs.index(arg)

    def add_scalar(self, arg: ScalarArg) -> int:
        if arg not in self.scalars:
            self.scalars.append(arg)
        return self.scalars.index(arg)


def walk(roots: list[Node]) -> list[Node]:
    """Every node reachable from ``roots``, operands before users."""
    seen: set[int] = set()
    order: list[Node] = []

    def visit(n: Node) -> None:
        if id(n) in seen:
            return
        seen.add(id(n))
        for a in n.args if isinstance(n, Apply) else []:
            visit(a)
        order.append(n)

    for r in roots:
        visit(r)
    return order
