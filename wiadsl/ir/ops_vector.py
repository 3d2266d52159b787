"""SIMD vectors at the loop level: contiguous vector loads/stores, splats, lane
reductions, and the software-prefetch hint.

``vector<NxT>`` values (types.VectorType) exist only in loop-level IR, made by the
``vectorize`` pass (wiadsl/loops/vectorize.py). Elementwise ``arith`` ops, compares,
``arith.select`` and ``arith.cast`` take vector operands too (lane by lane).

Text forms:
    %v = loop.vload %buf, %off : (tensor<?xf32>, index) -> vector<8xf32>
    loop.vstore %v, %buf, %off : (vector<8xf32>, tensor<?xf32>, index) -> ()
    %s = loop.broadcast %x : f32 -> vector<8xf32>
    %r = loop.vreduce %v {kind = "add"} : vector<8xf32> -> f32
    loop.prefetch %buf, %off : (tensor<?xf32>, index) -> ()

Semantics:
- ``vload``/``vstore`` move ``lanes`` contiguous elements starting at the linear
  offset ``off``; the whole range must lie in the buffer (a ``WiaRuntimeError``
  otherwise, like ``loop.load``/``loop.store``).
- ``vreduce`` combines the lanes with the scalar op ``arith.<kind>`` (``add mul
  max min``). The interpreter folds lane 0, 1, ... in order; a backend may use
  any order (float add/mul then differ by rounding: the ``vectorize`` pass only
  makes them for reductions it may reassociate).
- ``prefetch`` is a hint with no effect on values and never fails, whatever the
  offset (the interpreter ignores it; the CPU backend clamps the address into
  the buffer and emits ``llvm.prefetch``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..diagnostics import WiaRuntimeError
from .core import Operation
from .numerics import finish
from .ops_base import PURE, attr_choice, expect_counts, expect_index, expect_tensor, register
from .ops_elementwise import ELEMENTWISE_BY_NAME, apply_elementwise
from .types import IRType, ScalarType, VectorType

#: ``loop.vreduce`` kinds: the scalar op that combines two lanes.
REDUCE_KINDS = ("add", "mul", "max", "min")


def _vector(op: Operation, t: IRType, what: str) -> VectorType:
    if not isinstance(t, VectorType):
        raise op.error(f"{what} must be a vector, got {t}")
    return t


def _check_range(op: Operation, buf: np.ndarray, off: Any, lanes: int) -> int:
    i = int(off)
    if i < 0 or i + lanes > buf.size:
        raise WiaRuntimeError(f"'{op.name}': lanes [{i}, {i + lanes}) outside a buffer of "
                              f"{buf.size} elements")
    return i


@register
class VLoadOp(Operation):
    """``loop.vload %buf, %off``: ``lanes`` contiguous elements from a linear offset."""

    name = "loop.vload"
    traits = PURE

    def verify(self) -> None:
        expect_counts(self, 2, 1)
        buf = expect_tensor(self, self.operand_types[0], "buffer")
        expect_index(self, self.operand_types[1], "offset")
        v = _vector(self, self.result.type, "result")
        if v.dtype is not buf.dtype:
            raise self.error(f"result must be a vector of {buf.dtype.ir_name}, got {v}")

    def may_trap(self) -> bool:
        return True

    def evaluate(self, args: list[Any]) -> list[Any]:
        t = self.result.type
        assert isinstance(t, VectorType)
        i = _check_range(self, args[0], args[1], t.lanes)
        return [finish(args[0].reshape(-1)[i:i + t.lanes].copy(), t)]


@register
class VStoreOp(Operation):
    """``loop.vstore %v, %buf, %off``: write the lanes to contiguous elements in place."""

    name = "loop.vstore"

    def verify(self) -> None:
        expect_counts(self, 3, 0)
        v = _vector(self, self.operand_types[0], "stored value")
        buf = expect_tensor(self, self.operand_types[1], "buffer")
        expect_index(self, self.operand_types[2], "offset")
        if v.dtype is not buf.dtype:
            raise self.error(f"stores {buf.dtype.ir_name} vectors, got {v}")

    def evaluate(self, args: list[Any]) -> list[Any]:
        v, buf = args[0], args[1]
        i = _check_range(self, buf, args[2], v.shape[0])
        buf.reshape(-1)[i:i + v.shape[0]] = v
        return []


@register
class BroadcastOp(Operation):
    """``loop.broadcast %x : f32 -> vector<8xf32>``: every lane holds the scalar."""

    name = "loop.broadcast"
    traits = PURE

    def verify(self) -> None:
        expect_counts(self, 1, 1)
        v = _vector(self, self.result.type, "result")
        if self.operand_types[0] != v.element:
            raise self.error(f"broadcasts a {v.dtype.ir_name} scalar to {v}, got {self.operand_types[0]}")

    def evaluate(self, args: list[Any]) -> list[Any]:
        t = self.result.type
        assert isinstance(t, VectorType)
        return [finish(np.full(t.lanes, args[0], dtype=t.dtype.numpy), t)]


@register
class VReduceOp(Operation):
    """``loop.vreduce %v {kind}``: the lanes combined by ``arith.<kind>`` -> one scalar."""

    name = "loop.vreduce"
    traits = PURE

    def verify(self) -> None:
        expect_counts(self, 1, 1)
        kind = attr_choice(self, "kind", REDUCE_KINDS)
        v = _vector(self, self.operand_types[0], "operand")
        if self.result.type != v.element:
            raise self.error(f"result must be {v.dtype.ir_name}, got {self.result.type}")
        if not ELEMENTWISE_BY_NAME[kind].accepts(v.dtype):
            raise self.error(f"cannot reduce {v} with {kind}")

    def evaluate(self, args: list[Any]) -> list[Any]:
        t = self.result.type
        assert isinstance(t, ScalarType)
        fn = ELEMENTWISE_BY_NAME[self.attributes["kind"]]
        lanes = np.asarray(args[0])
        acc = lanes[0]
        for x in lanes[1:]:
            acc = apply_elementwise(fn, [acc, x], t.dtype)
        return [finish(acc, t)]


@register
class PrefetchOp(Operation):
    """``loop.prefetch %buf, %off``: a cache hint for the element at ``off``; no
    effect on values, never fails (any offset)."""

    name = "loop.prefetch"

    def verify(self) -> None:
        expect_counts(self, 2, 0)
        expect_tensor(self, self.operand_types[0], "buffer")
        expect_index(self, self.operand_types[1], "offset")

    def evaluate(self, args: list[Any]) -> list[Any]:
        return []


__all__ = ["BroadcastOp", "PrefetchOp", "REDUCE_KINDS", "VLoadOp", "VReduceOp", "VStoreOp"]
