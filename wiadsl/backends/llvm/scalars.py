"""Scalar ``arith`` ops -> LLVM instructions: one table per value kind.

Semantics are the interpreter's (NumPy's) element by element: floor division
and remainder for integers (division by zero gives 0, as NumPy does, and never
traps), NaN-propagating max/min, ``une`` for NumPy's ``!=``, bools as i1. The same
functions take LLVM vectors (``<8 x float>``) for ``vector<8xf32>`` values: every
constant is built with the operand's type (a splat) and intrinsics take their
vector overloads.
"""

from __future__ import annotations

from collections.abc import Callable

from llvmlite import ir

from ...dtypes import DType
from . import mathlib as m
from .types import I1, compute_dtype, constant, element, from_compute, like, reg_type, to_compute

B = ir.IRBuilder
Fn = Callable[..., ir.Value]


def _flags(reassoc: bool) -> list[str]:
    return ["reassoc", "contract"] if reassoc else ["contract"]


def _frem(b: B, x: ir.Value, y: ir.Value) -> ir.Value:
    """``np.remainder``: the exact ``fmod`` (``frem``), plus ``y`` where a nonzero result
    has the other sign; a zero result takes ``y``'s sign (``-4 % 2`` is +0)."""
    r = b.frem(x, y)
    zero = ir.Constant(x.type, 0.0)
    fix = b.and_(b.fcmp_ordered("!=", r, zero),
                 b.xor(b.fcmp_ordered("<", r, zero), b.fcmp_ordered("<", y, zero)))
    out = b.select(fix, b.fadd(r, y), r)
    return b.select(b.fcmp_ordered("==", r, zero), m.intrinsic(b, "copysign", [zero, y]), out)


#: |n| up to which ``x ** n`` with a constant integer n is a product, not a libm call
#: (``pow`` never vectorizes: the GELU tanh form's ``x ** 3`` was a scalar call per element)
POW_BY_PRODUCT = 4


def _constant_float(v: ir.Value) -> float | None:
    """The value of a float constant, or of a vector constant with equal lanes."""
    if not isinstance(v, ir.Constant):
        return None
    c = v.constant
    if isinstance(c, (list, tuple)):
        lanes = {e.constant if isinstance(e, ir.Constant) else e for e in c}
        c = lanes.pop() if len(lanes) == 1 else None
    return float(c) if isinstance(c, (int, float)) else None


def _fpow(b: B, x: ir.Value, y: ir.Value) -> ir.Value:
    """``x ** y``: by multiplication for a small constant integer ``y`` (squares are
    exact as pow's; x**3 and x**4 round twice, within an ulp of pow); ``sqrt`` for a
    constant 0.5, as NumPy computes it (so -inf ** 0.5 is NaN and -0.0 ** 0.5 is -0.0,
    where C's pow gives inf and 0.0: fuzz seed 8800000000225); else ``pow``."""
    n = _constant_float(y)
    if n == 0.5:
        return m.intrinsic(b, "sqrt", [x])
    if n is None or not n.is_integer() or abs(n) > POW_BY_PRODUCT:  # inf, NaN: not integers
        return m.intrinsic(b, "pow", [x, y])
    k = abs(int(n))
    one = ir.Constant(x.type, 1.0)
    if k == 0:
        return one  # pow(x, 0) is 1 for every x, NaN included
    square = b.fmul(x, x) if k >= 2 else x
    product = {1: x, 2: square, 3: b.fmul(square, x), 4: b.fmul(square, square)}[k]
    return product if n > 0 else b.fdiv(one, product)


