"""Canonicalization patterns on shapes and layouts: transpose/reshape/cast chains,
scalar broadcasts, no-op broadcasts, transposes moved through elementwise ops.

Registered with the other owned patterns by ``canonical._register``. Same
invariants as ``canonical``: exact (bit-for-bit) and never changing a result type.
"""

from __future__ import annotations

from ..dtypes import DType
from ..ir.core import Operation, Trait, Value
from ..ir.types import INDEX, IndexType, IRType, TensorType, broadcast_shapes, shape_of
from .pattern import PatternRewriter, RewritePattern
from .utils import producer


def _identity(op: Operation, rw: PatternRewriter, keep: Value) -> bool:
    """Replace ``op`` by ``keep`` when the types agree (patterns never change types)."""
    if keep.type != op.result.type:
        return False
    rw.replace_op(op, [keep])
    return True


class TransposeChain(RewritePattern):
    """transpose(transpose(x, p), q) -> transpose(x, p∘q); identity perm -> x."""

    root = "tensor.transpose"

    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> bool:
        perm = list(op.attributes["perm"])
        if perm == sorted(perm):
            return _identity(op, rw, op.operands[0])
        inner = producer(op.operands[0])
        if inner is None or inner.name != "tensor.transpose":
            return False
        p = inner.attributes["perm"]
        composed = [p[i] for i in perm]
        src = inner.operands[0]
        if composed == sorted(composed):
            return _identity(op, rw, src)
        new = rw.create_before(op, "tensor.transpose", [src], [op.result.type], {"perm": composed})
        rw.replace_op(op, [new.result])
        return True


class ReshapeChain(RewritePattern):
    """reshape(reshape(x)) -> reshape(x); a reshape to x's own static type -> x."""

    root = "tensor.reshape"

    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> bool:
        src = op.operands[0]
        t = op.result.type
        if src.type == t and isinstance(t, TensorType) and t.is_static:
            return _identity(op, rw, src)
        inner = producer(src)
        if inner is None or inner.name != "tensor.reshape":
            return False
        new = rw.create_before(op, "tensor.reshape", [inner.operands[0], *op.operands[1:]], [t])
        rw.replace_op(op, [new.result])
        return True


#: dtype -> dtypes that hold every value of it exactly.
_WIDER = {
    DType.BOOL: set(DType), DType.I8: {DType.I8, DType.I32, DType.I64, DType.F16, DType.F32, DType.F64},
    DType.I32: {DType.I32, DType.I64, DType.F64}, DType.I64: {DType.I64},
    DType.F16: {DType.F16, DType.F32, DType.F64}, DType.BF16: {DType.BF16, DType.F32, DType.F64},
    DType.F32: {DType.F32, DType.F64}, DType.F64: {DType.F64},
}


def _dt(t: IRType) -> DType | None:
    return None if isinstance(t, IndexType) else t.dtype


class CastChain(RewritePattern):
    """cast to the same type -> x; cast(cast(x)) where the inner cast is lossless ->
    one cast (or x when it returns to x's type), unless the pair converts an integer
    through a float to an integer type that cannot hold it: float -> int saturates,
    int -> int wraps (LANGUAGE.md), so cast(cast(300, f64), i8) is 127, not 44."""

    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> bool:
        src = op.operands[0]
        if src.type == op.result.type:
            return _identity(op, rw, src)
        inner = producer(src)
        if inner is None or inner.name != op.name:
            return False
        a, b, c = _dt(inner.operands[0].type), _dt(src.type), _dt(op.result.type)
        if a is None or b is None or b not in _WIDER[a]:
            return False
        if a.is_int and b.is_float and (c is None or c.is_int and c not in _WIDER[a]):
            return False
        x = inner.operands[0]
        if x.type == op.result.type:
            return _identity(op, rw, x)
        new = rw.create_before(op, op.name, [x], [op.result.type])
        rw.replace_op(op, [new.result])
        return True


