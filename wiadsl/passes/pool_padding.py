"""``fold-pool-padding``: a max pool of a ``-inf``-padded copy becomes a max pool with
``padding`` of the input itself (ir/ops_tensor.py).

A padded max pool is written (and imported from ONNX, onnx/ops/pool.py) as what it
computes, a copy of the input inside a band of ``-inf``:

    padded = full([N, C, H + pt + pb, W + pl + pr], -inf, f32);
    padded[:, :, pt:pt + H, pl:pl + W] = x;
    y = max_pool(padded, kernel=3, stride=2);

Lowered as written, that is a filled buffer, a copy of the input into it and the pool
reading it (ResNet-18's stem: 3.3 MB written and read again, 1.3 % of a call). With
the padding an attribute of the pool, the CPU backend's kernel reads the input in
place, the padding by masked loads (backends/llvm/depthwise.py), as it does for a
depthwise convolution's zeros.

What is matched: ``tensor.max_pool`` of a float ``P = insert_slice(x, full(-inf))``,
``x`` filling a constant step-1 box of the last two axes of a rank-4 ``P`` (its batch
and channel extents provably ``P``'s: passes/depthwise.py's ``padded``), with top and
left padding less than the kernel (the op's contract). ``P`` and its fill are removed
when the pools were their only readers.

Invariant: the function's meaning is kept: a window's taps in the band are -inf,
which no maximum takes (and a NaN still wins), as the taps the new op leaves out.
"""

from __future__ import annotations

from ..ir.builder import Builder
from ..ir.core import Operation
from ..ir.module import ModuleOp
from ..ir.ops_tensor import pool_padding
from ..ir.types import TensorType
from ..records import record
from .base import Pass, PassContext, register_pass
from .depthwise import padded
from .extents import Extents


def fold(pool: Operation, extents: Extents) -> bool:
    """Give ``pool`` its input's ``-inf`` band as ``padding``; whether it did."""
    p = pool.operands[0]
    ptype = p.type
    if not isinstance(ptype, TensorType) or not ptype.dtype.is_float or ptype.rank != 4 \
            or None in ptype.shape[2:] or any(pool_padding(pool)):
        return False
    src = padded(p, extents, float("-inf"))
    xt = src.x.type
    if src.x is p or not isinstance(xt, TensorType) or None in xt.shape[2:]:
        return False
    (kh, kw) = pool.attributes["kernel"]
    top, left = src.top, src.left
    bottom = ptype.shape[2] - top - xt.shape[2]  # type: ignore[operator]
    right = ptype.shape[3] - left - xt.shape[3]  # type: ignore[operator]
    if top >= kh or left >= kw:
        return False
    b = Builder.before(pool)
    b.loc = pool.loc
    attrs = {**pool.attributes, "padding": [top, left, bottom, right]}
    folded = b.value("tensor.max_pool", [src.x], pool.result.type, attrs, pool.result.name_hint)
    pool.result.replace_all_uses_with(folded)
    pool.erase()
    return True


@register_pass
@record(frozen=True)
class FoldPoolPadding(Pass):
    """max_pool(insert_slice(x, full(-inf))) -> max_pool(x) {padding}."""

    name = "fold-pool-padding"

    def run(self, module: ModuleOp, ctx: PassContext) -> None:
        from .dce import remove_dead_ops
        for func in module:
            extents = Extents()
            found = 0
            for block in func.blocks:
                for op in list(block.ops):
                    if op.name == "tensor.max_pool" and op.parent is not None and fold(op, extents):
                        found += 1
                        ctx.remark("fused", "a max pool reads its input in place: the -inf "
                                            "padded copy became its padding", op)
            if found:
                ctx.count("padded max pools", found)
                remove_dead_ops(func)
