"""``fuse``: operator fusion into ``tensor.fused_*`` ops, with a legality/cost check.

Order (each step sees the previous one's output), per block:
1. epilogues into ``conv2d``/``matmul`` (``fuse_products``): the chain of
   single-use elementwise ops of the product's shape (bias, batch norm,
   activation, residual add, cast, quantize);
2. reductions (``fuse_reduce``): elementwise producers into the reduction body,
   and elementwise consumers of the reduced value (broadcast back over the row)
   into its epilogue - softmax's ``exp(x - m) / sum`` - when the row fits on chip;
3. vertical elementwise clusters into ``fused_elementwise`` (``fuse_elementwise``);
4. horizontal: independent ``fused_elementwise`` ops of one static result shape
   that read a common input become one op with several results.

Legality (the seed's ``can_fuse``): a producer whose result has other consumers,
or escapes (returned, passed to another block), is not fused; nor a cluster that
would exceed ``max_inputs`` operands or ``max_ops`` body ops (register pressure),
nor a reduction epilogue whose static row exceeds ``row_limit`` elements, nor an
operand whose dynamic extents are not *provably* those it is broadcast against
(``extents``). Every refusal with a reason is an optimization remark; so is every
fusion. Fused ops take the ``loc`` of the op they are rooted at.
"""

from __future__ import annotations

from ..ir.module import ModuleOp
from ..records import record
from .base import Pass, PassContext, register_pass
from .fuse_elementwise import fuse_elementwise, fuse_horizontal
from .fuse_products import fuse_products
from .fuse_reduce import REDUCE_KINDS, fuse_reductions
from .fusion_state import FusionState

__all__ = ["REDUCE_KINDS", "Fuse"]


@register_pass
@record(frozen=True)
class Fuse(Pass):
    """Options: ``max_inputs`` (operands per fused op), ``max_ops`` (body size),
    ``row_limit`` (elements of a reduced row kept on chip), ``min_ops`` (smallest
    elementwise cluster worth a fused op), ``horizontal``."""

    name = "fuse"
    max_inputs: int = 16
    max_ops: int = 64
    row_limit: int = 16384
    min_ops: int = 2
    horizontal: bool = True

    def run(self, module: ModuleOp, ctx: PassContext) -> None:
        for func in module:
            for block in func.blocks:
                st = FusionState(block, ctx, self)
                st.renumber()
                fuse_products(st)
                fuse_reductions(st)
                fuse_elementwise(st)
                if self.horizontal:
                    fuse_horizontal(st)
