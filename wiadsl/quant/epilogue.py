"""Scalar bodies of the int8 products: the dequantize prologue and the requantize tail.

A quantized product is ``tensor.fused_matmul`` / ``tensor.fused_conv2d`` of two
i8 -> i32 casts; its body receives the i32 accumulator ``acc``, the combined
scale ``s = s_x * s_w`` (per tensor or per output channel) and, for an
asymmetric activation, the zero-point correction ``corr = zp_x * sum_k q_w``:

    y = f32(acc - corr) * s          # dequantize (``exact``: never FMA-contracted)
    ...the original f32 epilogue on y (bias, activation, residual)...
    q = requantize(y, s_out, zp_out) # optional: the next layer's quantize, fused

Invariants:
- ``f32(acc - corr) * s`` is the float value of ``sum_k (q_x - zp_x) * q_w`` times
  the scale: exactly what dequantizing the integer product gives, rounded once.
- ``requantize`` equals ``tensor.quantize`` (LANGUAGE.md §7) for every non-NaN y:
  ``t = y / s`` is clamped to [-256, 256] first (outside it the result clamps to
  -128/127 either way), so ``(t + 1.5 * 2**23) - 1.5 * 2**23`` is rint, ties to
  even, without a select; the ops are all in the systolic vector unit's set.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..dtypes import DType
from ..ir.builder import Builder
from ..ir.copying import clone_op
from ..ir.core import Block, Value
from ..ir.ops import create_op
from ..ir.types import ScalarType

F32, I32, I8 = ScalarType(DType.F32), ScalarType(DType.I32), ScalarType(DType.I8)
RINT_MAGIC = 1.5 * 2.0 ** 23


def dequantize_prologue(b: Builder, acc: Value, scale: Value, corr: Value | None) -> Value:
    """``f32(acc - corr) * scale`` as body ops at ``b``."""
    if corr is not None:
        acc = b.value("arith.sub", [acc, corr], I32)
    f = b.value("arith.cast", [acc], F32)
    return b.value("arith.mul", [f, scale], F32, {"exact": True})


def requantize(b: Builder, y: Value, scale: float, zp: int) -> Value:
    """``clip(rint(y / scale) + zp, -128, 127) -> i8`` with body-safe ops (see module doc)."""
    def c(v: float) -> Value:
        return b.constant(v, F32)
    t = b.value("arith.div", [y, c(scale)], F32)
    t = b.value("arith.min", [b.value("arith.max", [t, c(-256.0)], F32), c(256.0)], F32)
    r = b.value("arith.add", [t, c(RINT_MAGIC)], F32, {"exact": True})
    r = b.value("arith.sub", [r, c(RINT_MAGIC)], F32, {"exact": True})
    r = b.value("arith.add", [r, c(float(zp))], F32, {"exact": True})
    r = b.value("arith.min", [b.value("arith.max", [r, c(-128.0)], F32), c(127.0)], F32)
    return b.value("arith.cast", [r], I8)


def splice_body(block: Block, old: Block | None, acc: Value, extra: Sequence[Value]) -> list[Value]:
    """Copy ``old``'s ops into ``block`` (at its end) with ``acc`` for its first argument
    and ``extra`` for the others; the values it yields (``[acc]`` without a body)."""
    if old is None:
        return [acc]
    mapping = {id(old.args[0]): acc}
    mapping.update({id(a): v for a, v in zip(old.args[1:], extra, strict=True)})
    for op in old.ops:
        if op.name == "tensor.yield":
            return [mapping.get(id(v), v) for v in op.operands]
        block.append(clone_op(op, mapping))
    raise ValueError("fused body without yield")


def finish(block: Block, values: Sequence[Value]) -> None:
    block.append(create_op("tensor.yield", list(values)))
