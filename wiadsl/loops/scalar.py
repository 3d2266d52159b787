"""Per-element semantics of tensor ops as scalar ``arith`` IR, and materialization.

Each ``ScalarFn`` emits the loop-level scalar ops that compute one element of a
tensor op from one element of each operand, exactly as the op's NumPy
semantics (docs/ir.md) prescribe for that element.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..dtypes import DType
from ..ir.core import Block, Operation, Value
from ..ir.types import ScalarType
from .builder import LoopBuilder, const_value, contiguous_strides
from .expr import Expr, Leaf, ScalarFn, buffer_leaf

#: What an integer ``arith.pow`` with a negative exponent raises (as the interpreter does).
NEGATIVE_POWER = "integers to negative integer powers are not allowed"


def op_message(op: Operation, text: str) -> str:
    """A run-time error message naming ``op`` and its source location."""
    loc = op.attributes.get("loc")
    where = f" (at {loc})" if isinstance(loc, str) else ""
    return f"'{op.name}'{where}: {text}"


def arith_fn(fn: str, dtype: DType, source: Operation | None = None) -> ScalarFn:
    """``arith.<fn>`` of the operands; ``source`` (the op it lowers) names the run-time
    checks the element needs (``scalar_op``)."""
    t = ScalarType(dtype)
    if fn == "pow" and dtype.is_int:
        assert source is not None, "an integer pow needs an op to report its errors"
        message = op_message(source, NEGATIVE_POWER)
        return lambda lb, args: int_pow(lb, args[0], args[1], message)
    return lambda lb, args: lb.op(f"arith.{fn}", args, t)


def int_pow(lb: LoopBuilder, x: Value, y: Value, message: str) -> Value:
    """``x ** y`` of integers, checked at run time: a negative ``y`` raises ``message``.
    The one lowering of an integer pow (stand-alone, scalar, fused and reduce bodies)."""
    exponent = const_value(y)
    if exponent is None or exponent < 0:
        lb.check(lb.b.value("arith.cmpi", [y, lb.const(0, y.type)], ScalarType(DType.BOOL),
                            {"predicate": "sge"}), message)
    return lb.op("arith.pow", [x, y], x.type)


def scalar_op(lb: LoopBuilder, op: Operation, operands: Sequence[Value]) -> list[Value]:
    """A copy of the scalar op ``op`` on ``operands``, with the run-time checks of its
    element semantics (docs/ir.md): an integer ``arith.pow`` checks its exponent."""
    t = op.result_types[0] if len(op.results) == 1 else None
    if op.name == "arith.pow" and isinstance(t, ScalarType) and t.dtype.is_int:
        return [int_pow(lb, operands[0], operands[1], op_message(op, NEGATIVE_POWER))]
    return list(lb.b.create(op.name, list(operands), list(op.result_types),
                            dict(op.attributes)).results)


def cmp_fn(op_name: str, predicate: str) -> ScalarFn:
    return lambda lb, args: lb.b.value(op_name, args, ScalarType(DType.BOOL), {"predicate": predicate})


def select_fn(dtype: DType) -> ScalarFn:
    return lambda lb, args: lb.op("arith.select", args, ScalarType(dtype))


def cast(lb: LoopBuilder, v: Value, dtype: DType) -> Value:
    if v.type == ScalarType(dtype):
        return v
    return lb.op("arith.cast", [v], ScalarType(dtype))


def cast_fn(dtype: DType) -> ScalarFn:
    return lambda lb, args: cast(lb, args[0], dtype)


def rint(lb: LoopBuilder, x: Value) -> Value:
    """Round half to even: ``(x + c) - c`` with c = 1.5 * 2**mantissa, exact for
    |x| below 2**(mantissa - 1); larger floats (and NaN, inf) are integral already."""
    dtype = x.type.dtype  # type: ignore[union-attr]
    if dtype in (DType.F16, DType.BF16):
        return cast(lb, rint(lb, cast(lb, x, DType.F32)), dtype)
    t = ScalarType(dtype)
    bits = 52 if dtype is DType.F64 else 23
    c = lb.const(1.5 * 2.0 ** bits, t)
    rounded = lb.op("arith.sub", [lb.op("arith.add", [x, c], t), c], t)
    small = lb.b.value("arith.cmpf", [lb.op("arith.abs", [x], t), lb.const(2.0 ** (bits - 1), t)],
                       ScalarType(DType.BOOL), {"predicate": "olt"})
    return lb.op("arith.select", [small, rounded, x], t)


def quantize_fn(dtype: DType) -> ScalarFn:
    """``clamp(rint(x / scale) + zp, -128, 127)`` in x's dtype, to i8."""
    t = ScalarType(dtype)

    def fn(lb: LoopBuilder, args: list[Value]) -> Value:
        x, scale, zp = args
        q = rint(lb, lb.op("arith.div", [x, scale], t))
        q = lb.op("arith.add", [q, cast(lb, zp, dtype)], t)
        q = lb.op("arith.max", [lb.op("arith.min", [q, lb.const(127.0, t)], t), lb.const(-128.0, t)], t)
        return cast(lb, q, DType.I8)
    return fn


