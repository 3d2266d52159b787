"""Fused ops: the output of operator fusion, one kernel each, with a scalar body region.

Text forms (docs/ir.md, "Fused ops"):
    %r = tensor.fused_elementwise %a, %b {kernel = "bias_relu_fused"} : (tensor<?x?xf32>, tensor<?xf32>) -> tensor<?x?xf32> {
    ^bb0(%x: f32, %y: f32):
      %0 = arith.add %x, %y : f32
      %1 = arith.relu %0 : f32
      yield %1 : f32
    }
    %m = tensor.fused_reduce %a {kinds = ["max"], axes = [1], keepdims} : ... { ... } [{ epilogue }]
    %c = tensor.fused_matmul %a, %b, %bias {kernel = "..."} : ... { ^bb0(%acc: f32, %b: f32): ... }
    %y = tensor.fused_conv2d %x, %w, %bias {stride = [1, 1], padding = [1, 1]} : ... { ... }

Invariants:
- Every region has exactly one block, ends in ``tensor.yield`` and holds only scalar
  ``arith`` ops (constants, elementwise, compare, select, cast): the body is the
  per-element computation, so it can run vectorized over whole arrays (``run_body``).
- Bodies are isolated from above: they read only their block arguments and values
  defined earlier in the same body (backends compile the body without the function).
- Operands that feed the body broadcast NumPy-style to the iteration shape (for
  matmul/conv2d: the product's result shape, which epilogue operands never grow).
- ``kernel`` (a string) names what was fused, for readers and remarks; optional.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from ..dtypes import DType
from .core import Block, Operation, Region, Trait, Value
from .numerics import finish, to_dtype, to_type
from .ops_arith import ArithSelectOp, CastOp, CmpOp, ConstantOp
from .ops_base import PURE, attr_bool, attr_ints, expect_tensor, normalize_axis, op_class, register
from .ops_elementwise import ArithElementwiseOp, apply_elementwise
from .ops_tensor import matmul_shape
from .types import IndexType, IRType, ScalarType, TensorType, broadcast_shapes, shapes_compatible

REDUCE_KINDS = ("sum", "prod", "max", "min", "mean")
_REDUCERS = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min, "mean": np.mean}


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
    if isinstance(op, CastOp):
        return to_dtype(args[0], t.dtype)  # type: ignore[union-attr]
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


def _broadcast(args: Sequence[Any], shape: tuple[int, ...]) -> list[np.ndarray]:
    return [np.broadcast_to(np.asarray(a), shape) for a in args]


@register
class FusedElementwiseOp(FusedOp):
    """Elementwise body over operands broadcast to the results' shape; one or more results."""

    name = "tensor.fused_elementwise"

    def verify(self) -> None:
        self.check_kernel_attr()
        if not self.operands or not self.results or len(self.regions) != 1:
            raise self.error("takes operands, results and one body region")
        yielded = self.verify_body(0, self.body_arg_types())
        shape = self.broadcast_shape(self.operand_types)
        if not shape:
            raise self.error("needs a tensor operand")
        self.check_results(self.result_types, yielded, shape, "the broadcast shape")

    def evaluate(self, args: list[Any]) -> list[Any]:
        shape = np.broadcast_shapes(*(np.shape(a) for a in args))
        outs = run_body(self.body(), _broadcast(args, shape))
        return [finish(np.broadcast_to(o, shape), t) for o, t in zip(outs, self.result_types, strict=True)]


