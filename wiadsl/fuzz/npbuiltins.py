"""Builtin calls of the independent NumPy evaluator (LANGUAGE.md §7).

``call_builtin(name, args, kwargs, dtype_arg)`` takes evaluated arguments
(``Val`` or, for compile-time ones such as ``axis``, plain Python values) and
returns a ``Val``. Not covered (``Unsupported``): conv2d and the pools, which
the generator does not make.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import npops
from .npvalues import (
    RuntimeFailure,
    Unsupported,
    Val,
    absmax,
    cast,
    convert,
    is_float,
    is_int,
    overflow_limit,
    promote,
    store,
)

UNARY = ("abs", "neg", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "sin", "cos",
         "floor", "ceil", "erf")
REDUCTIONS = ("reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod",
              "argmax", "argmin")


def _axes(axis: Any, rank: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(rank))
    items = [axis] if isinstance(axis, int) else list(axis)
    return tuple(sorted(a % rank for a in items))


_ARG: dict[str, Callable[..., Any]] = {"argmax": np.argmax, "argmin": np.argmin}
_REDUCERS: dict[str, Callable[..., Any]] = {
    "reduce_sum": np.sum, "reduce_prod": np.prod, "reduce_max": np.max, "reduce_min": np.min,
    "reduce_mean": np.mean}


def reduce(fn: str, x: Val, axis: Any = None, keepdims: bool = False) -> Val:
    """``reduce_*``/``argmax``/``argmin``; sums and products of ints and bools are i64,
    means of them f64; a max, min or arg over zero elements fails."""
    if fn.startswith("arg"):
        dtype = "i64"
    elif fn in ("reduce_sum", "reduce_prod") and not is_float(x.dtype):
        dtype = "i64"
    elif fn == "reduce_mean" and not is_float(x.dtype):
        dtype = "f64"
    else:
        dtype = x.dtype
    exact = x.exact and (fn in ("reduce_max", "reduce_min", "argmax", "argmin")
                         or not is_float(dtype))
    if x.data.ndim == 0:  # a 0-d value reduces to itself
        value = np.int64(0) if fn.startswith("arg") else store(x.data, dtype)
        return Val(np.asarray(value), dtype, x.weak, exact)
    axes = _axes(axis, x.data.ndim)
    if fn in ("reduce_max", "reduce_min", "argmax", "argmin") and \
            math.prod(x.shape[a] for a in axes) == 0:
        raise RuntimeFailure(f"{fn} of zero elements")
    # bf16 sums in float32; an argmax looks at x itself, not at its i64 result dtype
    data = x.data if x.dtype == "bf16" or fn.startswith("arg") else store(x.data, dtype)
    with np.errstate(all="ignore"):
        if fn.startswith("arg"):
            ax = axes[0] if len(axes) == 1 and x.data.ndim > 1 else None
            out = _ARG[fn](data, axis=ax, keepdims=keepdims)
        else:
            out = _REDUCERS[fn](data, axis=axes, keepdims=keepdims)
    mag = 0.0
    if not exact:  # a float sum rounds relative to the sum of the magnitudes
        count = math.prod(x.shape[a] for a in axes)
        with np.errstate(over="ignore"):  # magnitudes past the dtype's range: an inf bound
            total = np.sum(np.abs(np.where(np.isfinite(data), data, 0)), axis=axes)
        mag = max(absmax(total), count * x.mag, absmax(out))
    free = _reduce_free(fn, x, data, dtype, axes, keepdims)
    return Val(store(out, dtype), dtype, x.weak, exact, mag=mag, free=free)


def _reduce_free(fn: str, x: Val, data: np.ndarray, dtype: str, axes: tuple[int, ...],
                 keepdims: bool) -> np.ndarray | None:
    """Elements of a reduction with no single right value: a float sum whose finite
    |terms| add up near the dtype's max, a float product whose factors of magnitude
    above 1 multiply up near it (or whose factors below 1 could underflow a product
    that is not itself negligible), in some order; or any reduced element ``free``."""
    free = None
    if x.free is not None and x.free.any():
        free = np.any(x.free, axis=axes, keepdims=keepdims)
    if not is_float(dtype) or fn not in ("reduce_sum", "reduce_mean", "reduce_prod"):
        return free
    count = math.prod(x.shape[a] for a in axes)
    a = np.abs(data.astype(np.float64))
    ok = np.isfinite(a) & (a > 0)
    with np.errstate(all="ignore"):
        if fn == "reduce_prod":
            logs = np.where(ok, np.log2(np.where(ok, a, 1.0)), 0.0)
            up = np.sum(np.maximum(logs, 0.0), axis=axes, keepdims=keepdims)
            down = np.sum(np.minimum(logs, 0.0), axis=axes, keepdims=keepdims)
            info = np.finfo(np.float16 if dtype == "f16" else np.float32 if dtype != "f64"
                            else np.float64)
            tiny = math.log2(float(info.tiny)) + 1
            over = up > math.log2(overflow_limit(dtype, count))
            under = (down < tiny) & (up + down > tiny - 8)
            mine = over | under
        else:
            mine = np.sum(np.where(ok, a, 0.0), axis=axes, keepdims=keepdims) \
                > overflow_limit(dtype, count)
    mine = np.asarray(mine)
    out = mine if free is None else (free | mine)
    return out if out.any() else None


def quant(fn: str, x: Val, scale: Val, zp: Val) -> Val:
    """quantize: ``rint(x / scale) + zero_point`` in x's dtype, clamped to i8 (a NaN
    stays NaN through rint and the clamp, so §3's cast makes it 0, as every target does);
    dequantize: ``(q - zero_point) * scale`` in f32; fake_quant: both, in x's dtype."""
    if fn in ("quantize", "fake_quant"):
        if not is_float(x.dtype):
            raise Unsupported(f"{fn} of {x.dtype}")
        f = x.dtype
        wide = np.float32 if f == "bf16" else None

        def op(v: np.ndarray) -> np.ndarray:
            return v if wide is None else v.astype(wide)
        with np.errstate(all="ignore"):
            ratio = store(op(x.data) / op(convert(scale, f)), f)
            q = store(op(store(np.rint(ratio), f)) + op(store(zp.data, f)), f)
        codes = Val(cast(np.clip(q, -128, 127), "i8"), "i8", False, x.exact)
        if fn == "quantize":
            return codes
        back = quant("dequantize", codes, scale, zp)
        return Val(store(back.data, x.dtype), x.dtype, False, x.exact)
    if not is_int(x.dtype):
        raise Unsupported(f"dequantize of {x.dtype}")
    f32 = np.float32
    with np.errstate(all="ignore"):
        out = (store(x.data, "f32").astype(f32) - store(zp.data, "f32").astype(f32)) \
            * store(scale.data, "f32").astype(f32)
    return Val(store(out, "f32"), "f32", False, x.exact and scale.exact and zp.exact)


