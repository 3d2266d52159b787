"""Element and slice access with NumPy basic-indexing semantics.

Index operands are i64 (or index) scalars. An integer index wraps when negative
and is a runtime error when out of range; slices follow Python's ``slice``
(clamped, negatives from the end, step != 0).

A slice op's per-axis ``layout`` is a list of strings, one per leading axis
(missing trailing axes are ``:``): ``"i"`` is an integer index (the axis is
dropped) and a slice is ``[s]:[e][:t]`` where the letters ``s``, ``e``, ``t``
mark which of start, stop, step are present as operands, in that order:
``":"``, ``"s:"``, ``":e"``, ``"s:e"``, ``"::t"``, ``"s:e:t"``...
``A[i, 1:, ::2]`` is ``layout = ["i", "s:", "::t"]`` with operands ``%i, %c1, %c2``.

Text forms:
    %v = tensor.extract %t, %i, %j : (tensor<?x4xf32>, i64, i64) -> f32
    %u = tensor.insert %v, %t, %i, %j : (f64, tensor<?x4xf32>, i64, i64) -> tensor<?x4xf32>
    %s = tensor.extract_slice %t, %i {layout = ["i", "s:e"]} : ... -> tensor<?xf32>
    %w = tensor.insert_slice %src, %t, %i {layout = ["i"]} : ... -> tensor<?x4xf32>
Insert ops are functional (return the updated copy) and cast the inserted value
to the destination dtype; insert_slice broadcasts the source over the slice.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from ..diagnostics import WiaRuntimeError
from ..records import record
from .core import Operation
from .numerics import finish, to_dtype
from .ops_base import (
    PURE,
    constant_of,
    expect_counts,
    expect_index_like,
    expect_result_shape,
    expect_tensor,
    has_dynamic_shape,
    register,
    value_dtype,
)
from .types import TensorType, static_shape

_SLICE = re.compile(r"^(s?):(e?)(:t)?$")


@record(frozen=True)
class AxisSpec:
    """One entry of a slice layout: an integer index, or a slice's present parts."""

    is_index: bool
    start: bool = False
    stop: bool = False
    step: bool = False

    @property
    def num_operands(self) -> int:
        return 1 if self.is_index else int(self.start) + int(self.stop) + int(self.step)

    @staticmethod
    def parse(text: Any) -> AxisSpec | None:
        if text == "i":
            return AxisSpec(True)
        m = _SLICE.match(text) if isinstance(text, str) else None
        return AxisSpec(False, bool(m[1]), bool(m[2]), bool(m[3])) if m else None


def check_index(op: Operation, value: Any, extent: int, axis: int) -> int:
    """A wrapped index in [0, extent), or a WiaRuntimeError naming op, index and extent."""
    i = int(value)
    if not -extent <= i < extent:
        raise WiaRuntimeError(f"'{op.name}': index {i} is out of range for axis {axis} "
                              f"with extent {extent}")
    return i % extent


def element_may_trap(op: Operation, tensor_operand: int) -> bool:
    """Whether the indices after ``tensor_operand`` may be out of range at run time."""
    shape = static_shape(op.operand_types[tensor_operand])
    indices = [constant_of(v) for v in op.operands[tensor_operand + 1:]]
    if shape is None:
        return True
    return not all(i is not None and -n <= int(i) < n for i, n in zip(indices, shape, strict=False))


def element_index(op: Operation, shape: tuple[int, ...], values: list[Any]) -> tuple[int, ...]:
    return tuple(check_index(op, v, n, axis) for axis, (v, n) in enumerate(zip(values, shape, strict=False)))


class SliceOpBase(Operation):
    """Shared layout handling: ``base`` operands, then the layout's index operands."""

    traits = PURE
    base = 1

    def layout(self) -> list[AxisSpec]:
        raw = self.attributes.get("layout")
        specs = [AxisSpec.parse(x) for x in raw] if isinstance(raw, list) else [None]
        if None in specs:
            raise self.error(f"attribute 'layout' must be a list of \"i\" or slice patterns "
                             f"like \"s:e:t\", got {raw!r}")
        return specs  # type: ignore[return-value]

    def check_layout(self, source: TensorType) -> list[AxisSpec]:
        specs = self.layout()
        if len(specs) > source.rank:
            raise self.error(f"layout has {len(specs)} entries for rank {source.rank}")
        expect_counts(self, self.base + sum(s.num_operands for s in specs), 1)
        for i, v in enumerate(self.operands[self.base:]):
            expect_index_like(self, v.type, f"index operand {i}")
        return specs

    def selected_shape(self, source: TensorType, specs: list[AxisSpec]) -> list[int | None]:
        """Static extents of the selection: untouched axes and full ``:`` slices keep theirs."""
        full = AxisSpec(False)
        padded = specs + [full] * (source.rank - len(specs))
        return [n if s == full else None for s, n in zip(padded, source.shape, strict=False) if not s.is_index]

    def may_trap(self) -> bool:
        """Static shapes and constant bounds decide the checks now; else at run time."""
        parts = [constant_of(v) for v in self.operands[self.base:]]
        if has_dynamic_shape(self) or any(p is None for p in parts):
            return True
        dest = static_shape(self.operand_types[self.base - 1])
        assert dest is not None
        try:
            # zero-stride views: indexing and broadcasting them cost nothing whatever the extents
            view = np.broadcast_to(np.empty((), np.int8), dest)
            selected = view[self.index_tuple(dest, parts)]
            if self.base == 2:  # insert_slice: the value must broadcast to the selection
                value = static_shape(self.operand_types[0])
                assert value is not None
                np.broadcast_to(np.broadcast_to(np.empty((), np.int8), value), selected.shape)
        except (WiaRuntimeError, ValueError):
            return True
        return False

    def index_tuple(self, shape: tuple[int, ...], parts: list[Any]) -> tuple[Any, ...]:
        it = iter(parts)
        out: list[int | slice] = []
        for axis, spec in enumerate(self.layout()):
            if spec.is_index:
                out.append(check_index(self, next(it), shape[axis], axis))
                continue
            start = int(next(it)) if spec.start else None
            stop = int(next(it)) if spec.stop else None
            step = int(next(it)) if spec.step else None
            if step == 0:
                raise WiaRuntimeError(f"'{self.name}': slice step is zero on axis {axis}")
            out.append(slice(start, stop, step))
        return tuple(out)


