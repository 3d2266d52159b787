"""FLOPs and bytes of one traced op, counted from its real operand and result shapes.

Conventions (what a roofline needs, not what the hardware did):
- bytes: every distinct tensor operand read once plus every result written once
  (the minimum traffic of the op; a kernel that re-reads moves more);
- FLOPs: a multiply-add is 2; a body op of a fused kernel (``arith.*`` except
  constants) is 1 per element it runs on; a reduction is 1 per input element;
  a pool is one op per window element; data movement (transpose, concat, cast,
  broadcast) is 0.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ..ir.core import Operation
from .trace import TracedOp


def _body_ops(op: Operation) -> int:
    """Scalar arithmetic ops in the op's regions (its fused epilogue or body)."""
    return sum(1 for region in op.regions for block in region.blocks for inner in block.ops
               if inner.name.startswith("arith.") and inner.name != "arith.constant")


def _size(values: Iterable[Any]) -> int:
    return max((int(np.asarray(v).size) for v in values), default=0)


def bytes_moved(t: TracedOp) -> int:
    seen: set[int] = set()
    total = 0
    for v, value in zip(t.op.operands, t.inputs, strict=True):
        if id(v) not in seen:
            seen.add(id(v))
            total += int(np.asarray(value).nbytes)
    return total + sum(int(np.asarray(r).nbytes) for r in t.outputs)


def flops(t: TracedOp) -> int:
    name = t.op.name.removeprefix("tensor.")
    out = _size(t.outputs)
    body = _body_ops(t.op)
    if name in ("matmul", "fused_matmul"):
        k = int(np.asarray(t.inputs[0]).shape[-1])
        return 2 * out * k + body * out
    if name in ("conv2d", "fused_conv2d"):
        w = np.asarray(t.inputs[1]).shape  # O, C, kh, kw
        return 2 * out * int(np.prod(w[1:])) + body * out
    if name in ("max_pool", "avg_pool"):
        kh, kw = t.op.attributes.get("kernel", [2, 2])
        return out * int(kh) * int(kw)
    if name == "fused_reduce":
        n_in = _size(t.inputs)
        kinds = t.op.attributes.get("kinds", ["sum"])
        return n_in * len(kinds) + body * n_in
    if name.startswith(("reduce_", "arg")):
        return _size(t.inputs)
    if name == "fused_elementwise":
        return body * out
    if name in ("transpose", "concat", "broadcast_to", "cast", "full", "arange", "extract_slice",
                "insert_slice", "reshape", "constant"):
        return 0
    return out  # one op per element for the plain elementwise ops
