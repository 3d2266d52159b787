"""Deferred tensor values: the unit of fusion in the tensor -> loop lowering.

A tensor value is lowered to an ``Expr`` that can produce any of its elements
inside a loop the *consumer* emits. Chains of elementwise ops, broadcasts,
transposes, slices and reshapes therefore become one loop with one store per
element (producer-consumer fusion) instead of a buffer per op.

Invariants:
- ``extents`` are ``index`` values (constants when the shapes are static) that
  dominate every place the expression may be emitted.
- ``Leaf`` reads a buffer through per-axis strides and an offset (views cost
  nothing); ``owned`` marks a buffer that this lowering allocated for exactly
  this value, the only kind an in-place update may write.
- ``at(lb, ivs)`` takes one induction value per axis of ``extents``; callers
  broadcast with ``broadcast_ivs`` first. ``at_flat`` is valid only when
  ``is_flat`` says every leaf is contiguous over the same extents.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence

from ..dtypes import DType
from ..ir.core import Value
from ..ir.types import ScalarType
from ..records import field, record
from .builder import LoopBuilder, const_value, contiguous_strides


def same_extents(a: Sequence[Value], b: Sequence[Value]) -> bool:
    """Provably equal extent lists (same values or equal constants)."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if x is y:
            continue
        cx, cy = const_value(x), const_value(y)
        if cx is None or cx != cy:
            return False
    return True


class Expr(ABC):
    """A tensor value that can be evaluated element by element."""

    extents: list[Value]
    dtype: DType

    @property
    def rank(self) -> int:
        return len(self.extents)

    @abstractmethod
    def at(self, lb: LoopBuilder, ivs: Sequence[Value]) -> Value:
        """The element at the loop indices ``ivs`` (one per axis), emitted at ``lb``."""

    def is_flat(self, extents: Sequence[Value]) -> bool:
        """Whether ``at_flat`` may index this value linearly over ``extents`` (by default
        not: elements are then reached through ``at``)."""
        return False

    def at_flat(self, lb: LoopBuilder, i: Value) -> Value:
        """The element at linear index ``i``, emitted at ``lb``; callers ask ``is_flat`` first."""
        raise AssertionError(f"{type(self).__name__} has no linear indexing (is_flat is False)")


@record(eq=False)
class Leaf(Expr):
    """Elements ``buf[offset + sum(iv_k * strides[k])]``."""

    buf: Value
    extents: list[Value]
    strides: list[Value]
    offset: Value
    owned: bool = False

    @property
    def dtype(self) -> DType:  # type: ignore[override]
        return self.buf.type.dtype  # type: ignore[union-attr]

    def at(self, lb: LoopBuilder, ivs: Sequence[Value]) -> Value:
        return lb.load(self.buf, lb.add(self.offset, lb.linear(ivs, self.strides)))

    def is_flat(self, extents: Sequence[Value]) -> bool:
        return self.flat and same_extents(self.extents, extents)

    def at_flat(self, lb: LoopBuilder, i: Value) -> Value:
        return lb.load(self.buf, lb.add(self.offset, i))

    flat: bool = True  # contiguous strides from ``offset`` (set by the constructors)
    whole: bool = False  # exactly the buffer in its own shape (``buffer_leaf``)

    @property
    def is_whole_buffer(self) -> bool:
        """Reads exactly the buffer, in its own shape (a materialized value)."""
        return self.whole


def buffer_leaf(lb: LoopBuilder, buf: Value, owned: bool) -> Leaf:
    """A whole buffer as an expression."""
    extents = lb.dims(buf)
    return Leaf(buf, extents, contiguous_strides(lb, extents), lb.idx(0), owned, True, True)


@record(eq=False)
class ScalarExpr(Expr):
    """A scalar broadcast to any shape (rank 0)."""

    value: Value
    extents: list[Value] = field(default_factory=list)

    @property
    def dtype(self) -> DType:  # type: ignore[override]
        return self.value.type.dtype  # type: ignore[union-attr]

    def at(self, lb: LoopBuilder, ivs: Sequence[Value]) -> Value:
        return self.value

    def is_flat(self, extents: Sequence[Value]) -> bool:
        return True

    def at_flat(self, lb: LoopBuilder, i: Value) -> Value:
        return self.value


