"""ONNX elementwise ops and activations.

Each translator takes a ``Node`` and returns one ``Val`` per ONNX output. They
write WIA DSL expressions whose NumPy semantics equal the ONNX op's; where ONNX
differs from NumPy (integer ``Div`` truncates, ``Gemm`` transposes) the text
says so explicitly. Elementwise ops whose inputs are all constants fold to a
constant here (shape arithmetic in exported graphs is made of them).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ...dtypes import DType
from ..graph import Node, Val, checked, const_val, literal
from ..shapes import Dim, broadcast
from .registry import op


def _folded(n: Node, vals: list[Val], fn: Callable[..., np.ndarray]) -> Val | None:
    """The constant result when every input is a constant."""
    if any(v.const is None for v in vals):
        return None
    value = np.asarray(fn(*[v.const for v in vals]))
    dtype = vals[0].dtype if value.dtype != np.bool_ else DType.BOOL
    return Val(dtype, tuple(Dim(d) for d in value.shape), const=value.astype(dtype.numpy))


# ------------------------------------------------------------------ elementwise

_BINARY: dict[str, tuple[str, Callable[..., np.ndarray], bool]] = {
    # ONNX op: (DSL operator, NumPy fold, result is bool)
    "Add": ("+", np.add, False), "Sub": ("-", np.subtract, False),
    "Mul": ("*", np.multiply, False), "Div": ("/", np.divide, False),
    "Pow": ("**", np.power, False),
    "Equal": ("==", np.equal, True), "Less": ("<", np.less, True),
    "LessOrEqual": ("<=", np.less_equal, True), "Greater": (">", np.greater, True),
    "GreaterOrEqual": (">=", np.greater_equal, True),
    "And": ("&&", np.logical_and, True), "Or": ("||", np.logical_or, True),
}


@op(*_BINARY)
def _binary(n: Node) -> list[Val]:
    sym, fold, is_bool = _BINARY[n.op]
    a, b = n.x(0), n.x(1)
    shape = checked(n, lambda: broadcast(a.shape, b.shape))
    dtype = DType.BOOL if is_bool else a.dtype
    if n.op == "Div" and a.dtype.is_int:
        folded = _folded(n, [a, b], lambda x, y: np.trunc(x / y).astype(x.dtype))
        if folded:
            return [folded]
        r = len(shape)
        # ONNX integer division truncates toward zero; the language's floors.
        expr = f"cast(cast({n.ref(a, r)}, f64) / cast({n.ref(b, r)}, f64), {a.dtype})"
        return [n.out(expr, dtype, shape)]
    if n.op == "Pow" and b.dtype is not a.dtype and b.const is not None:
        # ONNX Pow's result has the base's dtype, whatever the exponent's
        b = Val(a.dtype, b.shape, const=b.const.astype(a.dtype.numpy), hint=b.hint)
    folded = _folded(n, [a, b], fold)
    if folded:
        return [folded]
    r = len(shape)
    rhs = n.ref(b, r)
    if n.op == "Pow" and b.dtype is not a.dtype:
        rhs = f"cast({rhs}, {a.dtype})"
    return [n.out(f"{n.ref(a, r)} {sym} {rhs}", dtype, shape)]


_UNARY: dict[str, tuple[str, Callable[..., np.ndarray]]] = {
    "Relu": ("relu({})", lambda x: np.maximum(x, 0)), "Sigmoid": ("sigmoid({})", lambda x: 1 / (1 + np.exp(-x))),
    "Tanh": ("tanh({})", np.tanh), "Exp": ("exp({})", np.exp), "Log": ("log({})", np.log),
    "Sqrt": ("sqrt({})", np.sqrt), "Abs": ("abs({})", np.abs), "Neg": ("-{}", np.negative),
    "Erf": ("erf({})", np.vectorize(math.erf)), "Floor": ("floor({})", np.floor), "Ceil": ("ceil({})", np.ceil),
    "Sin": ("sin({})", np.sin), "Cos": ("cos({})", np.cos), "Not": ("!{}", np.logical_not),
    "Reciprocal": ("1.0 / {}", np.reciprocal),
}


@op(*_UNARY)
def _unary(n: Node) -> list[Val]:
    template, fold = _UNARY[n.op]
    x = n.x()
    folded = _folded(n, [x], fold)
    if folded:
        return [folded]
    return [n.out(template.format(n.ref(x, x.rank)), x.dtype, x.shape)]


@op("Identity")
def _identity(n: Node) -> list[Val]:
    return [n.x()]


@op("Dropout")
def _dropout(n: Node) -> list[Val]:
    """Inference: the input as it is, and a mask of all true. ``training_mode`` is an
    input since opset 12 (an attribute ``is_test`` before 7): a constant false runs, and
    a constant true with a constant ratio of 0 (nothing dropped: the identity too);
    random dropout is refused."""
    x = n.x()
    training = n.input(2, required=False) if n.opset >= 12 else None
    ratio = n.input(1, required=False) if n.opset >= 12 else None
    keeps_all = ratio is not None and ratio.const is not None and not np.any(ratio.const)
    if training is not None and (training.const is None
                                 or bool(np.any(training.const)) and not keeps_all):
        raise n.fail("training_mode (input 2) must be a constant initializer: false, or "
                     "true with a constant ratio of 0 (random dropout is not supported: "
                     "inference only)")
    if n.opset < 7 and not n.attr("is_test", 0):
        raise n.fail("is_test=0 (training) is not supported: only inference dropout")
    outs = [x]
    if len(n.proto.output) > 1 and n.proto.output[1]:
        xr = n.ref(x)
        outs.append(n.out(f"{xr} == {xr} || {xr} != {xr}", DType.BOOL, x.shape, 1))  # all true
    return outs


@op("Max", "Min", "Sum", "Mean")
def _variadic(n: Node) -> list[Val]:
    xs = [n.x(i) for i in range(len(n.vals))]
    shape = checked(n, lambda: broadcast(*[x.shape for x in xs]))
    r = len(shape)
    refs = [n.ref(x, r) for x in xs]
    if n.op in ("Max", "Min"):
        expr = refs[0]
        for ref in refs[1:]:
            expr = f"{n.op.lower()}({expr}, {ref})"
    else:
        expr = " + ".join(refs)
        if n.op == "Mean":
            expr = f"({expr}) / {literal(len(xs), xs[0].dtype)}"
    return [n.out(expr, xs[0].dtype, shape)]


@op("Where")
def _where(n: Node) -> list[Val]:
    c, a, b = n.x(0), n.x(1), n.x(2)
    shape = checked(n, lambda: broadcast(c.shape, a.shape, b.shape))
    if c.const is not None and a.const is not None and b.const is not None:  # shape arithmetic
        return [const_val(np.where(c.const, a.const, b.const).astype(a.dtype.numpy), a.dtype)]
    r = len(shape)
    return [n.out(f"where({n.ref(c, r)}, {n.ref(a, r)}, {n.ref(b, r)})", a.dtype, shape)]


@op("LeakyRelu")
def _leaky_relu(n: Node) -> list[Val]:
    x = n.x()
    alpha = literal(n.attr("alpha", 0.01), x.dtype)
    xr = n.ref(x, x.rank)
    return [n.out(f"where({xr} >= 0.0, {xr}, {xr} * {alpha})", x.dtype, x.shape)]


@op("Clip")
def _clip(n: Node) -> list[Val]:
    x = n.x()
    if n.opset < 11:
        lo, hi = n.attr("min"), n.attr("max")
        bounds = [None if v is None else Val(x.dtype, (), const=np.asarray(v)) for v in (lo, hi)]
    else:
        bounds = [n.input(1, required=False), n.input(2, required=False)]
    expr = n.ref(x, x.rank)
    if bounds[0] is not None:
        expr = f"max({expr}, {n.ref(bounds[0], x.rank)})"
    if bounds[1] is not None:
        expr = f"min({expr}, {n.ref(bounds[1], x.rank)})"
    return [n.out(expr, x.dtype, x.shape)]


def _unary_expr(n: Node, template: str, defaults: dict[str, float] | None = None) -> list[Val]:
    """``template`` over the input ``{x}`` and float attributes (``{alpha}``...), in
    the input's dtype."""
    x = n.x()
    values = {k: literal(float(n.attr(k, d)), x.dtype) for k, d in (defaults or {}).items()}
    return [n.out(template.format(x=n.ref(x, x.rank), **values), x.dtype, x.shape)]


