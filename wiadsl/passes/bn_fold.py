"""``bn-fold``: fold a per-channel affine chain (inference batch norm) into the
weights of the conv2d/matmul before it.

After ``inline`` and ``canonicalize``, ``nn.batch_norm`` is ``((y - mean) * rsqrt(var +
eps)) * gamma + beta`` on the product's output: a chain ``y * s + t`` with
per-channel ``s`` and ``t``. Since ``conv(x, W) * s + t == conv(x, W * s) + t``
(equal up to rounding), the chain becomes one product with scaled weights and
one bias add. Two ways to know the weights and parameters do not change:
- they are constants (``tensor.constant``/``arith.constant``): ``s`` and ``t``
  are computed now, in float64, and the new weight is a constant;
- they are *constant inputs*: kernel parameters named in the function attribute
  ``const_args = ["w", "gamma", ...]`` (``mark_const_args``; ``shape-specialize``
  sets it from its ``const_args`` option), or pure ops of those. Then ``s``, ``t``
  and ``W * s`` are emitted as IR on the [C] vectors and the weight - work on the
  parameters, not on activations, which a runtime may hoist out of calls.

Invariants: only single-use links of add/sub/mul/div (the chain value on the
left of sub/div) by values that broadcast per output channel ([C,1,1],
[1,C,1,1], [1], a scalar; [C] or [1,C] for matmul) are folded; the chain's
result type must equal the product's; new ops take the product's ``loc``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from ..ir.builder import Builder
from ..ir.core import BlockArgument, Operation, OpResult, Trait, Value
from ..ir.module import FuncOp, ModuleOp
from ..ir.ops import constant_of
from ..ir.types import TensorType
from ..records import record
from .base import Pass, PassContext, register_pass

LINKS = ("tensor.add", "tensor.sub", "tensor.mul", "tensor.div")


def mark_const_args(func: FuncOp, names: Iterable[str]) -> None:
    """Record that the parameters ``names`` hold the same values on every call."""
    known = {a.name_hint for a in func.args}
    names = list(names)
    unknown = [n for n in names if n not in known]
    if unknown:
        from ..diagnostics import WiaUsageError
        raise WiaUsageError(f"@{func.name} has no parameter(s) {', '.join(unknown)}")
    func.attributes["const_args"] = sorted(set(func.attributes.get("const_args", [])) | set(names))


def const_like(v: Value, const_args: set[str], depth: int = 0) -> bool:
    """``v`` is the same on every call: a constant, a ``const_args`` parameter, or
    a pure region-free op of such values."""
    if constant_of(v) is not None:
        return True
    if isinstance(v, BlockArgument):
        region = v.block.parent
        func = region.parent if region is not None else None
        return getattr(func, "entry", None) is v.block and v.name_hint in const_args
    assert isinstance(v, OpResult)
    op = v.op
    if depth > 32 or Trait.PURE not in op.traits or op.regions or not op.operands:
        return False
    return all(const_like(x, const_args, depth + 1) for x in op.operands)


def channel_axis(product: Operation) -> int:
    rank = product.result.type.rank  # type: ignore[union-attr]
    return 1 if product.name == "tensor.conv2d" else rank - 1


def per_channel(product: Operation, t: object, channels: int) -> bool:
    """A value of type ``t`` varies at most along the product's channel axis."""
    if not isinstance(t, TensorType):
        return True
    rank, axis = product.result.type.rank, channel_axis(product)  # type: ignore[union-attr]
    if t.rank > rank:
        return False
    full = (1,) * (rank - t.rank) + t.shape
    return all(n == 1 for i, n in enumerate(full) if i != axis) and full[axis] in (1, channels)


def channel_vector(op: Operation, value: np.ndarray, channels: int) -> np.ndarray | None:
    """``value`` as a [C] per-channel vector, or None when it varies along other axes."""
    arr = np.asarray(value, dtype=np.float64)
    rank = op.result.type.rank  # type: ignore[union-attr]
    axis = channel_axis(op)
    if arr.ndim > rank:
        return None
    full = arr.reshape((1,) * (rank - arr.ndim) + arr.shape)
    if any(n != 1 for i, n in enumerate(full.shape) if i != axis):
        return None
    vec = full.reshape(-1)
    return np.broadcast_to(vec, (channels,)).copy() if vec.size in (1, channels) else None