def dequantize(lb: LoopBuilder, q: Value, scale: Value, zp: Value) -> Value:
    """``(f32(q) - f32(zp)) * f32(scale)``, the product ``exact``: never contracted into
    an FMA with what consumes it (``x - fake_quant(x)`` rounds as NumPy's)."""
    f = ScalarType(DType.F32)
    d = lb.op("arith.sub", [cast(lb, q, DType.F32), cast(lb, zp, DType.F32)], f)
    return lb.op("arith.mul", [d, cast(lb, scale, DType.F32)], f, {"exact": True})


def quant_fn(kind: str, in_dtype: DType) -> ScalarFn:
    if kind == "quantize":
        return quantize_fn(in_dtype)
    if kind == "dequantize":
        return lambda lb, a: dequantize(lb, a[0], a[1], a[2])
    q = quantize_fn(in_dtype)
    return lambda lb, a: dequantize(lb, q(lb, a), a[1], a[2])


def clone_body(lb: LoopBuilder, body: Block, args: Sequence[Value]) -> list[Value]:
    """Emit a fused op's scalar body with ``args`` for its block arguments; the yielded values."""
    env = {id(a): v for a, v in zip(body.args, args, strict=True)}
    for op in body.ops:
        operands = [env[id(v)] for v in op.operands]
        if op.name == "tensor.yield":
            return operands
        for old, r in zip(op.results, scalar_op(lb, op, operands), strict=True):
            env[id(old)] = r
    raise op.error("body does not end in yield")


def clone_body_value(lb: LoopBuilder, body: Block, args: Sequence[Value], target: Value) -> Value:
    """Emit a fused body's ops up to (and including) the one defining ``target``; its value."""
    env = {id(a): v for a, v in zip(body.args, args, strict=True)}
    if id(target) in env:
        return env[id(target)]
    for op in body.ops:
        for old, r in zip(op.results, scalar_op(lb, op, [env[id(v)] for v in op.operands]),
                          strict=True):
            env[id(old)] = r
        if id(target) in env:
            return env[id(target)]
    raise op.error("value not defined in the body")


def body_fn(body: Block, result: int = 0) -> ScalarFn:
    return lambda lb, args: clone_body(lb, body, args)[result]


# --------------------------------------------------------------- materialize

def fill(lb: LoopBuilder, exprs: Sequence[Expr], bufs: Sequence[Value], extents: Sequence[Value],
         fn: ScalarFn | None = None) -> None:
    """Store every element of ``exprs`` (broadcast to ``extents``) into ``bufs``.

    With ``fn``, the operands are combined by a multi-result body instead: one
    loop computes all results (``fn`` returns one value per buffer via a list).
    ``bufs`` are fresh buffers no operand reads, so the outermost loop is parallel.
    """
    flat = all(e.rank == 0 or e.is_flat(extents) for e in exprs)

    def store_all(lb2: LoopBuilder, values: list[Value], offset: Value) -> None:
        outs = fn(lb2, values) if fn is not None else values  # type: ignore[arg-type]
        for v, b in zip(outs, bufs, strict=True):  # type: ignore[arg-type]
            lb2.store(v, b, offset)

    if flat:
        def flat_body(lb2: LoopBuilder, i: Value, _: list[Value]) -> list[Value]:
            store_all(lb2, [e.at_flat(lb2, i) for e in exprs], i)
            return []
        lb.loop(lb.idx(0), lb.numel(extents), flat_body, parallel=True)
        return
    from .expr import broadcast_ivs
    strides = contiguous_strides(lb, extents)

    def nest_body(lb2: LoopBuilder, ivs: list[Value]) -> None:
        values = [e.at(lb2, broadcast_ivs(lb2, e.extents, ivs, extents)) for e in exprs]
        store_all(lb2, values, lb2.linear(ivs, strides))
    lb.nest(extents, nest_body, parallel=True)


def materialize(lb: LoopBuilder, expr: Expr) -> Leaf:
    """The expression in a buffer of its own shape (a no-op for whole buffers)."""
    if isinstance(expr, Leaf) and expr.is_whole_buffer:
        return expr
    return copy_leaf(lb, expr)


def copy_leaf(lb: LoopBuilder, expr: Expr) -> Leaf:
    """A fresh owned buffer with the expression's elements (always copies)."""
    buf = lb.alloc(expr.dtype, expr.extents)
    if isinstance(expr, Leaf) and expr.flat:
        lb.b.create("loop.copy", [expr.buf, buf, expr.offset, lb.idx(0), lb.numel(expr.extents)])
    else:
        fill(lb, [expr], [buf], expr.extents)
    return buffer_leaf(lb, buf, owned=True)