@op("Sign")
def _sign(n: Node) -> list[Val]:
    one, zero = ("1", "0") if n.x().dtype.is_int else ("1.0", "0.0")
    return _unary_expr(n, f"where({{x}} > {zero}, {one}, where({{x}} < {zero}, -{one}, {{x}} * {zero}))")


@op("IsNaN")
def _isnan(n: Node) -> list[Val]:
    """``x != x``: true exactly for NaN (transformers' exports test masked scores)."""
    x = n.x()
    if x.const is not None:
        return [const_val(np.isnan(x.const), DType.BOOL)]
    xr = n.ref(x, x.rank)
    return [n.out(f"{xr} != {xr}", DType.BOOL, x.shape)]


@op("IsInf")
def _isinf(n: Node) -> list[Val]:
    x = n.x()
    neg, pos = int(n.attr("detect_negative", 1)), int(n.attr("detect_positive", 1))
    if x.const is not None:
        c = x.const
        return [const_val(np.isinf(c) & ((c > 0) & bool(pos) | (c < 0) & bool(neg)), DType.BOOL)]
    xr, inf = n.ref(x, x.rank), "(1.0 / 0.0)"
    tests = ([f"{xr} == {inf}"] if pos else []) + ([f"{xr} == -{inf}"] if neg else [])
    return [n.out(" || ".join(tests) if tests else f"{xr} < {xr}", DType.BOOL, x.shape)]  # none: false


