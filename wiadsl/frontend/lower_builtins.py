"""Lowering of builtin calls (LANGUAGE.md §7): one emitter per builtin, in a table.

Arguments are bound and checked by the builtin table (``builtins.py``), typed by
its rule, then each emitter casts operands to the dtype the rule picked and
creates the IR op. Extents only known at run time become ``index`` operands.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..diagnostics import WiaTypeError
from ..dtypes import DType
from ..ir.core import Value
from ..ir.types import TensorType
from . import ast
from . import shaperules as sr
from .builtins import (
    ALL_AXES,
    BUILTINS,
    REQUIRED,
    Builtin,
    Operand,
    SignatureError,
    Sym,
    apply_rule,
    bind_arguments,
)
from .exprtext import expr_text
from .lower_expr import Env, dtype_name
from .lower_values import TypedValue, dialect, ir_type
from .typerules import ValueType

if TYPE_CHECKING:
    from .lower_expr import ExprLowerer

#: A bound dim: (the rule's view — int, dim name or None, the IR extent — int or index Value).
DimArg = tuple[Any, Any]
Args = dict[str, Any]
Emit = Callable[["ExprLowerer", Args, ValueType], TypedValue]


def lower_builtin(lx: ExprLowerer, e: ast.Call, env: Env) -> TypedValue:
    b = BUILTINS[e.name]
    try:
        bound = bind_arguments(b, len(e.args), [k.name for k in e.keywords])
    except SignatureError as err:
        raise WiaTypeError(err.message, e.span) from None
    keywords = {k.name: k.value for k in e.keywords}
    args: Args = {}
    for p in b.params:
        if p.name in bound:
            where = bound[p.name]
            node = e.args[where] if isinstance(where, int) else keywords[where]
            args[p.name] = _argument(lx, p.kind, node, env)
        else:
            args[p.name] = p.default
    result = apply_rule(b, _rule_view(b, args), None)
    assert isinstance(result, ValueType)
    return EMITTERS[e.name](lx, args, result)


def _argument(lx: ExprLowerer, kind: str, node: ast.Expr, env: Env) -> Any:
    if kind == "value":
        tv = lx.expr(node, env)
        return (tv, expr_text(node))
    if kind == "dtype":
        return dtype_name(node)
    if kind == "tensors":
        assert isinstance(node, ast.ArrayLit)
        return tuple((lx.expr(x, env), expr_text(x)) for x in node.elements)
    if kind == "dims":
        assert isinstance(node, ast.ArrayLit)
        return tuple(_dim(lx, x, env) for x in node.elements)
    return _plain_static(lx.owner.static_value(node, env))


def _plain_static(v: Any) -> Any:
    if v is ALL_AXES:  # the checker lets none reach only an axis=
        return None
    if isinstance(v, (list, tuple)):
        return tuple(_plain_static(x) for x in v)
    return v.item() if isinstance(v, np.generic) else v


def _dim(lx: ExprLowerer, node: ast.Expr, env: Env) -> DimArg:
    tv = lx.expr(node, env)
    if isinstance(tv.static, Sym):
        return tv.static.name, lx.em.to_index(tv)
    if isinstance(tv.static, (int, np.integer)) and not isinstance(tv.static, bool):
        return int(tv.static), int(tv.static)
    return None, lx.em.to_index(tv)


def _rule_view(b: Builtin, args: Args) -> Args:
    """What the rule functions read: Operands for values, plain dims for dim lists."""
    view: Args = {}
    for p in b.params:
        v = args[p.name]
        if v is REQUIRED:
            continue
        if p.kind == "value":
            view[p.name] = Operand(v[0].type, v[0].static, v[1])
        elif p.kind == "tensors":
            view[p.name] = tuple(Operand(tv.type, tv.static, lab) for tv, lab in v)
        elif p.kind == "dims":
            view[p.name] = tuple(d for d, _ in v)
        else:
            view[p.name] = v
    return view


# ------------------------------------------------------------------ emitters


def _tv(args: Args, name: str) -> TypedValue:
    return args[name][0]


def _op(lx: ExprLowerer, name: str, operands: list[Value], result: ValueType,
        attrs: dict | None = None) -> TypedValue:
    return TypedValue(lx.em.b.value(name, operands, ir_type(result), attrs), result)


def _unary(fn: str) -> Emit:
    return lambda lx, a, r: lx.unary_fn(fn, _tv(a, "x"))


def _minmax(fn: str) -> Emit:
    return lambda lx, a, r: lx.binary(fn, _tv(a, "a"), _tv(a, "b"))


def _where(lx: ExprLowerer, a: Args, r: ValueType) -> TypedValue:
    c, x, y = _tv(a, "c"), lx.em.cast(_tv(a, "a"), r.dtype), lx.em.cast(_tv(a, "b"), r.dtype)
    return _op(lx, f"{dialect(r)}.select", [c.value, x.value, y.value], r)


def _reduction(kind: str) -> Emit:
    def emit(lx: ExprLowerer, a: Args, r: ValueType) -> TypedValue:
        x = _tv(a, "x")
        if x.type.is_scalar:  # NumPy reduces a 0-d value to itself
            return lx.em.constant(0, r) if kind.startswith("arg") else lx.em.cast(x, r.dtype)
        if not kind.startswith("arg"):
            x = lx.em.cast(x, r.dtype)
        axes = list(sr.normalize_axes(a["axis"], x.type, kind))
        attrs = {"axes": axes, "keepdims": True} if a["keepdims"] else {"axes": axes}
        return _op(lx, f"tensor.{kind}", [x.value], r, attrs)
    return emit


def _matmul(lx: ExprLowerer, a: Args, r: ValueType) -> TypedValue:
    return lx.matmul(_tv(a, "a"), _tv(a, "b"))


def _transpose(lx: ExprLowerer, a: Args, r: ValueType) -> TypedValue:
    x = _tv(a, "x")
    perm = list(a["perm"]) if a["perm"] is not None else list(reversed(range(x.type.rank)))
    perm = [p % max(x.type.rank, 1) for p in perm]
    return _op(lx, "tensor.transpose", [x.value], r, {"perm": perm})


def _conv2d(lx: ExprLowerer, a: Args, r: ValueType) -> TypedValue:
    x, w = lx.em.cast(_tv(a, "x"), r.dtype), lx.em.cast(_tv(a, "w"), r.dtype)
    s, p = a["stride"], a["padding"]
    return _op(lx, "tensor.conv2d", [x.value, w.value], r, {"stride": [s, s], "padding": [p, p]})


def _pool(kind: str) -> Emit:
    def emit(lx: ExprLowerer, a: Args, r: ValueType) -> TypedValue:
        x = lx.em.cast(_tv(a, "x"), r.dtype)
        k = a["kernel"]
        s = a["stride"] if a["stride"] is not None else k
        return _op(lx, f"tensor.{kind}", [x.value], r, {"kernel": [k, k], "stride": [s, s]})
    return emit


def _dynamic_extents(lx: ExprLowerer, r: ValueType, extents: list[Any]) -> list[Value]:
    """The index operands for each ``?`` of ``r``'s IR type, from per-axis extents."""
    shape = ir_type(r).shape  # type: ignore[union-attr]
    return [lx.em.to_index(e) if isinstance(e, TypedValue) else e
            for d, e in zip(shape, extents) if d is None]