ScalarFn = Callable[[LoopBuilder, list[Value]], Value]
#: Deepest chain of fused elementwise ops: a longer one (``a + a + ... + a`` with
#: thousands of terms) is cut into buffers, so emitting it cannot exhaust the stack.
MAX_FUSION_DEPTH = 64


@record(eq=False)
class MapExpr(Expr):
    """``fn`` applied elementwise to operands broadcast to ``extents``."""

    fn: ScalarFn
    operands: list[Expr]
    extents: list[Value]
    out_dtype: DType
    #: MapExprs on the longest path down the operands, this one included: ``at`` and
    #: ``is_flat`` recurse that deep (lowerings keep it below ``MAX_FUSION_DEPTH``).
    depth: int = field(init=False)

    def __post_init__(self) -> None:
        self.depth = 1 + max((o.depth for o in self.operands if isinstance(o, MapExpr)),
                             default=0)

    @property
    def dtype(self) -> DType:  # type: ignore[override]
        return self.out_dtype

    def at(self, lb: LoopBuilder, ivs: Sequence[Value]) -> Value:
        args = [o.at(lb, broadcast_ivs(lb, o.extents, ivs, self.extents)) for o in self.operands]
        return self.fn(lb, args)

    def is_flat(self, extents: Sequence[Value]) -> bool:
        return same_extents(self.extents, extents) and all(
            o.rank == 0 or o.is_flat(extents) for o in self.operands)

    def at_flat(self, lb: LoopBuilder, i: Value) -> Value:
        return self.fn(lb, [o.at_flat(lb, i) for o in self.operands])


def broadcast_ivs(lb: LoopBuilder, extents: Sequence[Value], ivs: Sequence[Value],
                  loop_extents: Sequence[Value] = ()) -> list[Value]:
    """Induction values for an operand of ``extents`` inside a loop over a broadcast
    shape with ``ivs`` (right-aligned; extent-1 axes read index 0).

    An axis whose extent is provably the loop's own (``loop_extents``, the same
    value) reads the induction value as it is: at extent 1 it can only be 0 anyway.
    Only an axis that may broadcast at run time pays a select, which also keeps
    LLVM from vectorizing (shape-generic code, issue 21)."""
    tail = list(ivs[len(ivs) - len(extents):]) if extents else []
    loop_tail = list(loop_extents[len(loop_extents) - len(extents):]) if extents else []
    out = []
    for k, (e, iv) in enumerate(zip(extents, tail, strict=True)):
        c = const_value(e)
        if c == 1:
            out.append(lb.idx(0))
        elif c is not None or (k < len(loop_tail) and loop_tail[k] is e):
            out.append(iv)
        else:
            out.append(lb.select(lb.cmp("eq", e, lb.idx(1)), lb.idx(0), iv))
    return out


def broadcast_extents(lb: LoopBuilder, shapes: Sequence[Sequence[Value]], what: str) -> list[Value]:
    """The broadcast of several extent lists, with runtime checks naming ``what``."""
    rank = max((len(s) for s in shapes), default=0)
    out: list[Value] = []
    for axis in range(rank):
        exts = [s[len(s) - rank + axis] for s in shapes if len(s) - rank + axis >= 0]
        result = exts[0]
        for e in exts[1:]:
            if same_extents([e], [result]):  # the same extent (one dim name): nothing to do
                continue
            # NumPy: an extent-1 axis takes the other's extent, even 0 (not the max:
            # 1 and 0 broadcast to 0; fuzz seed 7001657)
            result = lb.select(lb.cmp("eq", result, lb.idx(1)), e, result)
        for e in exts:
            if same_extents([e], [result]):
                continue
            ok = lb.or_(lb.cmp("eq", e, result), lb.cmp("eq", e, lb.idx(1)))
            lb.check(ok, f"{what}: operand shapes do not broadcast (axis {axis})")
        out.append(result)
    return out


def scalar_type(dtype: DType) -> ScalarType:
    return ScalarType(dtype)