class ScalarBroadcastOperand(RewritePattern):
    """elementwise(x, broadcast_to(s) / full(s)) -> elementwise(x, s) when the
    result type stays the same (the op broadcasts anyway)."""

    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> bool:
        if Trait.ELEMENTWISE not in op.traits and op.name not in ("tensor.select",):
            return False
        if not op.name.startswith("tensor."):
            return False
        for i, v in enumerate(op.operands):
            p = producer(v)
            if p is None or p.name not in ("tensor.broadcast_to", "tensor.full"):
                continue
            s = p.operands[0]
            others = [o.type for j, o in enumerate(op.operands) if j != i]
            if not any(isinstance(t, TensorType) for t in [*others, s.type]):
                continue
            try:
                shape = broadcast_shapes(*(shape_of(t) for t in [*others, s.type]))
            except ValueError:
                continue
            if shape != op.result.type.shape:  # type: ignore[union-attr]
                continue
            op.set_operand(i, s)
            rw.notify_new(op)
            return True
        return False


class BroadcastNoop(RewritePattern):
    """broadcast_to(x) of x's own static type -> x."""

    root = "tensor.broadcast_to"

    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> bool:
        t = op.result.type
        if op.operands[0].type == t and isinstance(t, TensorType) and t.is_static:
            return _identity(op, rw, op.operands[0])
        return False


def _leads_to_transpose(v: Value, depth: int = 0) -> bool:
    p = producer(v)
    if p is None or depth > 32:
        return False
    if p.name == "tensor.transpose":
        return True
    if Trait.ELEMENTWISE in p.traits and p.name.startswith("tensor.") and len(v.users) == 1:
        return any(_leads_to_transpose(o, depth + 1) for o in p.operands)
    return False


class TransposeThroughElementwise(RewritePattern):
    """transpose(ew(a, v...), q) -> ew(transpose(a, q), reshape(v)...) when ``a`` leads
    (through single-use elementwise ops) to another transpose, and every other
    operand is a scalar or a tensor whose broadcast axes keep their order under
    ``q`` (so a reshape relayouts it). Moves the transpose toward its inverse, where
    ``TransposeChain`` cancels both: ``nn.batch_norm``'s NCHW->NHWC->NCHW pair."""

    root = "tensor.transpose"

    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> bool:
        ew = producer(op.operands[0])
        if ew is None or Trait.ELEMENTWISE not in ew.traits or not ew.name.startswith("tensor."):
            return False
        if len(ew.result.uses) != 1:
            return False
        ew_type = ew.result.type
        if not isinstance(ew_type, TensorType):
            return False  # a transpose operand is a tensor in verified IR
        q = list(op.attributes["perm"])
        rank = len(q)
        mains = [i for i, v in enumerate(ew.operands) if _leads_to_transpose(v)
                 and isinstance(v.type, TensorType) and v.type.shape == ew_type.shape]
        if len(mains) != 1:
            return False
        new_operands: list[Value] = []
        plans: list[tuple[int, Value, tuple]] = []
        for i, v in enumerate(ew.operands):
            if i == mains[0] or not isinstance(v.type, TensorType):
                continue
            padded = (1,) * (rank - v.type.rank) + v.type.shape
            order = [q[j] for j in range(rank) if padded[q[j]] != 1]
            if order != sorted(order):
                return False
            plans.append((i, v, tuple(padded[q[j]] for j in range(rank))))
        for i, v in enumerate(ew.operands):
            if i == mains[0]:
                t = TensorType(v.type.dtype, tuple(v.type.shape[j] for j in q))  # type: ignore[union-attr]
                new_operands.append(rw.create_before(op, "tensor.transpose", [v], [t],
                                                     {"perm": q}).result)
            elif isinstance(v.type, TensorType):
                shape = next(p[2] for p in plans if p[0] == i)
                pad = rank - v.type.rank
                dims = []
                for j in range(rank):
                    if shape[j] is None:
                        axis = q[j] - pad
                        dims.append(rw.create_before(op, "tensor.dim", [v], [INDEX],
                                                     {"axis": axis}).result)
                new_operands.append(rw.create_before(
                    op, "tensor.reshape", [v, *dims], [TensorType(v.type.dtype, shape)]).result)
            else:
                new_operands.append(v)
        new = rw.create_before(op, ew.name, new_operands, [op.result.type], dict(ew.attributes))
        rw.replace_op(op, [new.result])
        rw.erase_op(ew)
        return True