def _reshape(lx: ExprLowerer, a: Args, r: ValueType) -> TypedValue:
    x = _tv(a, "x")
    extents = [ir for _, ir in a["shape"]]
    if -1 in extents:  # the one inferred extent: numel(x) / product of the others
        numel = lx.em.index_product([lx.em.dim(x.value, i) for i in range(x.type.rank)])
        known = [lx.em.index_const(e) if isinstance(e, int) else e for e in extents if e != -1]
        rest = lx.em.index_product(known)
        extents[extents.index(-1)] = lx.em.b.value("arith.div", [numel, rest], numel.type)
    return _shaped(lx, "tensor.reshape", [x.value], r, extents)


def _shaped(lx: ExprLowerer, name: str, leading: list[Value], r: ValueType,
            extents: list[Any]) -> TypedValue:
    if r.is_scalar:  # a rank-0 target: the one element itself
        return TypedValue(_scalar_of(lx, leading[0], r), r)
    return _op(lx, name, leading + _dynamic_extents(lx, r, extents), r)


def _scalar_of(lx: ExprLowerer, value: Value, r: ValueType) -> Value:
    if not isinstance(value.type, TensorType):
        return value
    zero = lx.em.b.constant(0, ir_type(ValueType(DType.I64)))
    return lx.em.b.value("tensor.extract", [value] + [zero] * value.type.rank, ir_type(r))