def _extreme(b: B, x: ir.Value, y: ir.Value, larger: bool) -> ir.Value:
    """NumPy's ``maximum`` (``larger``) or ``minimum``: NaN where either is NaN, else the
    larger (smaller) value; NumPy keeps the first operand only where it is NaN or
    strictly beyond the second, so equal values (-0.0 and 0.0) give the second.
    Against a constant that is not NaN (relu, a clip's bounds) that rule is one
    compare and select, which x86 emits as a single vmaxps / vminps where the
    constant is not zero, and as a compare and a mask (vcmpnleps, vandps) where it
    is. ``llvm.maximum`` (which also orders -0.0 below 0.0, unlike NumPy) took a NaN
    compare and a blend besides on AVX2. Two variables keep ``llvm.maximum`` /
    ``llvm.minimum``."""
    beyond = ">" if larger else "<"
    if (k := _constant_float(y)) is not None and k == k:
        return b.select(b.fcmp_unordered(beyond, x, y), x, y)  # x NaN: unordered, x
    if (k := _constant_float(x)) is not None and k == k:
        return b.select(b.fcmp_ordered(beyond, x, y), x, y)  # y NaN: unordered, y
    return m.intrinsic(b, "maximum" if larger else "minimum", [x, y])


FLOAT: dict[str, Fn] = {
    "add": lambda b, x, y, r=False: b.fadd(x, y, flags=_flags(r)),
    "sub": lambda b, x, y, r=False: b.fsub(x, y, flags=_flags(False)),
    "mul": lambda b, x, y, r=False: b.fmul(x, y, flags=_flags(r)),
    "div": lambda b, x, y, r=False: b.fdiv(x, y),
    "rem": lambda b, x, y, r=False: _frem(b, x, y),
    "pow": lambda b, x, y, r=False: _fpow(b, x, y),
    "max": lambda b, x, y, r=False: _extreme(b, x, y, larger=True),
    "min": lambda b, x, y, r=False: _extreme(b, x, y, larger=False),
    "neg": lambda b, x: b.fneg(x),
    "abs": lambda b, x: m.intrinsic(b, "fabs", [x]),
    "exp": m.exp,
    "log": lambda b, x: m.libm(b, "log", [x]),
    "sqrt": lambda b, x: m.intrinsic(b, "sqrt", [x]),
    "rsqrt": lambda b, x: b.fdiv(ir.Constant(x.type, 1.0), m.intrinsic(b, "sqrt", [x])),
    "tanh": m.tanh,
    "sigmoid": lambda b, x: b.fdiv(ir.Constant(x.type, 1.0),
                                   b.fadd(ir.Constant(x.type, 1.0), m.exp(b, b.fneg(x)))),
    "relu": lambda b, x: _extreme(b, x, ir.Constant(x.type, 0.0), larger=True),
    "sin": lambda b, x: m.intrinsic(b, "sin", [x]),
    "cos": lambda b, x: m.intrinsic(b, "cos", [x]),
    "floor": lambda b, x: m.intrinsic(b, "floor", [x]),
    "ceil": lambda b, x: m.intrinsic(b, "ceil", [x]),
    "rint": lambda b, x: m.intrinsic(b, "rint", [x]),  # half to even (default FP env)
    "erf": m.erf,
}


def _safe_div(b: B, x: ir.Value, y: ir.Value, want_rem: bool) -> ir.Value:
    """Floor division / floor remainder; y == 0 gives 0 and y == -1 never overflows."""
    t = x.type
    zero, one = ir.Constant(t, 0), ir.Constant(t, 1)
    bad = b.or_(b.icmp_signed("==", y, zero), b.icmp_signed("==", y, ir.Constant(t, -1)))
    d = b.select(bad, one, y)
    q, r = b.sdiv(x, d), b.srem(x, d)
    adjust = b.and_(b.icmp_signed("!=", r, zero),
                    b.icmp_signed("<", b.xor(r, d), zero))
    if want_rem:
        out = b.select(adjust, b.add(r, d), r)
        return b.select(bad, zero, out)
    out = b.select(adjust, b.sub(q, one), q)
    neg = b.sub(zero, x)
    return b.select(b.icmp_signed("==", y, zero), zero, b.select(bad, neg, out))


def _ipow(b: B, x: ir.Value, y: ir.Value) -> ir.Value:
    """x ** y by squaring, in a small loop (y < 0 is checked by the lowering)."""
    fn = _ipow_function(b.module, x.type)
    return b.call(fn, [x, y])


