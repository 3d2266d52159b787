"""Terms: a normal form of the values of one block, for recognizing computations by rule.

Two values with equal terms compute equal values, whatever ops the -O level left
between them: an elementwise op (``tensor.X``, or ``arith.X`` inside a fused body)
is ``Fn(X, args)``; a keepdims reduction over the last axis (``reduce_max`` /
``reduce_sum``, or a reduction result of ``fused_reduce``) is ``Red(kind, arg)``; a
fused op's body is expanded on its operands' terms (so -O2's ``fused_matmul`` and
``fused_reduce`` give the terms of -O0's op chain); a matmul is ``Prod``; ``arange``
(start 0, step 1) is ``Idx(-1)``, reshaped to a column ``Idx(-2)`` (the coordinate
along an axis counted from the end); a literal is ``Num``; anything else, and any
value from another block, is an opaque ``Leaf``.

Invariants:
- ``Normalizer.visited`` holds exactly the ops a term looked through (not leaves).
- Terms are frozen dataclasses compared structurally; a Leaf compares by value id.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ....ir.core import Block, Operation, Value, defining_op
from ....ir.ops import ELEMENTWISE_BY_NAME
from ....ir.types import TensorType

PRODUCTS = ("tensor.matmul", "tensor.fused_matmul")


@dataclass(frozen=True)
class Term:
    """A value in normal form; equal terms compute equal values."""


@dataclass(frozen=True)
class Leaf(Term):
    """An opaque value (a kernel input, a host scalar, anything not looked through)."""

    key: int
    value: Value = field(compare=False, hash=False)


@dataclass(frozen=True)
class Num(Term):
    """A literal."""

    value: float | int


@dataclass(frozen=True)
class Fn(Term):
    """An elementwise op; ``attr`` is a comparison's predicate or a cast's dtype."""

    fn: str
    args: tuple[Term, ...]
    attr: str = ""


@dataclass(frozen=True)
class Red(Term):
    """A keepdims reduction of ``arg`` over the last axis."""

    kind: str
    arg: Term


@dataclass(frozen=True)
class Idx(Term):
    """The coordinate along axis ``pos`` (negative: from the end) of an ``arange`` of
    extent ``extent`` (a Leaf or Num of the arange's operand)."""

    pos: int
    extent: Term


@dataclass(frozen=True)
class Prod(Term):
    """The accumulator of the matmul op with id ``key``."""

    key: int


class Normalizer:
    """Terms of the values of one block; records the ops it looked through."""

    def __init__(self, block: Block):
        self.block = block
        self.memo: dict[int, Term] = {}
        self.visited: dict[int, Operation] = {}
        self.products: dict[int, Operation] = {}

    def of(self, v: Value) -> Term:
        if id(v) not in self.memo:
            self.memo[id(v)] = self._build(v)
        return self.memo[id(v)]

    def _build(self, v: Value) -> Term:
        op = defining_op(v)
        if op is None or op.parent is not self.block:
            return Leaf(id(v), v)
        if not isinstance(v.type, TensorType):
            if op.name == "arith.constant":
                return Num(op.attributes["value"])
            return Leaf(id(v), v)
        term = self._tensor(op, v)
        if term is None:
            return Leaf(id(v), v)
        self.visited[id(op)] = op
        return term

    def _tensor(self, op: Operation, v: Value) -> Term | None:
        name = op.name
        if name in PRODUCTS:
            self.products[id(op)] = op
            if name == "tensor.matmul":
                return Prod(id(op))
            args = [Prod(id(op)), *(self.of(x) for x in op.operands[2:])]
            return expand(op.regions[0].blocks[0], args)[0]
        if name == "tensor.fused_elementwise" and len(op.results) == 1:
            return expand(op.regions[0].blocks[0], [self.of(x) for x in op.operands])[0]
        if name == "tensor.fused_reduce":
            return self._fused_reduce(op, v)
        if name in ("tensor.reduce_max", "tensor.reduce_sum"):
            if not last_axis_keepdims(op, op.operand_types[0].rank):  # type: ignore[union-attr]
                return None
            return Red(name[14:], self.of(op.operands[0]))
        if name == "tensor.cast" and \
                op.operand_types[0].dtype is op.result_types[0].dtype:  # type: ignore[union-attr]
            return self.of(op.operands[0])  # a shape refinement: the same values
        if name in ("tensor.arange", "tensor.reshape", "tensor.broadcast_to"):
            return self._index(op)
        fn = elementwise_fn(op)
        if fn is None:
            return None
        return Fn(fn[0], tuple(self.of(x) for x in op.operands), fn[1])

    def _fused_reduce(self, op: Operation, v: Value) -> Term | None:
        kinds = op.kinds()  # type: ignore[attr-defined]
        rank = len(op.iteration_shape())  # type: ignore[attr-defined]
        if not last_axis_keepdims(op, rank) or any(k not in ("max", "sum") for k in kinds):
            return None
        args = [self.of(x) for x in op.operands]
        reds: list[Term] = [Red(k, t) for k, t in
                            zip(kinds, expand(op.regions[0].blocks[0], args), strict=True)]
        index = op.results.index(v)  # type: ignore[arg-type]
        if index < len(kinds):
            return reds[index]
        if len(op.regions) < 2:
            return None
        return expand(op.regions[1].blocks[0], args + reds)[index - len(kinds)]

    def _index(self, op: Operation) -> Term | None:
        """``arange`` (0, 1, ...) as the last axis' coordinate; reshaped to [n, 1] the
        second-to-last's; broadcasts and same-type casts keep the axis from the end."""
        if op.name == "tensor.arange":
            if op.attributes.get("start", 0) != 0 or op.attributes.get("step", 1) != 1:
                return None
            if op.operands:
                return Idx(-1, self.of(op.operands[0]))
            extent = op.result_types[0].shape[0]  # type: ignore[union-attr]
            return None if extent is None else Idx(-1, Num(extent))
        src = self.of(op.operands[0])
        if not isinstance(src, Idx):
            return None
        if op.name != "tensor.reshape":
            return src
        dims = op.result_types[0].shape  # type: ignore[union-attr]
        if op.operand_types[0].rank != 1 or len(dims) not in (1, 2):  # type: ignore[union-attr]
            return None
        if len(dims) == 1:
            return src
        if dims[1] == 1 and dims[0] != 1:
            return Idx(-2, src.extent)
        if dims[0] == 1 and dims[1] != 1:
            return src
        return None


def last_axis_keepdims(op: Operation, rank: int) -> bool:
    """A keepdims reduction over exactly the last axis of a rank-``rank`` source."""
    axes = [a % rank for a in op.attributes.get("axes", [])] if rank else []
    return bool(op.attributes.get("keepdims")) and axes == [rank - 1]


def elementwise_fn(op: Operation) -> tuple[str, str] | None:
    """(fn, attr) of an elementwise tensor op or scalar arith op, else None."""
    dialect, _, fn = op.name.partition(".")
    if dialect not in ("tensor", "arith"):
        return None
    if fn in ("cmpf", "cmpi"):
        return "cmp", str(op.attributes["predicate"])
    if fn == "cast":
        return "cast", str(op.result_types[0])
    if fn == "select" or fn in ELEMENTWISE_BY_NAME:
        return fn, ""
    return None


def expand(block: Block, args: list[Term]) -> list[Term]:
    """The terms a fused op's body yields for its block arguments' terms."""
    env: dict[int, Term] = {id(a): t for a, t in zip(block.args, args, strict=True)}
    for op in block.ops:
        if op.name == "tensor.yield":
            return [env[id(x)] for x in op.operands]
        if op.name == "arith.constant":
            env[id(op.results[0])] = Num(op.attributes["value"])
            continue
        fn = elementwise_fn(op)
        if fn is None or len(op.results) != 1:
            env[id(op.results[0])] = Leaf(id(op.results[0]), op.results[0])
            continue
        env[id(op.results[0])] = Fn(fn[0], tuple(env[id(x)] for x in op.operands), fn[1])
    raise ValueError("a fused body without yield")


__all__ = ["Fn", "Idx", "Leaf", "Normalizer", "Num", "PRODUCTS", "Prod", "Red", "Term", "expand"]
