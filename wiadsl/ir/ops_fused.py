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

Modules: ``ops_fused_base`` (``tensor.yield``, ``FusedOp``, ``run_body``),
``ops_fused_map`` (elementwise, reduce), ``ops_fused_product`` (matmul, conv2d, depthwise_conv2d).
This module registers them all and is the public import path.
"""

from __future__ import annotations

from .ops_fused_base import FusedOp, YieldOp, broadcast_all, new_body, run_body, scalar_of
from .ops_fused_map import REDUCE_KINDS, FusedElementwiseOp, FusedReduceOp
from .ops_fused_product import (
    FusedConv2dOp,
    FusedDepthwiseConv2dOp,
    FusedMatmulOp,
    FusedProductOp,
)

FUSED_OPS = ("tensor.fused_elementwise", "tensor.fused_reduce", "tensor.fused_matmul",
             "tensor.fused_conv2d", "tensor.fused_depthwise_conv2d")

__all__ = ["FUSED_OPS", "REDUCE_KINDS", "FusedConv2dOp", "FusedDepthwiseConv2dOp", "FusedElementwiseOp", "FusedMatmulOp",
           "FusedOp", "FusedProductOp", "FusedReduceOp", "YieldOp", "broadcast_all", "new_body",
           "run_body", "scalar_of"]
