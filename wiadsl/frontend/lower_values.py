"""Typed IR values for the lowering, and the small emitters every lowering step shares.

A ``TypedValue`` pairs an IR value with its frontend ``ValueType``: the IR type
drops what only the frontend needs (symbolic dim names, NEP 50 weakness), so the
lowering carries both. ``static`` is the compile-time value when there is one
(literals, consts, arithmetic of those), which attributes like ``axis=`` need.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..dtypes import DType
from ..ir.builder import Builder
from ..ir.core import OpResult, Value
from ..ir.types import INDEX, IndexType, IRType, ScalarType, TensorType
from ..records import record
from .builtins import ALL_AXES
from .constfold import convert
from .typerules import ValueType


@record(frozen=True)
class TypedValue:
    value: Value
    type: ValueType
    static: Any = None


def all_axes() -> TypedValue:
    """What ``none`` lowers to: only a compile-time value (the checker lets it reach an
    ``axis=`` and func parameters, nothing that would read its IR value)."""
    return TypedValue(Value(ScalarType(DType.BOOL), "none"), ValueType(DType.BOOL), ALL_AXES)


def ir_type(t: ValueType) -> IRType:
    """The IR type of a frontend type: symbolic and unknown dims become ``?``."""
    if t.is_scalar:
        return ScalarType(t.dtype)
    return TensorType(t.dtype, tuple(d if isinstance(d, int) else None for d in t.shape))


def dialect(*types: ValueType) -> str:
    """``tensor`` when any operand is a tensor, else ``arith`` (scalars)."""
    return "tensor" if any(not t.is_scalar for t in types) else "arith"


class Emitter:
    """A builder plus the conversions the lowering needs between typed values."""

    def __init__(self, builder: Builder):
        self.b = builder

    def constant(self, value: Any, t: ValueType, static: Any = None) -> TypedValue:
        """A literal of type ``t`` (scalar, or a tensor given as nested lists/array)."""
        if t.is_scalar:
            v = self.b.constant(value, ScalarType(t.dtype))
        else:
            array = np.asarray(value, dtype=t.dtype.numpy)
            v = self.b.constant(array, TensorType(t.dtype, array.shape))
        return TypedValue(v, t, value if static is None else static)

    def cast(self, tv: TypedValue, dtype: DType) -> TypedValue:
        """``tv`` converted to ``dtype`` (constants are re-made, not cast: the new
        constant and its static are what the cast computes at run time)."""
        if tv.type.dtype is dtype:
            return tv
        t = ValueType(dtype, tv.type.shape, tv.type.weak)
        static = convert(tv.static, tv.type.dtype, dtype) if _is_constant(tv.value) else None
        if static is not None:
            return self.constant(static, t, static)
        name = f"{dialect(tv.type)}.cast"
        return TypedValue(self.b.value(name, [tv.value], ir_type(t)), t)

    def coerce_to(self, tv: TypedValue, target: ValueType) -> Value:
        """The IR value of ``tv`` with exactly the IR type of ``target`` (dtype cast,
        then a shape-generalizing ``tensor.cast`` where static extents became ``?``)."""
        value = self.cast(tv, target.dtype).value
        wanted = ir_type(target)
        if value.type != wanted:
            value = self.b.value("tensor.cast", [value], wanted)
        return value

    def to_index(self, tv: TypedValue) -> Value:
        if isinstance(tv.value.type, IndexType):
            return tv.value
        if isinstance(tv.static, (int, np.integer)) and not isinstance(tv.static, bool):
            return self.b.constant(int(tv.static), INDEX)
        return self.b.value("arith.cast", [tv.value], INDEX)

    def to_i64(self, tv: TypedValue) -> Value:
        return self.cast(tv, DType.I64).value

    def index_const(self, n: int) -> Value:
        return self.b.constant(n, INDEX)

    def dim(self, tensor_value: Value, axis: int) -> Value:
        """The extent of ``axis``: a constant when static, else ``tensor.dim``."""
        extent = tensor_value.type.shape[axis]  # type: ignore[union-attr]
        if extent is not None:
            return self.index_const(extent)
        return self.b.value("tensor.dim", [tensor_value], INDEX, {"axis": axis})

    def index_product(self, values: list[Value]) -> Value:
        result = self.index_const(1)
        for v in values:
            result = self.b.value("arith.mul", [result, v], INDEX)
        return result


def _is_constant(value: Value) -> bool:
    return isinstance(value, OpResult) and value.op.name in ("arith.constant", "tensor.constant")

