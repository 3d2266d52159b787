"""``mixed-precision{dtype=bf16}``: f16/bf16 storage, f32 accumulation.

Tensor-level rewrite (run it before ``fuse``; it leaves fused ops alone):
- ``tensor.matmul`` / ``tensor.conv2d`` with f32 operands read each operand
  through ``cast(cast(x, D), f32)`` (the value as stored in D) and accumulate in
  f32 (the product stays an f32 op: the CPU backend's packed f32 GEMM, the
  systolic array's D-input/f32-accumulate mode, which absorbs the casts); the
  result is rounded to D (stored in D) for its users.
- reductions (``reduce_sum mean max min prod``) read D-rounded inputs and
  accumulate in f32; their result is rounded to D. Softmax (``nn.softmax``:
  ``reduce_max``, ``exp``, ``reduce_sum``, ``div``) is covered by this rule: its
  sums run in f32 over D-rounded values, its elementwise steps in f32.
- Elementwise ops compute in f32 on what they read (the rounding points are at
  the products and reductions, where a value is written to memory).

Tolerances (documented contract, checked by tests/quant): with u = 2**-8 (bf16)
or 2**-11 (f16), a matmul result y against the f32 product y32 satisfies
``|y - y32| <= 3u * (|A| @ |B|) + 1e-6`` elementwise (two operand roundings, one
result rounding, f32 accumulation noise); a reduction likewise with
``sum |x|``; softmax outputs are within ``4u + 1.5u * max |logit|`` absolute
(the rounding of the logits themselves dominates). f16 overflows to inf
above 65504 (a value the f32 program would carry); bf16 has f32's range.
"""

from __future__ import annotations

from typing import ClassVar

from ..diagnostics import WiaUsageError
from ..dtypes import DType
from ..ir.builder import Builder
from ..ir.core import Operation, Value
from ..ir.module import ModuleOp
from ..ir.types import ScalarType, TensorType
from ..records import record
from .base import Pass, PassContext, register_pass

ROUNDED = {"tensor.matmul", "tensor.conv2d", "tensor.reduce_sum", "tensor.reduce_mean",
           "tensor.reduce_max", "tensor.reduce_min", "tensor.reduce_prod"}
STORAGE = {"bf16": DType.BF16, "f16": DType.F16}


def _f32(t: object) -> bool:
    return isinstance(t, (TensorType, ScalarType)) and t.dtype is DType.F32


@register_pass
@record(frozen=True)
class MixedPrecision(Pass):
    """Option ``dtype``: the storage dtype, ``bf16`` (default) or ``f16``."""

    name: ClassVar[str] = "mixed-precision"
    dtype: str = "bf16"

    def run(self, module: ModuleOp, ctx: PassContext) -> None:
        if self.dtype not in STORAGE:
            raise WiaUsageError(f"option 'dtype' of pass 'mixed-precision' must be bf16 or f16, got {self.dtype!r}")
        storage = STORAGE[self.dtype]
        for f in module:
            for block in f.blocks:
                for op in list(block.ops):
                    if op.name in ROUNDED and _f32(op.results[0].type) and all(
                            _f32(t) for t in op.operand_types):
                        self.round_op(op, storage)
                        ctx.count("ops in mixed precision")

    @staticmethod
    def round_op(op: Operation, storage: DType) -> None:
        b = Builder(op.parent)
        b.set_insertion_point_before(op)
        for i, v in enumerate(op.operands):
            op.set_operand(i, _round(b, v, storage))
        b.set_insertion_point_after(op)
        r = op.results[0]
        users = [u for u in r.uses]
        rounded = _round(b, r, storage)
        for use in users:
            use.owner.set_operand(use.index, rounded)


def _round(b: Builder, v: Value, storage: DType) -> Value:
    """``cast(cast(v, storage), f32)``: v as stored in ``storage``, read back in f32."""
    t = v.type
    narrow = TensorType(storage, t.shape) if isinstance(t, TensorType) else ScalarType(storage)
    d = b.value("tensor.cast" if isinstance(t, TensorType) else "arith.cast", [v], narrow,
                name=(v.name_hint + "." + storage.ir_name) if v.name_hint else None)
    return b.value("tensor.cast" if isinstance(t, TensorType) else "arith.cast", [d], t)