def _flatten(lx: ExprLowerer, a: Args, r: ValueType) -> TypedValue:
    x = _tv(a, "x")
    lead, rest = ir_type(r).shape  # type: ignore[union-attr]
    extents: list[Value] = []  # only the dynamic ones, as _dynamic_extents would pick
    if lead is None:
        extents.append(lx.em.dim(x.value, 0))
    if rest is None:
        extents.append(lx.em.index_product([lx.em.dim(x.value, i)
                                            for i in range(1, x.type.rank)]))
    return _op(lx, "tensor.reshape", [x.value] + extents, r)


def _broadcast_to(lx: ExprLowerer, a: Args, r: ValueType) -> TypedValue:
    x = lx.em.cast(_tv(a, "x"), r.dtype)
    return _shaped(lx, "tensor.broadcast_to", [x.value], r, [ir for _, ir in a["shape"]])


def _concat(lx: ExprLowerer, a: Args, r: ValueType) -> TypedValue:
    xs = [lx.em.cast(tv, r.dtype).value for tv, _ in a["tensors"]]
    axis = a["axis"] % r.rank
    return _op(lx, "tensor.concat", xs, r, {"axis": axis})


def _filled(fill: float) -> Emit:
    def emit(lx: ExprLowerer, a: Args, r: ValueType) -> TypedValue:
        value = lx.em.constant(fill, ValueType(r.dtype))
        return _full_of(lx, value, r, a["shape"])
    return emit


def _full(lx: ExprLowerer, a: Args, r: ValueType) -> TypedValue:
    value = lx.em.cast(_tv(a, "value"), r.dtype)
    if not value.type.is_scalar:
        raise WiaTypeError(f"full: the fill value must be a scalar, got {value.type}", None)
    return _full_of(lx, value, r, a["shape"])


def _full_of(lx: ExprLowerer, value: TypedValue, r: ValueType, dims: tuple) -> TypedValue:
    if r.is_scalar:
        return TypedValue(value.value, r)
    extents = [ir for _, ir in dims]
    return _op(lx, "tensor.full", [value.value] + _dynamic_extents(lx, r, extents), r)


def _arange(lx: ExprLowerer, a: Args, r: ValueType) -> TypedValue:
    n = _tv(a, "n")
    return _op(lx, "tensor.arange", _dynamic_extents(lx, r, [n]), r, {"start": 0, "step": 1})


def _cast(lx: ExprLowerer, a: Args, r: ValueType) -> TypedValue:
    cast = lx.em.cast(_tv(a, "x"), r.dtype)
    return TypedValue(cast.value, r, cast.static)


def _extent(lx: ExprLowerer, a: Args, r: ValueType) -> TypedValue:
    """``dim(x, axis)``: a static extent is a constant; else ``tensor.dim`` read as i64."""
    x = _tv(a, "x")
    axis = sr.normalize_axis(a["axis"], x.type, "dim")
    d = x.type.shape[axis]
    if isinstance(d, int):
        return lx.em.constant(d, r, d)
    extent = lx.em.dim(x.value, axis)
    value = lx.em.b.value("arith.cast", [extent], ir_type(ValueType(DType.I64)))
    return TypedValue(value, r, Sym(d) if isinstance(d, str) else None)


