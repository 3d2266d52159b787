"""``tensor.fused_matmul``, ``tensor.fused_conv2d`` and ``tensor.fused_depthwise_conv2d``:
a product plus an epilogue body.

Invariants:
- The product of operands 0 and 1 is exactly ``tensor.matmul`` / ``tensor.conv2d`` /
  ``tensor.depthwise_conv2d``
  (the unfused op's own ``evaluate``); the accumulator dtype is theirs.
- Epilogue operands broadcast *into* the product's shape and never grow it
  (statically checked by ``verify``; at run time a violation is a
  ``WiaRuntimeError``, never a silently different shape). Fusion only forms
  these ops when that is provable (``passes.extents``).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from ..diagnostics import WiaRuntimeError
from .core import Value
from .numerics import finish
from .ops_base import attr_ints, expect_tensor, has_dynamic_shape, op_class, register
from .ops_fused_base import FusedOp, broadcast_all, run_body
from .ops_tensor import matmul_shape
from .types import ScalarType, TensorType, shapes_compatible


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

    def may_trap(self) -> bool:
        return super().may_trap() or has_dynamic_shape(self)

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
        for a in args[2:]:
            shape = np.shape(a)
            if len(shape) > acc.ndim or any(
                    d not in (1, p) for d, p in zip(reversed(shape), reversed(acc.shape), strict=False)):
                raise WiaRuntimeError(f"'{self.name}': epilogue operand of shape {shape} does not "
                                      f"broadcast into the product of shape {acc.shape}")
        outs = run_body(self.body(), [acc, *broadcast_all(args[2:], acc.shape)])
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
        hw: list[int | None] = []
        for i in (0, 1):
            size, kernel = a.shape[2 + i], b.shape[2 + i]
            hw.append(None if size is None or kernel is None else
                      (size + 2 * pad[i] - kernel) // stride[i] + 1)
        return (a.shape[0], b.shape[0], *hw)


@register
class FusedDepthwiseConv2dOp(FusedProductOp):
    """``tensor.depthwise_conv2d {stride, dilation, padding}`` of operands 0 and 1, then
    the epilogue body. The output extents are the result's (the epilogue keeps them)."""

    name = "tensor.fused_depthwise_conv2d"
    product = "tensor.depthwise_conv2d"

    def product_shape(self, a: TensorType, b: TensorType) -> tuple[int | None, ...]:
        r = self.result.type
        if a.rank != 4 or b.rank != 3 or not isinstance(r, TensorType) or r.rank != 4:
            raise ValueError("depthwise_conv2d takes NCHW x [kh, kw, C] to NCHW")
        return (a.shape[0], a.shape[1], *r.shape[2:])