@op("Elu")
def _elu(n: Node) -> list[Val]:
    return _unary_expr(n, "where({x} >= 0.0, {x}, {alpha} * (exp({x}) - 1.0))", {"alpha": 1.0})


@op("Celu")
def _celu(n: Node) -> list[Val]:
    return _unary_expr(n, "max({x}, 0.0) + min({alpha} * (exp({x} / {alpha}) - 1.0), 0.0)",
                       {"alpha": 1.0})


@op("Selu")
def _selu(n: Node) -> list[Val]:
    return _unary_expr(n, "{gamma} * where({x} > 0.0, {x}, {alpha} * (exp({x}) - 1.0))",
                       {"alpha": 1.67326319217681884765625, "gamma": 1.05070102214813232421875})


@op("Softplus")
def _softplus(n: Node) -> list[Val]:
    # log(1 + e^x) without overflow: x + log(1 + e^-x) for positive x
    return _unary_expr(n, "where({x} > 0.0, {x} + log(1.0 + exp(-{x})), log(1.0 + exp({x})))")


@op("Softsign")
def _softsign(n: Node) -> list[Val]:
    return _unary_expr(n, "{x} / (1.0 + abs({x}))")


@op("HardSwish")
def _hard_swish(n: Node) -> list[Val]:
    return _unary_expr(n, "{x} * max(min({x} * 0.16666666666666666 + 0.5, 1.0), 0.0)")


@op("ThresholdedRelu")
def _thresholded_relu(n: Node) -> list[Val]:
    return _unary_expr(n, "where({x} > {alpha}, {x}, 0.0)", {"alpha": 1.0})


@op("Shrink")
def _shrink(n: Node) -> list[Val]:
    return _unary_expr(n, "where({x} < -{lambd}, {x} + {bias}, where({x} > {lambd}, {x} - {bias}, "
                          "{x} * 0.0))", {"lambd": 0.5, "bias": 0.0})


@op("Round")
def _round(n: Node) -> list[Val]:
    return [round_half_even(n, n.x(), n.proto.output[0] if n.proto.output else None)]