def _quant(kind: str) -> Emit:
    def emit(lx: ExprLowerer, a: Args, r: ValueType) -> TypedValue:
        x, scale, zp = _tv(a, "x"), _tv(a, "scale"), _tv(a, "zero_point")
        if kind == "fake_quant" and scale.type.weak and x.type.dtype in (DType.F16, DType.BF16):
            # fake_quant is dequantize(quantize(x)) (§ quantization): the quantize half
            # divides by the scale in x's dtype, the dequantize half multiplies by it in
            # f32, and a literal scale differs between the two (0.1 in f16 is not 0.1
            # in f32), which the one-scale IR op cannot say: the two halves, apart.
            codes = _quant_op(lx, "quantize", x, lx.em.cast(scale, x.type.dtype), zp,
                              ValueType(DType.I8, r.shape))
            back = _quant_op(lx, "dequantize", codes, lx.em.cast(scale, DType.F32), zp,
                             ValueType(DType.F32, r.shape))
            return lx.em.cast(back, r.dtype)
        if kind != "dequantize":
            scale = lx.em.cast(scale, x.type.dtype)
        if scale.type.weak and kind == "dequantize":
            scale = lx.em.cast(scale, DType.F32)
        # The IR's fake_quant is f32, as dequantize; the language types it as x's
        # float dtype (shaperules), so a non-f32 x gets the f32 result cast back.
        ir_result = ValueType(DType.F32, r.shape) if kind == "fake_quant" else r
        out = _quant_op(lx, kind, x, scale, zp, ir_result)
        return lx.em.cast(out, r.dtype) if out.type.dtype is not r.dtype else out
    return emit


def _quant_op(lx: ExprLowerer, kind: str, x: TypedValue, scale: TypedValue, zp: TypedValue,
              result: ValueType) -> TypedValue:
    """``tensor.<kind>(x, scale, zp)`` (lifted to 1-element tensors for scalars), with a
    weak or untyped zero point as i32."""
    if zp.type.dtype.kind == 0 or zp.type.weak:
        zp = lx.em.cast(zp, DType.I32 if zp.type.dtype.kind < 2 else zp.type.dtype)
    ops = [x.value, scale.value, zp.value]
    if result.is_scalar:
        return _scalar_quant(lx, kind, ops, result)
    return _op(lx, f"tensor.{kind}", ops, result)


def _scalar_quant(lx: ExprLowerer, kind: str, ops: list[Value], r: ValueType) -> TypedValue:
    """Quantization ops are tensor ops: lift scalar operands to 1-element tensors."""
    lifted = [lx.em.b.value("tensor.broadcast_to", [v],
                            TensorType(v.type.dtype, (1,)))  # type: ignore[union-attr]
              for v in ops]
    one = _op(lx, f"tensor.{kind}", lifted, ValueType(r.dtype, (1,)))
    return TypedValue(_scalar_of(lx, one.value, r), r)


EMITTERS: dict[str, Emit] = {
    **{n: _unary(n) for n in ("abs", "neg", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid",
                              "relu", "sin", "cos", "floor", "ceil", "erf")},
    "max": _minmax("max"), "min": _minmax("min"), "where": _where,
    **{n: _reduction(n) for n in sr.REDUCTIONS},
    "matmul": _matmul, "transpose": _transpose, "conv2d": _conv2d,
    "max_pool": _pool("max_pool"), "avg_pool": _pool("avg_pool"),
    "reshape": _reshape, "flatten": _flatten, "broadcast_to": _broadcast_to, "concat": _concat,
    "zeros": _filled(0), "ones": _filled(1), "full": _full, "arange": _arange, "cast": _cast,
    "dim": _extent,
    **{n: _quant(n) for n in ("quantize", "dequantize", "fake_quant")},
}
assert set(EMITTERS) == set(BUILTINS), "every builtin needs an emitter"
