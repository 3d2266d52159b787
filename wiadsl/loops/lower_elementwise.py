"""Lowering of scalar ``arith`` ops and of the elementwise family of tensor ops.

Elementwise tensor ops become ``MapExpr``s (deferred, fused into their user);
creation ops (full, arange, broadcast_to, constant) become expressions too.
"""

from __future__ import annotations

from ..dtypes import DType
from ..ir.core import Operation, Value
from ..ir.ops import ELEMENTWISE_FNS
from ..ir.types import IndexType, ScalarType, TensorType, shape_of
from .builder import const_value
from .expr import MAX_FUSION_DEPTH, Expr, Leaf, MapExpr, ScalarExpr, broadcast_extents, buffer_leaf
from .lower import Ctx, Lowered, lowering
from .scalar import (
    arith_fn,
    body_fn,
    cast_fn,
    clone_body,
    cmp_fn,
    fill,
    materialize,
    quant_fn,
    scalar_op,
    select_fn,
)

SCALAR_OPS = [f"arith.{fn.name}" for fn in ELEMENTWISE_FNS] + [
    "arith.constant", "arith.cmpf", "arith.cmpi", "arith.select", "arith.cast"]


@lowering(*SCALAR_OPS)
def _scalar(ctx: Ctx, op: Operation) -> list[Lowered]:
    """Scalar ops are already loop-level: copied with their operands mapped (and their
    run-time checks, ``scalar_op``)."""
    return list(scalar_op(ctx.lb, op, [ctx.scalar(v) for v in op.operands]))


@lowering("tensor.dim")
def _dim(ctx: Ctx, op: Operation) -> list[Lowered]:
    x = ctx.operand(op.operands[0])
    axis = op.attributes["axis"] % x.rank
    return [x.extents[axis]]


def _operands(ctx: Ctx, op: Operation) -> list[Expr]:
    """The operands as expressions; one fused too deep is first computed into a buffer."""
    operands = [ctx.operand(v) for v in op.operands]
    return [materialize(ctx.lb, o) if isinstance(o, MapExpr) and o.depth >= MAX_FUSION_DEPTH
            else o for o in operands]


def map_op(ctx: Ctx, op: Operation, fn, out_dtype: DType) -> list[Lowered]:  # type: ignore[no-untyped-def]
    operands = _operands(ctx, op)
    extents = broadcast_extents(ctx.lb, [o.extents for o in operands], ctx.message(op, "shape"))
    return [MapExpr(fn, operands, extents, out_dtype)]


def _result_dtype(op: Operation) -> DType:
    return op.result.type.dtype  # type: ignore[union-attr]


@lowering(*(f"tensor.{fn.name}" for fn in ELEMENTWISE_FNS))
def _elementwise(ctx: Ctx, op: Operation) -> list[Lowered]:
    dtype = _result_dtype(op)
    return map_op(ctx, op, arith_fn(op.name.split(".", 1)[1], dtype, op), dtype)


@lowering("tensor.cmpf", "tensor.cmpi")
def _cmp(ctx: Ctx, op: Operation) -> list[Lowered]:
    return map_op(ctx, op, cmp_fn(op.name.replace("tensor.", "arith."), op.attributes["predicate"]),
                  DType.BOOL)


@lowering("tensor.select")
def _select(ctx: Ctx, op: Operation) -> list[Lowered]:
    return map_op(ctx, op, select_fn(_result_dtype(op)), _result_dtype(op))


@lowering("tensor.cast")
def _cast(ctx: Ctx, op: Operation) -> list[Lowered]:
    """A dtype cast, and a shape cast to static extents: each one the result type fixes
    is checked at run time (a call-time shape the kernel's types did not allow) and
    then used, so the buffer has the result type (``tensor<1x?>`` to ``tensor<1x1>``)."""
    (expr,) = map_op(ctx, op, cast_fn(_result_dtype(op)), _result_dtype(op))
    assert isinstance(expr, MapExpr)
    lb = ctx.lb
    for axis, want in enumerate(shape_of(op.result.type)):
        if want is not None and const_value(expr.extents[axis]) != want:
            lb.check(lb.cmp("eq", expr.extents[axis], lb.idx(want)),
                     ctx.message(op, f"shape: axis {axis} must have extent {want}"))
            expr.extents[axis] = lb.idx(want)
    return [expr]


@lowering("tensor.quantize", "tensor.dequantize", "tensor.fake_quant")
def _quant(ctx: Ctx, op: Operation) -> list[Lowered]:
    in_dtype = op.operand_types[0].dtype  # type: ignore[union-attr]
    return map_op(ctx, op, quant_fn(op.name.split(".")[1], in_dtype), _result_dtype(op))