@register
class FusedReduceOp(FusedOp):
    """Reductions of a body's values, optionally followed by an elementwise epilogue.

    Body #0 takes one element of each operand (broadcast to the iteration shape S)
    and yields one value per entry of ``kinds`` (or the single ``kind``); those are
    reduced over ``axes`` (``keepdims`` as in ``tensor.reduce_*``). The first
    ``len(kinds)`` results are the reductions. Body #1 (optional, the epilogue)
    takes the operand elements and then the reduced values (broadcast back over S)
    and yields further results of shape S: softmax's ``exp(x - m) / s`` in the
    same kernel as ``s = sum(exp(x - m))`` (a row kernel, when a row fits on chip).
    """

    name = "tensor.fused_reduce"

    def kinds(self) -> list[str]:
        if "kinds" in self.attributes:
            kinds = self.attributes["kinds"]
            if not isinstance(kinds, list) or not kinds:
                raise self.error(f"attribute 'kinds' must be a non-empty list, got {kinds!r}")
        else:
            kinds = [self.attributes.get("kind")]
        for k in kinds:
            if k not in REDUCE_KINDS:
                raise self.error(f"reduction kind must be one of {', '.join(REDUCE_KINDS)}; got {k!r}")
        return list(kinds)

    def iteration_shape(self) -> tuple[int | None, ...]:
        return self.broadcast_shape(self.operand_types)

    def axes(self) -> tuple[int, ...]:
        rank = len(self.iteration_shape())
        return tuple(normalize_axis(self, a, rank) for a in attr_ints(self, "axes"))

    def reduced_shape(self) -> tuple[int | None, ...]:
        shape, axes = self.iteration_shape(), self.axes()
        keep = attr_bool(self, "keepdims", False)
        return tuple(1 if i in axes else d for i, d in enumerate(shape) if keep or i not in axes)

    def verify(self) -> None:
        self.check_kernel_attr()
        if not self.operands or len(self.regions) not in (1, 2):
            raise self.error("takes operands and one body region plus an optional epilogue")
        kinds, shape = self.kinds(), self.iteration_shape()
        if not shape:
            raise self.error("needs a tensor operand")
        axes = self.axes()
        if len(set(axes)) != len(axes) or not axes:
            raise self.error(f"axes {list(axes)} must be non-empty and not repeat")
        yielded = self.verify_body(0, self.body_arg_types())
        if len(yielded) != len(kinds):
            raise self.error(f"body yields {len(yielded)} values for {len(kinds)} reduction kinds")
        reduced, rshape = list(self.results[:len(kinds)]), self.reduced_shape()
        for r, y, k in zip(reduced, yielded, kinds, strict=False):
            if k == "mean" and not y.dtype.is_float:
                raise self.error("a mean needs float values")
            if k in ("sum", "prod") and y.dtype is DType.BOOL:
                raise self.error(f"a {k} of i1 values is not allowed")
            ok = r.type == y if not rshape else (
                isinstance(r.type, TensorType) and r.type.dtype is y.dtype
                and shapes_compatible(rshape, r.type.shape))
            if not ok:
                raise self.error(f"reduction result {r.type} does not match {y} over {list(rshape)}")
        if len(reduced) != len(kinds):
            raise self.error(f"has {len(self.results)} results for {len(kinds)} reductions")
        rest = self.result_types[len(kinds):]
        if len(self.regions) == 2:
            epi = self.verify_body(1, [*self.body_arg_types(), *yielded])
            self.check_results(rest, epi, shape, "the iteration shape")
        elif rest:
            raise self.error(f"has {len(rest)} extra results but no epilogue")

    def evaluate(self, args: list[Any]) -> list[Any]:
        shape = np.broadcast_shapes(*(np.shape(a) for a in args))
        arrays = _broadcast(args, shape)
        values = run_body(self.body(0), arrays)
        axes, keep = self.axes(), bool(self.attributes.get("keepdims", False))
        kinds = self.kinds()
        kept: list[np.ndarray] = []
        out: list[Any] = []
        for v, k, r in zip(values, kinds, self.results, strict=False):
            v = np.broadcast_to(v, shape)
            extra = {"dtype": v.dtype} if k in ("sum", "prod") else {}
            with np.errstate(all="ignore"):
                red = np.asarray(_REDUCERS[k](v, axis=axes, keepdims=True, **extra)).astype(v.dtype)
            kept.append(red)
            out.append(finish(red if keep else red.reshape(
                [d for i, d in enumerate(red.shape) if i not in axes]), r.type))
        if len(self.regions) == 2:
            epi = run_body(self.body(1), [*arrays, *kept])
            out += [finish(np.broadcast_to(e, shape), t)
                    for e, t in zip(epi, self.result_types[len(kinds):], strict=True)]
        return out


