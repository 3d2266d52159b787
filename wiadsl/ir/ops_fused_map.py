"""``tensor.fused_elementwise`` and ``tensor.fused_reduce`` (docs/ir.md, "Fused ops").

Invariants:
- Operands broadcast NumPy-style to the iteration shape S (rank >= 1); the
  bodies see one element of each. ``fused_elementwise`` results have shape S.
- ``fused_reduce`` reduces body #0's values over ``axes`` of S; its optional
  epilogue (body #1) yields further results of shape S, reading the reduced
  values broadcast back over S (a row kernel).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..dtypes import DType
from .numerics import finish
from .ops_base import attr_bool, attr_ints, normalize_axis, register
from .ops_fused_base import FusedOp, broadcast_all, run_body
from .types import TensorType, shapes_compatible

REDUCE_KINDS = ("sum", "prod", "max", "min", "mean")
_REDUCERS: dict[str, Callable[..., Any]] = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min, "mean": np.mean}


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
        outs = run_body(self.body(), broadcast_all(args, shape))
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

    def may_trap(self) -> bool:
        """As ``tensor.reduce_max``: max/min of zero elements fail."""
        shape = self.iteration_shape()
        empty = any(shape[a] in (None, 0) for a in self.axes())
        return super().may_trap() or (empty and any(
            k not in ("sum", "prod", "mean") for k in self.kinds()))

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
        arrays = broadcast_all(args, shape)
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