def _ipow_function(mod: ir.Module, t: ir.IntType) -> ir.Function:
    name = f"wia.ipow.i{t.width}"
    if name in mod.globals:
        return mod.globals[name]
    fn = ir.Function(mod, ir.FunctionType(t, [t, t]), name)
    fn.linkage = "internal"
    x, y = fn.args
    entry, loop, done = fn.append_basic_block("entry"), fn.append_basic_block("loop"), fn.append_basic_block("done")
    b = ir.IRBuilder(entry)
    b.branch(loop)
    b.position_at_end(loop)
    acc, base, e = b.phi(t), b.phi(t), b.phi(t)
    bit = b.trunc(e, I1)
    acc2 = b.select(bit, b.mul(acc, base), acc)
    e2 = b.ashr(e, ir.Constant(t, 1))
    base2 = b.mul(base, base)
    acc.add_incoming(ir.Constant(t, 1), entry)
    base.add_incoming(x, entry)
    e.add_incoming(y, entry)
    acc.add_incoming(acc2, loop)
    base.add_incoming(base2, loop)
    e.add_incoming(e2, loop)
    b.cbranch(b.icmp_signed(">", e2, ir.Constant(t, 0)), loop, done)
    b.position_at_end(done)
    result = b.phi(t)
    result.add_incoming(acc2, loop)
    b.ret(result)
    return fn


