"""``bn-fold``: fold a per-channel affine chain (inference batch norm) into the
constant weights of the conv2d/matmul before it.

After ``inline`` and ``canonicalize``, ``nn.batch_norm`` is ``((y - mean) * rsqrt(var +
eps)) * gamma + beta`` on the conv's output; with constant parameters the chain
folds to ``y * s + t`` with per-channel ``s`` and ``t``. When the weight is a
``tensor.constant``, ``conv(x, W) * s + t == conv(x, W * s) + t`` (equal up to
rounding), so the chain becomes one conv with scaled weights and one add.

Invariants: only single-use links of add/sub/mul/div by constants that
broadcast per output channel ([C,1,1], [1,C,1,1], a scalar; [N] for matmul)
are folded; the chain's result type must equal the product's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir.builder import Builder
from ..ir.core import Operation
from ..ir.module import ModuleOp
from ..ir.ops import constant_of
from ..ir.types import TensorType
from .base import Pass, PassContext, register_pass


def channel_vector(op: Operation, value: np.ndarray, channels: int) -> np.ndarray | None:
    """``value`` as a [C] per-channel vector, or None when it varies along other axes."""
    arr = np.asarray(value, dtype=np.float64)
    rank = op.result.type.rank  # type: ignore[union-attr]
    axis = 1 if op.name == "tensor.conv2d" else rank - 1
    if arr.ndim > rank:
        return None
    full = arr.reshape((1,) * (rank - arr.ndim) + arr.shape)
    if any(n != 1 for i, n in enumerate(full.shape) if i != axis):
        return None
    vec = full.reshape(-1)
    return np.broadcast_to(vec, (channels,)).copy() if vec.size in (1, channels) else None


def fold_chain(product: Operation, ctx: PassContext) -> bool:
    weight = constant_of(product.operands[1])
    t = product.result.type
    if weight is None or not isinstance(t, TensorType) or not t.dtype.is_float:
        return False
    channels = weight.shape[0] if product.name == "tensor.conv2d" else weight.shape[-1]
    scale, shift = np.ones(channels), np.zeros(channels)
    cur, last = product.result, None
    while len(cur.uses) == 1:
        user = cur.users[0]
        if user.name not in ("tensor.add", "tensor.sub", "tensor.mul", "tensor.div") \
                or user.result.type != t:
            break
        a, b = user.operands
        other = b if a is cur else a
        c = constant_of(other)
        vec = channel_vector(product, c, channels) if c is not None else None
        if vec is None or (user.name in ("tensor.sub", "tensor.div") and other is not b):
            break
        if user.name == "tensor.add":
            shift = shift + vec
        elif user.name == "tensor.sub":
            shift = shift - vec
        elif user.name == "tensor.mul":
            scale, shift = scale * vec, shift * vec
        else:
            scale, shift = scale / vec, shift / vec
        cur, last = user.result, user
    if last is None:
        return False
    w = np.asarray(weight, dtype=np.float64)
    w = w * (scale[:, None, None, None] if product.name == "tensor.conv2d" else scale)
    b = Builder.before(product)
    wt = product.operands[1].type
    new_w = b.constant(w.astype(wt.dtype.numpy), wt, "w_folded")  # type: ignore[union-attr]
    product.set_operand(1, new_w)
    shape = (channels, 1, 1) if product.name == "tensor.conv2d" else (channels,)
    b.set_insertion_point_before(last)
    bias = b.constant(shift.reshape(shape).astype(t.dtype.numpy), TensorType(t.dtype, shape), "b_folded")
    out = b.value("tensor.add", [product.result, bias], t, name=cur.name_hint)
    cur.replace_all_uses_with(out)
    ctx.count("chains folded")
    ctx.remark("folded", f"batch-norm chain folded into the weights of {product.name}", product)
    return True


@register_pass
@dataclass(frozen=True)
class BatchNormFold(Pass):
    name = "bn-fold"

    def run(self, module: ModuleOp, ctx: PassContext) -> None:
        for func in module:
            for op in list(func.walk()):
                if op.name in ("tensor.conv2d", "tensor.matmul") and op.parent is not None:
                    fold_chain(op, ctx)
        from .dce import remove_dead_ops
        for func in module:
            remove_dead_ops(func)
