"""Fused ops' shared machinery: ``tensor.yield``, body regions, ``run_body``, ``FusedOp``.

Invariants:
- Every region has exactly one block, ends in ``tensor.yield`` and holds only scalar
  ``arith`` ops (constants, elementwise, compare, select, cast): the body is the
  per-element computation, so it can run vectorized over whole arrays (``run_body``).
- Bodies are isolated from above: they read only their block arguments and values
  defined earlier in the same body (backends compile the body without the function).
- ``kernel`` (a string) names what was fused, for readers and remarks; optional.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from .core import Block, Operation, Region, Trait, Value
from .numerics import cast_values, to_type
from .ops_arith import ArithSelectOp, CastOp, CmpOp, ConstantOp
from .ops_base import PURE, register
from .ops_elementwise import ArithElementwiseOp, apply_elementwise, broadcast_may_fail
from .types import IndexType, IRType, ScalarType, TensorType, broadcast_shapes, shapes_compatible


@register
class YieldOp(Operation):
    """``yield %v... : T...``: the values one iteration of a fused body produces."""

    name = "tensor.yield"
    traits = frozenset({Trait.TERMINATOR})

    def verify(self) -> None:
        block = self.parent
        owner = block.parent.parent if block is not None and block.parent is not None else None
        if not isinstance(owner, FusedOp):
            raise self.error("must end the body of a fused op")
        if self.successors or self.results:
            raise self.error("has no results and no successors")


def new_body(arg_types: Sequence[IRType], arg_names: Sequence[str | None] | None = None
             ) -> tuple[Region, Block]:
    """An empty one-block region whose block takes ``arg_types``."""
    block = Block(arg_types, arg_names)
    return Region([block]), block


def scalar_of(t: IRType) -> ScalarType:
    """The element type a body sees for an operand of type ``t``."""
    if isinstance(t, IndexType):
        raise ValueError("index operands cannot feed a fused body")
    return ScalarType(t.dtype)


def _vector_eval(op: Operation, args: list[np.ndarray]) -> np.ndarray:
    """One body op on whole arrays: the op's scalar semantics, elementwise."""
    t = op.results[0].type
    if isinstance(op, ConstantOp):
        return to_type(op.attributes["value"], t)
    if isinstance(op, ArithElementwiseOp):
        return to_type(apply_elementwise(op.fn, args, t.dtype), t)  # type: ignore[union-attr]
    if isinstance(op, CmpOp):
        a, b = (to_type(x, o.type) for x, o in zip(args, op.operands, strict=True))
        with np.errstate(all="ignore"):
            return np.asarray(op.predicates[op.attributes["predicate"]](a, b))
    if isinstance(op, ArithSelectOp):
        return to_type(np.where(args[0], args[1], args[2]), t)
    if isinstance(op, CastOp):  # the language's cast (saturating, NaN -> 0), as CastOp.evaluate
        return to_type(cast_values(args[0], t.dtype), t)  # type: ignore[union-attr]
    raise op.error("cannot appear in a fused body")


_BODY_OPS = (ConstantOp, ArithElementwiseOp, CmpOp, ArithSelectOp, CastOp)


def run_body(block: Block, args: Sequence[Any]) -> list[np.ndarray]:
    """Run a body on arrays (one per block argument, broadcastable); the yielded arrays."""
    env: dict[int, Any] = {id(a): np.asarray(v) for a, v in zip(block.args, args, strict=True)}
    for op in block.ops:
        values = [env[id(v)] for v in op.operands]
        if op.name == "tensor.yield":
            return values
        with np.errstate(all="ignore"):
            env[id(op.results[0])] = _vector_eval(op, values)
    raise op.error("body does not end in yield")  # verify rules this out


class FusedOp(Operation):
    """Shared checks of the fused ops: bodies are one block of scalar arith ops."""

    traits = PURE
    #: Leading operands consumed by the op itself (matmul/conv2d: 2), not by the body.
    num_prologue: ClassVar[int] = 0

    @property
    def body_operands(self) -> tuple[Value, ...]:
        return self.operands[self.num_prologue:]

    def may_trap(self) -> bool:
        """A body op that may fail, or body operands whose extents may disagree."""
        return (any(op.may_trap() for r in self.regions for op in r.blocks[0].ops)
                or broadcast_may_fail(self.operand_types[self.num_prologue:]))

    def body(self, index: int = 0) -> Block:
        return self.regions[index].blocks[0]

    def verify_body(self, index: int, arg_types: Sequence[IRType]) -> list[ScalarType]:
        """Check region ``index`` against ``arg_types``; the yielded types."""
        if index >= len(self.regions):
            raise self.error(f"expects a body region #{index}")
        region = self.regions[index]
        if len(region.blocks) != 1:
            raise self.error(f"body #{index} must have one block, got {len(region.blocks)}")
        block = region.blocks[0]
        if list(block.arg_types) != list(arg_types):
            raise self.error(f"body #{index} takes ({', '.join(map(str, block.arg_types))}) "
                             f"but expects ({', '.join(map(str, arg_types))})")
        if not block.ops or block.ops[-1].name != "tensor.yield":
            raise self.error(f"body #{index} must end in yield")
        defined = {id(a) for a in block.args}
        for op in block.ops:
            if op.parent is not block:
                raise self.error("body op has a wrong parent link")
            if op is not block.ops[-1] and not isinstance(op, _BODY_OPS):
                raise self.error(f"body may only hold scalar arith ops, got '{op.name}'")
            for v in op.all_operands:
                if id(v) not in defined:
                    raise self.error(f"body op '{op.name}' reads a value not defined earlier in "
                                     f"the body (bodies are isolated from above)")
            op.verify()
            defined.update(id(r) for r in op.results)
        yielded = [t for t in block.ops[-1].operand_types]
        for t in yielded:
            if not isinstance(t, ScalarType):
                raise self.error(f"body yields {t}; bodies yield scalars")
        return yielded  # type: ignore[return-value]

    def body_arg_types(self) -> list[ScalarType]:
        try:
            return [scalar_of(t) for t in self.operand_types[self.num_prologue:]]
        except ValueError as e:
            raise self.error(str(e)) from None

    def check_results(self, types: Sequence[IRType], yielded: Sequence[ScalarType],
                      shape: tuple[int | None, ...], what: str) -> None:
        if len(types) != len(yielded):
            raise self.error(f"has {len(types)} results but its body yields {len(yielded)}")
        for t, y in zip(types, yielded, strict=True):
            if not (isinstance(t, TensorType) and t.dtype is y.dtype
                    and shapes_compatible(shape, t.shape)):
                shown = "x".join("?" if d is None else str(d) for d in shape)
                raise self.error(f"result {t} does not match {what} [{shown}] of {y}")

    def broadcast_shape(self, types: Sequence[IRType], base: tuple[int | None, ...] = ()
                        ) -> tuple[int | None, ...]:
        shapes = [t.shape if isinstance(t, TensorType) else () for t in types]
        try:
            return broadcast_shapes(base, *shapes)
        except ValueError as e:
            raise self.error(f"operands do not broadcast: {e}") from None

    def check_kernel_attr(self) -> None:
        k = self.attributes.get("kernel")
        if k is not None and not isinstance(k, str):
            raise self.error(f"attribute 'kernel' must be a string, got {k!r}")


def broadcast_all(args: Sequence[Any], shape: tuple[int, ...]) -> list[np.ndarray]:
    return [np.broadcast_to(np.asarray(a), shape) for a in args]
