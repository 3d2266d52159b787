"""Shape ops and tensor creation.

Dynamic extents: an op that makes a tensor from nothing but a shape (reshape,
broadcast_to, full, arange) takes one ``index`` operand per ``?`` of its result,
in axis order, after its other operands (MLIR's ``tensor.empty`` rule).

Text forms:
    %r = tensor.reshape %x, %n : (tensor<?x4xf32>, index) -> tensor<?xf32>
    %b = tensor.broadcast_to %x : tensor<4xf32> -> tensor<3x4xf32>
    %c = tensor.concat %a, %b {axis = 0} : (tensor<2xf32>, tensor<?xf32>) -> tensor<?xf32>
    %z = tensor.full %v, %n : (f32, index) -> tensor<?x4xf32>
    %a = tensor.arange {start = 0, step = 1} : tensor<5xi64>
    %d = tensor.dim %x {axis = 0} : tensor<?xf32> -> index
    %k = tensor.constant {value = dense<[1.0, 2.0] : tensor<2xf32>>} : tensor<2xf32>
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..diagnostics import WiaRuntimeError
from .core import Operation
from .numerics import finish, to_dtype
from .ops_base import (
    PURE,
    attr_int,
    check_dynamic_extents,
    expect_counts,
    expect_same_dtype,
    expect_tensor,
    has_dynamic_shape,
    normalize_axis,
    register,
    value_dtype,
)
from .types import IndexType, ScalarType, TensorType, shape_of, shapes_compatible, static_shape


def result_shape(result: TensorType, extents: list[Any]) -> tuple[int, ...]:
    """The concrete shape: static extents, ``?`` filled from ``extents`` in order."""
    it = iter(int(e) for e in extents)
    shape = tuple(next(it) if d is None else d for d in result.shape)
    if any(d < 0 for d in shape):
        raise WiaRuntimeError(f"negative extent in shape {shape}")
    return shape


class _MakesTensor(Operation):
    """Shared checks: ``leading`` operands, then the dynamic extents of a tensor result."""

    traits = PURE
    leading = 1

    def result_tensor(self) -> TensorType:
        expect_counts(self, (self.leading, None), 1)
        result = expect_tensor(self, self.result.type, "result")
        check_dynamic_extents(self, result, self.operands[self.leading:])
        return result

    def may_trap(self) -> bool:
        return has_dynamic_shape(self)  # a negative or mismatched extent shows at run time

    def concrete_shape(self, args: list[Any]) -> tuple[int, ...]:
        return result_shape(self.result.type, args[self.leading:])  # type: ignore[arg-type]


@register
class ReshapeOp(_MakesTensor):
    """``tensor.reshape``: NumPy ``reshape`` (C order); element counts must agree."""

    name = "tensor.reshape"

    def verify(self) -> None:
        result = self.result_tensor()
        x = self.operand_types[0]
        if value_dtype(self, x, "operand") is not result.dtype:
            raise self.error(f"cannot change the dtype ({x} -> {result})")
        src, dst = static_shape(x), static_shape(result)
        if src is not None and dst is not None and np.prod(src) != np.prod(dst):
            raise self.error(f"element counts differ ({x} -> {result})")

    def evaluate(self, args: list[Any]) -> list[Any]:
        x, shape = np.asarray(args[0]), self.concrete_shape(args)
        if x.size != int(np.prod(shape)):
            raise WiaRuntimeError(f"'{self.name}': cannot reshape {x.shape} into {shape}") from None
        return [finish(x.reshape(shape), self.result.type)]


@register
class BroadcastToOp(_MakesTensor):
    """``tensor.broadcast_to``: NumPy ``broadcast_to`` of a tensor or a scalar."""

    name = "tensor.broadcast_to"

    def verify(self) -> None:
        result = self.result_tensor()
        x = self.operand_types[0]
        if value_dtype(self, x, "operand") is not result.dtype:
            raise self.error(f"cannot change the dtype ({x} -> {result})")
        src = shape_of(x)
        if len(src) > result.rank:
            raise self.error(f"cannot broadcast {x} to the lower rank of {result}")
        for s, d in zip(reversed(src), reversed(result.shape), strict=False):
            if s is not None and s != 1 and d is not None and s != d:
                raise self.error(f"cannot broadcast {x} to {result}")

    def evaluate(self, args: list[Any]) -> list[Any]:
        shape = self.concrete_shape(args)
        try:
            out = np.broadcast_to(args[0], shape)
        except ValueError:
            raise WiaRuntimeError(f"'{self.name}': cannot broadcast {np.shape(args[0])} to {shape}") from None
        return [finish(out.copy(), self.result.type)]


@register
class FullOp(_MakesTensor):
    """``tensor.full %value, <extents>``: a tensor filled with a scalar of its dtype."""

    name = "tensor.full"

    def verify(self) -> None:
        result = self.result_tensor()
        if self.operand_types[0] != ScalarType(result.dtype):
            raise self.error(f"fill value must be a {result.dtype.ir_name} scalar, "
                             f"got {self.operand_types[0]}")

    def evaluate(self, args: list[Any]) -> list[Any]:
        out = np.full(self.concrete_shape(args), args[0], dtype=np.asarray(args[0]).dtype)
        return [finish(out, self.result.type)]


@register
class ArangeOp(_MakesTensor):
    """``tensor.arange {start = a, step = s}``: ``a + s * i`` for i < extent (1-D)."""

    name = "tensor.arange"
    leading = 0

    def verify(self) -> None:
        result = self.result_tensor()
        if result.rank != 1 or result.dtype.kind == 0:
            raise self.error(f"makes a 1-D numeric tensor, got {result}")
        for key in ("start", "step"):
            value = self.attributes.get(key, 0)
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise self.error(f"attribute '{key}' must be a number, got {value!r}")

    def evaluate(self, args: list[Any]) -> list[Any]:
        (n,) = self.concrete_shape(args)
        start, step = self.attributes.get("start", 0), self.attributes.get("step", 1)
        out = start + step * np.arange(n, dtype=np.float64 if isinstance(step, float) else np.int64)
        return [finish(out, self.result.type)]


@register
class ConcatOp(Operation):
    """``tensor.concat %a, %b, ... {axis}``: NumPy ``concatenate``."""

    name = "tensor.concat"
    traits = PURE

    def verify(self) -> None:
        expect_counts(self, (1, None), 1)
        types = [expect_tensor(self, t, "operand") for t in self.operand_types]
        dtype = expect_same_dtype(self, types)
        rank = types[0].rank
        if any(t.rank != rank for t in types):
            raise self.error(f"operands must share a rank, got {', '.join(map(str, types))}")
        axis = normalize_axis(self, attr_int(self, "axis"), rank)
        extents = [t.shape[axis] for t in types]
        shape = list(types[0].shape)
        shape[axis] = None if None in extents else sum(extents)  # type: ignore[arg-type]
        for t in types[1:]:
            for i, (a, b) in enumerate(zip(shape, t.shape, strict=False)):
                if i != axis and a is not None and b is not None and a != b:
                    raise self.error(f"extents of axis {i} differ ({types[0]} vs {t})")
        result = self.result.type
        if not isinstance(result, TensorType) or result.dtype is not dtype or \
                not shapes_compatible(tuple(shape), result.shape):
            raise self.error(f"result type {result} does not match the concatenation")

    def may_trap(self) -> bool:
        return has_dynamic_shape(self)

    def evaluate(self, args: list[Any]) -> list[Any]:
        axis = self.attributes["axis"]
        try:
            out = np.concatenate([np.asarray(a) for a in args], axis=axis)
        except ValueError as e:
            raise WiaRuntimeError(f"'{self.name}': {e}") from None
        return [finish(out, self.result.type)]


@register
class DimOp(Operation):
    """``tensor.dim %x {axis = i} : T -> index``: the extent of one axis."""

    name = "tensor.dim"
    traits = PURE

    def verify(self) -> None:
        expect_counts(self, 1, 1)
        x = expect_tensor(self, self.operand_types[0], "operand")
        normalize_axis(self, attr_int(self, "axis"), x.rank)
        if not isinstance(self.result.type, IndexType):
            raise self.error(f"result must be index, got {self.result.type}")

    def fold(self) -> list[Any] | None:
        x = self.operand_types[0]
        extent = x.shape[self.attributes["axis"]]  # type: ignore[union-attr]
        return None if extent is None else [np.int64(extent)]

    def evaluate(self, args: list[Any]) -> list[Any]:
        return [np.int64(np.shape(args[0])[self.attributes["axis"]])]


@register
class TensorConstantOp(Operation):
    """``tensor.constant {value = dense<...>} : T``: a static tensor literal."""

    name = "tensor.constant"
    traits = PURE

    def verify(self) -> None:
        expect_counts(self, 0, 1)
        result = expect_tensor(self, self.result.type, "result")
        value = self.attributes.get("value")
        if not isinstance(value, np.ndarray):
            raise self.error(f"attribute 'value' must be a dense array, got {value!r}")
        if not result.is_static or value.shape != result.shape:
            raise self.error(f"value of shape {list(value.shape)} does not match {result}")
        if value.dtype != result.dtype.numpy:
            raise self.error(f"value of dtype {value.dtype} does not match {result}")

    def evaluate(self, args: list[Any]) -> list[Any]:
        dtype = value_dtype(self, self.result.type, "result")
        return [finish(to_dtype(self.attributes["value"], dtype).copy(), self.result.type)]