class FusedProductOp(FusedOp):
    """A product (matmul or conv2d) of operands 0 and 1 with an elementwise epilogue.

    The body takes the accumulator element (the product's dtype) and one element of
    each further operand, broadcast to the product's shape; it yields the result
    element, whose dtype may differ from the accumulator's (e.g. an i8 requantize).
    """

    num_prologue = 2
    product: ClassVar[str]

    def product_type(self) -> TensorType:
        a, b = self.operand_types[:2]
        expect_tensor(self, a, "lhs")
        expect_tensor(self, b, "rhs")
        if a.dtype is not b.dtype:  # type: ignore[union-attr]
            raise self.error(f"product operand dtypes differ ({a}, {b})")
        try:
            shape = self.product_shape(a, b)  # type: ignore[arg-type]
        except ValueError as e:
            raise self.error(f"shapes {a} and {b} do not agree: {e}") from None
        if not shape:
            raise self.error("needs a tensor product (not a dot of two vectors)")
        return TensorType(a.dtype, shape)  # type: ignore[union-attr]

    def product_shape(self, a: TensorType, b: TensorType) -> tuple[int | None, ...]:
        raise NotImplementedError

    def verify(self) -> None:
        self.check_kernel_attr()
        if len(self.operands) < 2 or len(self.results) != 1 or len(self.regions) != 1:
            raise self.error("takes two product operands, epilogue operands, one result and one body")
        acc = self.product_type()
        yielded = self.verify_body(0, [ScalarType(acc.dtype), *self.body_arg_types()])
        grown = self.broadcast_shape(self.operand_types[2:], acc.shape)
        if len(grown) != acc.rank or not shapes_compatible(grown, acc.shape):
            raise self.error(f"epilogue operands must broadcast into the product shape {acc}")
        self.check_results(self.result_types, yielded, acc.shape, "the product shape")

    def accumulate(self, a: Any, b: Any) -> np.ndarray:
        """The product, computed by the unfused op's own semantics."""
        acc = self.product_type()
        tmp = op_class(self.product)([Value(self.operand_types[0]), Value(self.operand_types[1])],
                                     [acc], {k: v for k, v in self.attributes.items() if k != "kernel"})
        return tmp.evaluate([a, b])[0]

    def evaluate(self, args: list[Any]) -> list[Any]:
        acc = self.accumulate(args[0], args[1])
        outs = run_body(self.body(), [acc, *_broadcast(args[2:], acc.shape)])
        return [finish(np.broadcast_to(outs[0], acc.shape), self.result.type)]


@register
class FusedMatmulOp(FusedProductOp):
    """``tensor.matmul`` of operands 0 and 1, then the epilogue body."""

    name = "tensor.fused_matmul"
    product = "tensor.matmul"

    def product_shape(self, a: TensorType, b: TensorType) -> tuple[int | None, ...]:
        return matmul_shape(a.shape, b.shape)


@register
class FusedConv2dOp(FusedProductOp):
    """``tensor.conv2d {stride, padding}`` of operands 0 and 1, then the epilogue body."""

    name = "tensor.fused_conv2d"
    product = "tensor.conv2d"

    def product_shape(self, a: TensorType, b: TensorType) -> tuple[int | None, ...]:
        stride, pad = attr_ints(self, "stride", 2), attr_ints(self, "padding", 2)
        if a.rank != 4 or b.rank != 4:
            raise ValueError("conv2d takes NCHW x OIHW")
        hw = [None if a.shape[2 + i] is None or b.shape[2 + i] is None else
              (a.shape[2 + i] + 2 * pad[i] - b.shape[2 + i]) // stride[i] + 1 for i in (0, 1)]
        return (a.shape[0], b.shape[0], *hw)


FUSED_OPS = ("tensor.fused_elementwise", "tensor.fused_reduce", "tensor.fused_matmul",
             "tensor.fused_conv2d")