def affine_chain(product: Operation, channels: int, const_args: set[str]
                 ) -> list[tuple[Operation, Value]]:
    """The foldable links after ``product``: (op, its per-channel operand)."""
    t = product.result.type
    links: list[tuple[Operation, Value]] = []
    cur = product.result
    while len(cur.uses) == 1:
        user = cur.users[0]
        if user.name not in LINKS or user.result.type != t:
            break
        a, b = user.operands
        other = b if a is cur else a
        if other is cur or (user.name in ("tensor.sub", "tensor.div") and other is not b):
            break
        if not const_like(other, const_args) or not per_channel(product, other.type, channels):
            break
        links.append((user, other))
        cur = user.result
    return links


def fold_numeric(product: Operation, links: list[tuple[Operation, Value]], weight: np.ndarray,
                 channels: int, ctx: PassContext) -> bool:
    """Constants everywhere: scale and shift computed now, in float64."""
    scale, shift = np.ones(channels), np.zeros(channels)
    for user, other in links:
        vec = channel_vector(product, constant_of(other), channels)  # type: ignore[arg-type]
        if vec is None:
            return False
        if user.name == "tensor.add":
            shift = shift + vec
        elif user.name == "tensor.sub":
            shift = shift - vec
        elif user.name == "tensor.mul":
            scale, shift = scale * vec, shift * vec
        else:
            scale, shift = scale / vec, shift / vec
    t = product.result.type
    assert isinstance(t, TensorType)
    w = np.asarray(weight, dtype=np.float64)
    w = w * (scale[:, None, None, None] if product.name == "tensor.conv2d" else scale)
    b = Builder.before(product)
    b.loc = product.loc
    wt = product.operands[1].type
    product.set_operand(1, b.constant(w.astype(wt.dtype.numpy), wt, "w_folded"))  # type: ignore[union-attr]
    shape = (channels, 1, 1) if product.name == "tensor.conv2d" else (channels,)
    last = links[-1][0]
    b.set_insertion_point_before(last)
    bias = b.constant(shift.reshape(shape).astype(t.dtype.numpy), TensorType(t.dtype, shape), "b_folded")
    finish(product, last, b.value("tensor.add", [product.result, bias], t, name=last.result.name_hint))
    return True


def hoist_before(v: Value, anchor: Operation) -> None:
    """Move the (pure, const-like) ops computing ``v`` that follow ``anchor`` in its
    block to just before it, operands first, so they dominate ``anchor``."""
    if not isinstance(v, OpResult) or v.op.parent is not anchor.parent:
        return
    block = anchor.parent
    assert block is not None
    op = v.op
    if block.ops.index(op) < block.ops.index(anchor):
        return
    for x in op.operands:
        hoist_before(x, anchor)
    op.detach()
    anchor.insert_before(op)


