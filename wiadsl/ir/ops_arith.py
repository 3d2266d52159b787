"""Constants, comparisons, select and casts, scalar (``arith``) and tensor forms.

Text forms (custom where MLIR has one):
    %0 = arith.constant 1.5 : f32
    %c = arith.cmpf ogt, %a, %b : f32                       (result i1 implied)
    %m = tensor.cmpi slt, %x, %y : (tensor<4xi32>, i32) -> tensor<4xi1>
    %s = arith.select %c, %a, %b : (i1, f32, f32) -> f32
    %t = tensor.cast %x : tensor<4xf32> -> tensor<4xi8>

The ``arith`` forms also take ``vector<NxT>`` operands (loop level, after
``vectorize``): the same semantics in every lane; lane counts must agree, a
vector compare gives ``vector<Nxi1>``, a vector select takes an i1 or a
``vector<Nxi1>`` condition, a vector cast keeps the lane count.

Comparison predicates follow NumPy: ``one`` is ordered (false when either
side is NaN), ``une`` is NumPy's ``!=`` (true on NaN) -- lower ``!=`` to ``une``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from ..dtypes import DType
from .core import Operation
from .numerics import cast_values, finish, to_type
from .ops_base import (
    PURE,
    FoldConstantsMixin,
    attr_choice,
    check_broadcast_result,
    expect_counts,
    expect_same_dtype,
    register,
)
from .types import (
    IndexType,
    IRType,
    ScalarType,
    TensorType,
    VectorType,
    shapes_compatible,
    with_dtype,
)

Compare = Callable[[np.ndarray, np.ndarray], np.ndarray]

FLOAT_PREDICATES: dict[str, Compare] = {
    "oeq": np.equal,
    "one": lambda a, b: np.not_equal(a, b) & ~np.isnan(a) & ~np.isnan(b),
    "une": np.not_equal,
    "olt": np.less, "ole": np.less_equal, "ogt": np.greater, "oge": np.greater_equal,
}
INT_PREDICATES: dict[str, Compare] = {
    "eq": np.equal, "ne": np.not_equal, "slt": np.less, "sle": np.less_equal,
    "sgt": np.greater, "sge": np.greater_equal,
}


@register
class ConstantOp(Operation):
    """``%0 = arith.constant 1.5 : f32``: a scalar or index constant ``value``."""

    name = "arith.constant"
    traits = PURE

    def verify(self) -> None:
        expect_counts(self, 0, 1)
        t = self.result.type
        if isinstance(t, TensorType):
            raise self.error("makes scalars; use tensor.constant for tensors")
        value = self.attributes.get("value")
        if isinstance(t, IndexType) or t.dtype.is_int:
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif t.dtype is DType.BOOL:
            ok = isinstance(value, bool)
        else:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not ok:
            raise self.error(f"value {value!r} does not fit type {t}")
        if isinstance(value, int) and not isinstance(t, IndexType) and t.dtype.is_int:
            info = np.iinfo(t.dtype.numpy)
            if not info.min <= value <= info.max:
                raise self.error(f"value {value} is out of range for {t}")

    def evaluate(self, args: list[Any]) -> list[Any]:
        return [finish(self.attributes["value"], self.result.type)]


class CmpOp(FoldConstantsMixin, Operation):
    """Compare two operands of one dtype with the ``predicate`` attribute; result i1."""

    traits = PURE
    predicates: ClassVar[dict[str, Compare]]
    is_tensor: ClassVar[bool]

    @classmethod
    def short_form_results(cls, operand_type: IRType, num_results: int) -> list[IRType]:
        return [with_dtype(operand_type, DType.BOOL)] * num_results

    def verify(self) -> None:
        expect_counts(self, 2, 1)
        attr_choice(self, "predicate", list(self.predicates))
        types = self.operand_types
        dtype: DType | None
        if self.is_tensor:
            dtype = expect_same_dtype(self, types)
            result = self.result.type
            if not isinstance(result, TensorType) or result.dtype is not DType.BOOL:
                raise self.error(f"result must be an i1 tensor, got {result}")
            check_broadcast_result(self, types, result)
        else:
            if types[0] != types[1] or isinstance(types[0], TensorType):
                raise self.error(f"operands must be scalars of one type, got {types[0]}, {types[1]}")
            bools = with_dtype(types[0], DType.BOOL)
            if self.result.type != bools:
                raise self.error(f"result must be {bools}, got {self.result.type}")
            dtype = None if isinstance(types[0], IndexType) else types[0].dtype
        floats = self.predicates is FLOAT_PREDICATES
        if floats != (dtype is not None and dtype.is_float):
            want = "float" if floats else "integer, i1 or index"
            raise self.error(f"compares {want} operands, got {types[0]}")

    def evaluate(self, args: list[Any]) -> list[Any]:
        a, b = (to_type(x, t) for x, t in zip(args, self.operand_types, strict=False))
        with np.errstate(all="ignore"):
            out = self.predicates[self.attributes["predicate"]](a, b)
        return [finish(out, self.result.type)]


def _cmp(name: str, predicates: dict[str, Compare], is_tensor: bool) -> None:
    attrs = {"name": name, "predicates": predicates, "is_tensor": is_tensor,
             "__doc__": f"``{name} <pred>, %a, %b``: {CmpOp.__doc__}"}
    register(type(name.replace(".", "_"), (CmpOp,), attrs))


_cmp("arith.cmpf", FLOAT_PREDICATES, False)
_cmp("arith.cmpi", INT_PREDICATES, False)
_cmp("tensor.cmpf", FLOAT_PREDICATES, True)
_cmp("tensor.cmpi", INT_PREDICATES, True)


@register
class ArithSelectOp(FoldConstantsMixin, Operation):
    """``%r = arith.select %c, %a, %b : (i1, T, T) -> T``: ``c ? a : b`` on scalars;
    on vectors lane by lane (condition ``i1`` or ``vector<Nxi1>`` of the lanes)."""

    name = "arith.select"
    traits = PURE

    def verify(self) -> None:
        expect_counts(self, 3, 1)
        c, a, b = self.operand_types
        allowed: list[IRType] = [ScalarType(DType.BOOL)]
        if isinstance(a, VectorType):
            allowed.append(VectorType(DType.BOOL, a.lanes))
        if c not in allowed:
            raise self.error(f"condition must be {' or '.join(map(str, allowed))}, got {c}")
        if not (a == b == self.result.type) or isinstance(a, TensorType):
            raise self.error(f"branches and result must be one scalar or vector type, got {a}, {b} -> "
                             f"{self.result.type}")

    def evaluate(self, args: list[Any]) -> list[Any]:
        if isinstance(self.result.type, VectorType):
            return [finish(np.where(np.asarray(args[0], dtype=bool), args[1], args[2]), self.result.type)]
        return [finish(args[1] if bool(args[0]) else args[2], self.result.type)]


@register
class TensorSelectOp(FoldConstantsMixin, Operation):
    """``tensor.select %c, %a, %b``: NumPy ``where`` with broadcasting of all three."""

    name = "tensor.select"
    traits = PURE

    def verify(self) -> None:
        expect_counts(self, 3, 1)
        c, a, b = self.operand_types
        if isinstance(c, IndexType) or c.dtype is not DType.BOOL:
            raise self.error(f"condition must be i1, got {c}")
        dtype = expect_same_dtype(self, [a, b], "branch")
        result = self.result.type
        if not isinstance(result, TensorType) or result.dtype is not dtype:
            raise self.error(f"result must be a tensor of {dtype.ir_name}, got {result}")
        check_broadcast_result(self, [c, a, b], result)

    def evaluate(self, args: list[Any]) -> list[Any]:
        return [finish(np.where(*args), self.result.type)]


class CastOp(FoldConstantsMixin, Operation):
    """Convert the element type: ``numerics.cast_values`` (NumPy ``astype``, but floats
    to ints truncate and saturate, NaN to 0; to i1 is ``!= 0``); bf16 results are
    rounded. Shape is kept."""

    traits = PURE
    is_tensor: ClassVar[bool]

    def verify(self) -> None:
        expect_counts(self, 1, 1)
        src, dst = self.operand_types[0], self.result.type
        if self.is_tensor:
            if not (isinstance(src, TensorType) and isinstance(dst, TensorType)
                    and shapes_compatible(src.shape, dst.shape)):
                raise self.error(f"casts a tensor to a tensor of the same shape, got {src} -> {dst}")
        elif isinstance(src, TensorType) or isinstance(dst, TensorType):
            raise self.error(f"casts scalars or index; use tensor.cast, got {src} -> {dst}")
        elif isinstance(src, VectorType) or isinstance(dst, VectorType):
            if not (isinstance(src, VectorType) and isinstance(dst, VectorType) and src.lanes == dst.lanes):
                raise self.error(f"casts a vector to a vector of the same lanes, got {src} -> {dst}")

    def evaluate(self, args: list[Any]) -> list[Any]:
        dst = self.result.type
        dtype = DType.I64 if isinstance(dst, IndexType) else dst.dtype
        return [finish(cast_values(args[0], dtype), dst)]


def keeps_value(op: Operation) -> bool:
    """``op`` is an ``arith.cast`` between ``index`` and ``i64`` (either way, or to the
    same type): both are 64-bit integers, so the value passes unchanged (a kernel
    reads its batch with ``tensor.dim`` and casts it to ``i64`` and back)."""
    return op.name == "arith.cast" and all(str(t) in ("i64", "index")
                                           for t in (op.operand_types[0], op.result.type))


register(type("ArithCastOp", (CastOp,), {"name": "arith.cast", "is_tensor": False,
                                         "__doc__": "``arith.cast %x : f32 -> i32``"}))
register(type("TensorCastOp", (CastOp,), {"name": "tensor.cast", "is_tensor": True,
                                          "__doc__": "``tensor.cast %x : tensor<4xf32> -> "
                                                     "tensor<4xi8>``"}))