def round_half_even(n: Node, x: Val, onnx_name: str | None = None) -> Val:
    """Half to even, from floor: ``floor(x + 0.5)``, one less at an odd tie; values of
    2^mantissa-bits and above are integers already (``x + 0.5`` would round there)."""
    big = literal(2.0 ** (10 if x.dtype is DType.F16 else 23 if x.dtype is DType.F32 else 52),
                  x.dtype)
    xr = n.ref(x)
    r = n.em.bind(f"floor({xr} + 0.5)", x.dtype, x.shape, "up")
    tie = f"{r.ref} - {xr} == 0.5 && {r.ref} % 2.0 != 0.0"
    return n.em.bind(f"where(abs({xr}) >= {big}, {xr}, where({tie}, {r.ref} - 1.0, {r.ref}))",
                     x.dtype, x.shape, "rounded", onnx_name)


@op("PRelu")
def _prelu(n: Node) -> list[Val]:
    x, slope = n.x(0), n.x(1)
    shape = checked(n, lambda: broadcast(x.shape, slope.shape))
    if shape != x.shape:
        raise n.fail(f"slope of shape {slope.shape} does not broadcast to the input's {x.shape}")
    xr = n.ref(x, x.rank)
    return [n.out(f"where({xr} < 0.0, {n.ref(slope, x.rank)} * {xr}, {xr})", x.dtype, x.shape)]


@op("Mod")
def _mod(n: Node) -> list[Val]:
    """``fmod=0``: the sign of the divisor (``%``, np.remainder, exact); ``fmod=1``: the
    sign of the dividend (C's fmod), from ``%``: where the remainder's sign is wrong the
    fmod is ``r - b``, which is exact (the fmod is representable, and ``r - b`` is it
    exactly, so rounding keeps it); a zero keeps the dividend's sign, an infinite
    divisor gives a finite dividend back (``%`` gives inf there) and NaN for an
    infinite one."""
    a, b = n.x(0), n.x(1)
    shape = checked(n, lambda: broadcast(a.shape, b.shape))
    r = len(shape)
    fmod = int(n.attr("fmod", 0))
    rem = f"{n.ref(a, r)} % {n.ref(b, r)}"
    if not fmod:
        return [n.out(rem, a.dtype, shape)]
    m = n.em.bind(rem, a.dtype, shape, "rem")
    ar, br = n.ref(a, r), n.ref(b, r)
    wrong_sign = f"{m.ref} != 0 && ({m.ref} < 0) != ({ar} < 0)"
    expr = f"where({wrong_sign}, {m.ref} - {br}, {m.ref})"
    if a.dtype.is_float:
        inf = literal(np.inf, a.dtype)
        finite_or_nan = f"where({ar} - {ar} == 0.0, {ar}, {ar} - {ar})"
        expr = (f"where({br} == {inf} || {br} == -{inf}, {finite_or_nan}, "
                f"where({m.ref} == 0.0, 0.0 * {ar}, {expr}))")
    return [n.out(expr, a.dtype, shape)]


@op("HardSigmoid")
def _hard_sigmoid(n: Node) -> list[Val]:
    x = n.x()
    alpha, beta = (literal(n.attr(k, d), x.dtype) for k, d in (("alpha", 0.2), ("beta", 0.5)))
    return [n.out(f"max(min({n.ref(x, x.rank)} * {alpha} + {beta}, 1.0), 0.0)",
                  x.dtype, x.shape)]


@op("Gelu")
def _gelu(n: Node) -> list[Val]:
    x = n.x()
    approximate = n.attr("approximate", "none")
    if approximate == "tanh":
        n.em.uses_nn = True
        return [n.out(f"nn.gelu({n.ref(x)})", x.dtype, x.shape)]
    if approximate != "none":
        raise n.fail(f"approximate='{approximate}' is not supported")
    xr = n.ref(x)
    return [n.out(f"0.5 * {xr} * (1.0 + erf({xr} * 0.7071067811865476))", x.dtype, x.shape)]