def _smax(b: B, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.select(b.icmp_signed(">", x, y), x, y)


def _smin(b: B, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.select(b.icmp_signed("<", x, y), x, y)


INT: dict[str, Fn] = {
    "add": lambda b, x, y: b.add(x, y), "sub": lambda b, x, y: b.sub(x, y),
    "mul": lambda b, x, y: b.mul(x, y),
    "div": lambda b, x, y: _safe_div(b, x, y, False),
    "rem": lambda b, x, y: _safe_div(b, x, y, True),
    "pow": lambda b, x, y: b.select(b.icmp_signed("<", y, ir.Constant(y.type, 0)),
                                    ir.Constant(x.type, 0), _ipow(b, x, y)),
    "max": _smax, "min": _smin,
    "neg": lambda b, x: b.sub(ir.Constant(x.type, 0), x),
    "abs": lambda b, x: b.select(b.icmp_signed("<", x, ir.Constant(x.type, 0)),
                                 b.sub(ir.Constant(x.type, 0), x), x),
    "relu": lambda b, x: _smax(b, x, ir.Constant(x.type, 0)),
    "floor": lambda b, x: x, "ceil": lambda b, x: x, "rint": lambda b, x: x,
    "and": lambda b, x, y: b.and_(x, y), "or": lambda b, x, y: b.or_(x, y),
    "not": lambda b, x: b.xor(x, ir.Constant(x.type, -1)),
}

BOOL: dict[str, Fn] = {
    "add": lambda b, x, y: b.or_(x, y), "mul": lambda b, x, y: b.and_(x, y),
    "max": lambda b, x, y: b.or_(x, y), "min": lambda b, x, y: b.and_(x, y),
    "and": lambda b, x, y: b.and_(x, y), "or": lambda b, x, y: b.or_(x, y),
    "not": lambda b, x: b.xor(x, ir.Constant(x.type, 1)),
}


def elementwise(b: B, fn: str, args: list[ir.Value], dtype: DType | None, reassoc: bool,
                exact: bool = False) -> ir.Value:
    """``arith.<fn>`` on values of ``dtype`` (None: index). ``exact`` (the op's unit
    attribute ``exact``): a float op LLVM may not contract into an FMA (so a
    dequantize ``acc * scale`` rounds exactly as NumPy's, whatever follows it)."""
    if dtype is None or dtype.is_int:
        return INT[fn](b, *args)
    if dtype is DType.BOOL:
        return BOOL[fn](b, *args)
    xs = [to_compute(b, a, dtype) for a in args]
    impl = FLOAT[fn]
    if exact and fn in ("add", "sub", "mul"):
        out = getattr(b, "f" + fn)(*xs)
    else:
        out = impl(b, *xs, reassoc) if fn in ("add", "mul") else impl(b, *xs)
    return from_compute(b, out, dtype)


_FPRED = {"oeq": "==", "one": "!=", "olt": "<", "ole": "<=", "ogt": ">", "oge": ">="}
_IPRED = {"eq": "==", "ne": "!=", "slt": "<", "sle": "<=", "sgt": ">", "sge": ">="}


def compare(b: B, kind: str, pred: str, x: ir.Value, y: ir.Value, dtype: DType | None) -> ir.Value:
    if kind == "arith.cmpf":
        x, y = to_compute(b, x, dtype), to_compute(b, y, dtype)  # type: ignore[arg-type]
        if pred == "une":
            return b.fcmp_unordered("!=", x, y)
        return b.fcmp_ordered(_FPRED[pred], x, y)
    if dtype is DType.BOOL:
        return b.icmp_unsigned(_IPRED[pred], x, y)
    return b.icmp_signed(_IPRED[pred], x, y)


def cast(b: B, v: ir.Value, src: DType | None, dst: DType | None) -> ir.Value:
    """NumPy ``astype`` of one value (index is i64); float -> int truncates and
    saturates to the destination type, NaN gives 0 (LANGUAGE.md §3), never poison."""
    if src == dst or (src in (None, DType.I64) and dst in (None, DType.I64)):
        return v
    t = like(v, reg_type(dst))
    src_float = src is not None and src.is_float
    if dst is DType.BOOL:
        if src_float:
            x = to_compute(b, v, src)  # type: ignore[arg-type]
            return b.fcmp_unordered("!=", x, ir.Constant(x.type, 0.0))
        return b.icmp_signed("!=", v, ir.Constant(v.type, 0))
    if dst is None or dst.is_int:
        if src is DType.BOOL:
            return b.zext(v, t)
        if not src_float:
            w_in, w_out = element(v.type).width, element(t).width
            return v if w_in == w_out else b.trunc(v, t) if w_in > w_out else b.sext(v, t)
        x = to_compute(b, v, src)  # type: ignore[arg-type]
        return m.fptosi_sat(b, x, element(t))  # saturates to the destination's own range
    if src is DType.BOOL:
        x = b.uitofp(v, like(v, reg_type(compute_dtype(dst))))
    elif not src_float:
        x = b.sitofp(v, like(v, reg_type(compute_dtype(dst))))
    else:
        x = to_compute(b, v, src)  # type: ignore[arg-type]
        if dst is DType.F16:
            return b.fptrunc(_f32_round_to_odd(b, x) if str(x.type) == "double" else x, t)
        target = like(v, reg_type(compute_dtype(dst)))
        if x.type != target:
            x = b.fpext(x, target) if _width(element(x.type)) < _width(element(target)) \
                else b.fptrunc(x, target)
    return from_compute(b, x, dst)


def _f32_round_to_odd(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """f64 -> f32 rounded to odd: a following f32 -> f16 then rounds exactly as a direct
    f64 -> f16 would (no double rounding), without the ``__truncdfhf2`` call that
    ``fptrunc double to half`` needs and the JIT cannot resolve (a fuzz finding)."""
    f32, i32 = ir.FloatType(), ir.IntType(32)
    y = b.fptrunc(x, f32)
    back = b.fpext(y, x.type)
    inexact = b.fcmp_ordered("!=", back, x)  # false for NaN
    above = b.fcmp_ordered(">", m.intrinsic(b, "fabs", [back]), m.intrinsic(b, "fabs", [x]))
    bits = b.sub(b.bitcast(y, i32), b.zext(b.and_(inexact, above), i32))  # toward zero
    bits = b.select(inexact, b.or_(bits, ir.Constant(i32, 1)), bits)     # sticky bit
    return b.bitcast(bits, f32)


def _width(t: ir.Type) -> int:
    return {"half": 16, "float": 32, "double": 64}[str(t)]


def const(dtype: DType | None, value: object) -> ir.Constant:
    return constant(dtype, value)