def fold_symbolic(product: Operation, links: list[tuple[Operation, Value]], channels: int) -> None:
    """Constant inputs: ``s``, ``t`` and ``W * s`` emitted as IR on [C] vectors."""
    t = product.result.type
    assert isinstance(t, TensorType)
    f = t.dtype
    for _, other in links:
        hoist_before(other, product)
    b = Builder.before(product)
    b.loc = product.loc
    vec_t = TensorType(f, (channels,))
    scale: Value | None = None
    shift: Value | None = None

    def vec(v: Value) -> Value:
        if not isinstance(v.type, TensorType):
            # a scalar link (``matmul(...) - 1.5``): a 1-element vector, so the
            # tensor.* ops below stay well-typed (fuzz seed 11000075)
            return b.value("tensor.broadcast_to", [v], TensorType(f, (1,)))
        if v.type.shape == (channels,):
            return v
        # links are per_channel, so their extents are static; the None check is for mypy
        dims = [d for d in v.type.shape if d is not None]
        static = len(dims) == v.type.rank
        n = channels if static and channels in dims and math.prod(dims) == channels else 1
        return b.value("tensor.reshape", [v], TensorType(f, (n,)))

    def binop(name: str, x: Value, y: Value) -> Value:
        shapes = [v.type.shape for v in (x, y) if isinstance(v.type, TensorType)]
        rt = vec_t if any(s == (channels,) for s in shapes) else (
            TensorType(f, (1,)) if shapes else x.type)
        return b.value(name, [x, y], rt)

    for user, other in links:
        v = vec(other)
        if user.name == "tensor.add":
            shift = v if shift is None else binop("tensor.add", shift, v)
        elif user.name == "tensor.sub":
            shift = binop("tensor.sub", shift, v) if shift is not None else \
                b.value("tensor.neg", [v], v.type)
        elif user.name == "tensor.mul":
            scale = v if scale is None else binop("tensor.mul", scale, v)
            shift = None if shift is None else binop("tensor.mul", shift, v)
        else:
            one = b.constant(1.0, v.type if not isinstance(v.type, TensorType) else
                             TensorType(f, v.type.shape))
            scale = binop("tensor.div", one, v) if scale is None else binop("tensor.div", scale, v)
            shift = None if shift is None else binop("tensor.div", shift, v)
    if scale is not None:
        w = product.operands[1]
        wt = w.type
        assert isinstance(wt, TensorType)
        s = scale
        if isinstance(s.type, TensorType) and product.name == "tensor.conv2d":
            s = b.value("tensor.reshape", [s], TensorType(f, (s.type.shape[0], 1, 1, 1)))
        product.set_operand(1, b.value("tensor.mul", [w, s], wt, name="w_folded"))
    last = links[-1][0]
    if shift is None:
        finish(product, last, product.result)
        return
    b.set_insertion_point_before(last)
    if isinstance(shift.type, TensorType) and product.name == "tensor.conv2d":
        shift = b.value("tensor.reshape", [shift], TensorType(f, (shift.type.shape[0], 1, 1)))
    finish(product, last, b.value("tensor.add", [product.result, shift], t, name=last.result.name_hint))


def finish(product: Operation, last: Operation, out: Value) -> None:
    """Point the chain's users at ``out`` (the dead links go with ``dce``)."""
    cur = last.result
    if out is not cur:
        cur.replace_all_uses_with(out)
        if out.name_hint is None:
            out.name_hint = cur.name_hint


def fold_chain(product: Operation, ctx: PassContext, const_args: set[str]) -> bool:
    t = product.result.type
    w = product.operands[1]
    if not isinstance(t, TensorType) or not t.dtype.is_float or not isinstance(w.type, TensorType):
        return False
    channels = w.type.shape[0] if product.name == "tensor.conv2d" else w.type.shape[-1]
    if channels is None or not const_like(w, const_args):
        return False
    links = affine_chain(product, channels, const_args)
    if not links:
        return False
    weight = constant_of(w)
    if weight is not None and all(constant_of(o) is not None for _, o in links):
        if not fold_numeric(product, links, weight, channels, ctx):
            return False
        how = "constant"
    else:
        fold_symbolic(product, links, channels)
        how = "constant-input"
    ctx.count("chains folded")
    ctx.remark("folded", f"{len(links)}-op affine (batch-norm) chain folded into the "
                         f"{how} weights of {product.name}", product)
    return True


@register_pass
@record(frozen=True)
class BatchNormFold(Pass):
    name = "bn-fold"

    def run(self, module: ModuleOp, ctx: PassContext) -> None:
        for func in module:
            const_args = set(func.attributes.get("const_args", []))
            for op in list(func.walk()):
                if op.name in ("tensor.conv2d", "tensor.matmul") and op.parent is not None:
                    fold_chain(op, ctx, const_args)
        from .dce import remove_dead_ops
        for func in module:
            remove_dead_ops(func)