@lowering("tensor.fused_elementwise")
def _fused(ctx: Ctx, op: Operation) -> list[Lowered]:
    body = op.regions[0].blocks[0]
    if len(op.results) == 1:
        return map_op(ctx, op, body_fn(body), _result_dtype(op))
    operands = _operands(ctx, op)
    extents = broadcast_extents(ctx.lb, [o.extents for o in operands], ctx.message(op, "shape"))
    bufs = [ctx.lb.alloc(r.type.dtype, extents) for r in op.results]  # type: ignore[union-attr]
    fill(ctx.lb, operands, bufs, extents, fn=lambda lb, args: clone_body(lb, body, args))
    return [buffer_leaf(ctx.lb, b, owned=True) for b in bufs]


def _extents_of(ctx: Ctx, op: Operation, dynamic: list[Value]) -> list[Value]:
    t = op.result.type
    assert isinstance(t, TensorType)
    it = iter(ctx.scalar(v) for v in dynamic)
    out = [ctx.lb.idx(d) if d is not None else next(it) for d in t.shape]
    for e in out:
        ctx.lb.check(ctx.lb.cmp("sge", e, ctx.lb.idx(0)), ctx.message(op, "negative extent"))
    return out


@lowering("tensor.full")
def _full(ctx: Ctx, op: Operation) -> list[Lowered]:
    value = ctx.scalar(op.operands[0])
    extents = _extents_of(ctx, op, list(op.operands[1:]))
    return [MapExpr(lambda lb, a: a[0], [ScalarExpr(value)], extents, _result_dtype(op))]


@lowering("tensor.broadcast_to")
def _broadcast_to(ctx: Ctx, op: Operation) -> list[Lowered]:
    x = ctx.operand(op.operands[0])
    extents = _extents_of(ctx, op, list(op.operands[1:]))
    lb = ctx.lb
    for k, e in enumerate(x.extents):
        target = extents[len(extents) - x.rank + k]
        ok = lb.or_(lb.cmp("eq", e, target), lb.cmp("eq", e, lb.idx(1)))
        lb.check(ok, ctx.message(op, f"cannot broadcast axis {k} of the operand"))
    return [MapExpr(lambda lb2, a: a[0], [x], extents, _result_dtype(op))]


@lowering("tensor.arange")
def _arange(ctx: Ctx, op: Operation) -> list[Lowered]:
    dtype = _result_dtype(op)
    start, step = op.attributes.get("start", 0), op.attributes.get("step", 1)
    extents = _extents_of(ctx, op, list(op.operands))
    # NumPy computes start + step * i in f64 when step is a float, else in i64.
    wide = DType.F64 if isinstance(step, float) else DType.I64
    tw = ScalarType(wide)

    def element(lb, ivs):  # type: ignore[no-untyped-def]
        i = lb.op("arith.cast", [ivs[0]], tw)
        v = lb.op("arith.add", [lb.const(wide_value(start, wide), tw),
                                lb.op("arith.mul", [lb.const(wide_value(step, wide), tw), i], tw)], tw)
        return v if wide is dtype else lb.op("arith.cast", [v], ScalarType(dtype))
    return [_IndexExpr(element, extents, dtype)]


def wide_value(v: float | int, dtype: DType) -> float | int:
    return float(v) if dtype is DType.F64 else int(v)


class _IndexExpr(Expr):
    """Elements computed from the induction values alone."""

    def __init__(self, fn, extents: list[Value], dtype: DType):  # type: ignore[no-untyped-def]
        self.fn, self.extents, self.dtype = fn, extents, dtype

    def at(self, lb, ivs):  # type: ignore[no-untyped-def]
        return self.fn(lb, list(ivs))


@lowering("tensor.constant")
def _constant(ctx: Ctx, op: Operation) -> list[Lowered]:
    """A constant tensor: a buffer filled once where it is defined."""
    t = op.result.type
    assert isinstance(t, TensorType)
    lb = ctx.lb
    values = op.attributes["value"].reshape(-1)
    buf = lb.alloc(t.dtype, [lb.idx(d) for d in t.shape])  # type: ignore[arg-type]
    st = ScalarType(t.dtype)
    uniform = values.size > 0 and bool((values == values[0]).all())
    if uniform:
        fill(lb, [ScalarExpr(lb.const(_py(values[0], t.dtype), st))], [buf], lb.dims(buf))
    else:
        for i, v in enumerate(values):
            lb.store(lb.const(_py(v, t.dtype), st), buf, lb.idx(i))
    return [buffer_leaf(lb, buf, owned=True)]


def _py(v: object, dtype: DType) -> float | int | bool:
    if dtype is DType.BOOL:
        return bool(v)
    return int(v) if dtype.is_int else float(v)  # type: ignore[arg-type]


def index_value(ctx: Ctx, v: Value) -> Value:
    """An i64 or index operand as ``index``."""
    x = ctx.scalar(v)
    return x if isinstance(x.type, IndexType) else ctx.lb.to_index(x)


__all__ = ["Leaf", "index_value", "map_op"]