def _dims(dims: Sequence[Val]) -> tuple[int, ...]:
    out = []
    for d in dims:
        v = d.scalar()
        if isinstance(v, bool) or not isinstance(v, int):
            raise Unsupported(f"a dim that is not an integer: {v!r}")
        out.append(v)
    return tuple(out)


def _filled(dims: Sequence[Val], value: Val, dtype: str | None) -> Val:
    shape = _dims(dims)
    if any(d < 0 for d in shape):
        raise RuntimeFailure(f"negative extent in {shape}")
    dt = dtype or value.dtype
    return Val(np.full(shape, cast(value.data, dt), dtype=store(0, dt).dtype), dt, False,
               value.exact)


def _concat(tensors: Sequence[Val], axis: int = 0) -> Val:
    xs = tensors
    acc = xs[0]
    dtype, weak = acc.dtype, acc.weak
    for x in xs[1:]:
        dtype, weak = promote(Val(acc.data, dtype, weak), x)
    try:
        out = np.concatenate([convert(x, dtype) for x in xs], axis=axis)
    except ValueError as err:
        raise RuntimeFailure(f"concat: {err}") from None
    return Val(store(out, dtype), dtype, weak, all(x.exact for x in xs))


def _reshape(x: Val, shape: Sequence[Val]) -> Val:
    try:
        out = np.reshape(x.data, _dims(shape))
    except ValueError as err:
        raise RuntimeFailure(f"reshape: {err}") from None
    return Val(out, x.dtype, x.weak, x.exact)