@register
class ExtractSliceOp(SliceOpBase):
    """``tensor.extract_slice %t, <parts> {layout}``: ``t[...]`` as a new tensor."""

    name = "tensor.extract_slice"

    def verify(self) -> None:
        source = expect_tensor(self, self.operand_types[0] if self.operands else None, "source")
        specs = self.check_layout(source)
        result = self.result.type
        got = result.shape if isinstance(result, TensorType) else ()
        want = self.selected_shape(source, specs)
        if len(got) != len(want):
            raise self.error(f"result {result} must have rank {len(want)}")
        expect_result_shape(self, result, source.dtype, want)

    def evaluate(self, args: list[Any]) -> list[Any]:
        x = np.asarray(args[0])
        return [finish(x[self.index_tuple(x.shape, args[1:])].copy(), self.result.type)]


@register
class InsertSliceOp(SliceOpBase):
    """``tensor.insert_slice %src, %dest, <parts> {layout}``: ``dest[...] = src``."""

    name = "tensor.insert_slice"
    base = 2

    def verify(self) -> None:
        if len(self.operands) < 2:
            raise self.error("expects a source and a destination")
        dest = expect_tensor(self, self.operand_types[1], "destination")
        value_dtype(self, self.operand_types[0], "source")
        self.check_layout(dest)
        if self.result.type != dest:
            raise self.error(f"result must have the destination's type {dest}")

    def evaluate(self, args: list[Any]) -> list[Any]:
        dest = np.array(args[1])
        index = self.index_tuple(dest.shape, args[2:])
        try:
            dest[index] = to_dtype(args[0], self.result.type.dtype)  # type: ignore[union-attr]
        except ValueError:
            raise WiaRuntimeError(f"'{self.name}': cannot assign shape {np.shape(args[0])} to "
                                  f"a slice of shape {dest[index].shape}") from None
        return [finish(dest, self.result.type)]


@register
class ExtractOp(Operation):
    """``tensor.extract %t, %i...``: one element; one index per axis."""

    name = "tensor.extract"
    traits = PURE

    def verify(self) -> None:
        source = expect_tensor(self, self.operand_types[0] if self.operands else None, "source")
        expect_counts(self, 1 + source.rank, 1)
        for i, v in enumerate(self.operands[1:]):
            expect_index_like(self, v.type, f"index operand {i}")
        expect_result_shape(self, self.result.type, source.dtype, ())

    def may_trap(self) -> bool:
        return element_may_trap(self, 0)

    def evaluate(self, args: list[Any]) -> list[Any]:
        x = np.asarray(args[0])
        return [finish(x[element_index(self, x.shape, args[1:])], self.result.type)]


@register
class InsertOp(Operation):
    """``tensor.insert %v, %dest, %i...``: a copy of dest with one element set (cast)."""

    name = "tensor.insert"
    traits = PURE

    def verify(self) -> None:
        if len(self.operands) < 2:
            raise self.error("expects a value and a destination")
        dest = expect_tensor(self, self.operand_types[1], "destination")
        expect_counts(self, 2 + dest.rank, 1)
        if isinstance(self.operand_types[0], TensorType):
            raise self.error(f"inserts a scalar, got {self.operand_types[0]}")
        value_dtype(self, self.operand_types[0], "value")
        for i, v in enumerate(self.operands[2:]):
            expect_index_like(self, v.type, f"index operand {i}")
        if self.result.type != dest:
            raise self.error(f"result must have the destination's type {dest}")

    def may_trap(self) -> bool:
        return element_may_trap(self, 1)

    def evaluate(self, args: list[Any]) -> list[Any]:
        dest = np.array(args[1])
        dtype = value_dtype(self, self.result.type, "result")
        dest[element_index(self, dest.shape, args[2:])] = to_dtype(args[0], dtype)
        return [finish(dest, self.result.type)]