def _broadcast_to(x: Val, shape: Sequence[Val]) -> Val:
    try:
        out = np.broadcast_to(x.data, _dims(shape)).copy()
    except ValueError as err:
        raise RuntimeFailure(f"broadcast_to: {err}") from None
    return Val(out, x.dtype, x.weak, x.exact)


def _arange(n: Val) -> Val:
    v = n.scalar()
    if is_float(n.dtype):
        return Val(np.arange(math.ceil(v)).astype(np.float64) if v > 0 else np.zeros(0),
                   "f64")
    return Val(np.arange(max(int(v), 0), dtype=np.int64), "i64")


def _flatten(x: Val) -> Val:
    if x.data.ndim == 0:
        raise Unsupported("flatten of a scalar (the checker rejects it)")
    rest = math.prod(x.shape[1:])
    return Val(x.data.reshape((x.shape[0], rest)), x.dtype, x.weak, x.exact)


def _transpose(x: Val, perm: Any = None) -> Val:
    order = None if perm is None else [p % max(x.data.ndim, 1) for p in perm]
    return Val(np.transpose(x.data, order).copy(), x.dtype, x.weak, x.exact)


Builtin = Callable[..., Val]
TABLE: dict[str, Builtin] = {
    **{n: (lambda fn: lambda x: npops.unary(fn, x))(n) for n in UNARY},
    "max": lambda a, b: npops.binary("max", a, b), "min": lambda a, b: npops.binary("min", a, b),
    "where": npops.where, "matmul": npops.matmul, "transpose": _transpose,
    **{n: (lambda fn: lambda x, axis=None, keepdims=False: reduce(fn, x, axis, keepdims))(n)
       for n in REDUCTIONS},
    **{n: (lambda fn: lambda x, scale, zero_point: quant(fn, x, scale, zero_point))(n)
       for n in ("quantize", "dequantize", "fake_quant")},
    "reshape": _reshape, "flatten": _flatten, "broadcast_to": _broadcast_to, "concat": _concat,
    "zeros": lambda shape, dtype="f64": _filled(shape, Val(np.asarray(0), "i64", True), dtype),
    "ones": lambda shape, dtype="f64": _filled(shape, Val(np.asarray(1), "i64", True), dtype),
    "full": lambda shape, value, dtype=None: _filled(shape, value, dtype),
    "arange": _arange,
    "cast": lambda x, dtype: Val(cast(x.data, dtype), dtype, False, x.exact),
}
#: Parameter names in order, for binding positional arguments and keywords.
PARAMS: dict[str, tuple[str, ...]] = {
    **{n: ("x",) for n in UNARY}, "max": ("a", "b"), "min": ("a", "b"),
    "where": ("c", "a", "b"), "matmul": ("a", "b"), "transpose": ("x", "perm"),
    **{n: ("x", "axis", "keepdims") for n in REDUCTIONS},
    **{n: ("x", "scale", "zero_point") for n in ("quantize", "dequantize", "fake_quant")},
    "reshape": ("x", "shape"), "flatten": ("x",), "broadcast_to": ("x", "shape"),
    "concat": ("tensors", "axis"), "zeros": ("shape", "dtype"), "ones": ("shape", "dtype"),
    "full": ("shape", "value", "dtype"), "arange": ("n",), "cast": ("x", "dtype"),
}
#: Parameters that are compile-time values, dtype names, or lists of values.
STATIC = {"axis", "keepdims", "perm"}
DTYPE = {"dtype"}
LISTS = {"shape", "tensors"}
