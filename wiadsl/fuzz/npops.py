"""Operators and elementwise functions of the independent NumPy evaluator (LANGUAGE.md §3, §6).

Each takes and returns ``npvalues.Val``. The arithmetic is NumPy's ufunc in the
promoted dtype (bf16 computed in float32 and rounded after each operation);
what the language fixes beyond NumPy is written out: ``/`` of integers is f64
true division, ``%`` is ``np.remainder`` with the divisor's sign on zeros too,
an integer to a negative integer power fails at run time, ``%``/``**`` of bools
are i8, and ``-`` of bools is not defined.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from .npvalues import (
    KIND,
    ROUNDING,
    WEAK,
    RuntimeFailure,
    Unsupported,
    Val,
    absmax,
    convert,
    is_float,
    is_int,
    merge_free,
    overflow_limit,
    promote,
    store,
)

ARITH: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "+": np.add, "-": np.subtract, "*": np.multiply, "/": np.true_divide,
    "%": np.remainder, "**": np.power, "max": np.maximum, "min": np.minimum,
}
COMPARE: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "==": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal,
    ">": np.greater, ">=": np.greater_equal,
}
LOGIC = {"&&": np.logical_and, "||": np.logical_or}
#: Float results that may differ in the last bits between backends.
INEXACT_BINARY = ("%", "**")
TRANSCENDENTAL: dict[str, Callable[[np.ndarray], Any]] = {
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda a: 1.0 / np.sqrt(a),
    "tanh": np.tanh, "sigmoid": lambda a: 1.0 / (1.0 + np.exp(-a)),
    "sin": np.sin, "cos": np.cos, "erf": np.frompyfunc(math.erf, 1, 1),
}
KEEP_DTYPE: dict[str, Callable[[np.ndarray], Any]] = {
    "abs": np.abs, "floor": np.floor, "ceil": np.ceil,
    "relu": lambda a: np.maximum(a, np.zeros((), a.dtype)),
}
#: NumPy's float result of a transcendental of a strong integer or bool.
FLOAT_RESULT = {"bool": "f16", "i8": "f16", "i32": "f64", "i64": "f64"}


def finish(x: object, dtype: str, weak: bool, exact: bool, near: bool = False,
           mag: float = 0.0, of: tuple[Val, ...] = ()) -> Val:
    """A result Val; ``of`` are elementwise operands whose ``free`` masks it inherits."""
    data = store(x, dtype)
    return Val(data, dtype, weak, exact, near, 0.0 if exact else max(mag, absmax(data)),
               merge_free(tuple(data.shape), *of))


def binary(op: str, a: Val, b: Val, precision: str | None = None) -> Val:
    """``a op b`` for arithmetic, comparison and logic operators and max/min."""
    dtype, weak = promote(a, b)
    exact = a.exact and b.exact
    if op in LOGIC:
        if a.dtype != "bool" or b.dtype != "bool":
            raise Unsupported(f"'{op}' of {a.dtype} and {b.dtype}")
        return finish(LOGIC[op](a.data, b.data), "bool", weak, exact, a.near or b.near,
                      of=(a, b))
    if op in COMPARE:
        if is_int(dtype) and any(v.weak and is_int(v.dtype) for v in (a, b)):
            dtype = "i64"  # NumPy 2 compares a Python int with an integer array by value
        x, y = convert(a, dtype), convert(b, dtype)
        with np.errstate(all="ignore"):
            out = COMPARE[op](x, y)
        near = not exact and is_float(dtype) and _within_rounding(
            x, y, dtype, precision, max(a.mag, b.mag))
        return finish(out, "bool", weak, True, near or a.near or b.near, of=(a, b))
    if op not in ARITH:
        raise Unsupported(f"operator '{op}'")
    if dtype == "bool" and op == "-":
        raise Unsupported("'-' of bools (the checker rejects it)")
    if dtype == "bool" and op in ("%", "**"):
        dtype = "i8"  # NumPy: bool % bool and bool ** bool are int8
    if op == "/" and not is_float(dtype):
        dtype = WEAK[2] if weak else "f64"  # true division of integers
    x, y = convert(a, dtype), convert(b, dtype)
    # As NumPy: only a negative exponent that meets an element fails (an empty base
    # never does), as the interpreter's _pow.
    if op == "**" and is_int(dtype) and np.any(np.broadcast_to(y, np.broadcast_shapes(x.shape, y.shape)) < 0):
        raise RuntimeFailure("integers to negative integer powers are not allowed")
    compute = np.float32 if dtype == "bf16" else None
    with np.errstate(all="ignore"):
        out = ARITH[op](x, y) if compute is None else ARITH[op](x.astype(compute),
                                                               y.astype(compute))
    if is_float(dtype) and op in INEXACT_BINARY:
        exact = False
    return finish(out, dtype, weak, exact, mag=max(a.mag, b.mag), of=(a, b))


def _within_rounding(x: np.ndarray, y: np.ndarray, dtype: str, precision: str | None,
                     mag: float) -> bool:
    """Whether some element pair is close enough that rounding may order it either way.

    The tolerance is the working precision's (the least precise float the program
    computes in), relative to the larger magnitude and at least 1, as compare.py
    judges float results, and to ``mag``, the magnitudes the operands were computed
    from: an inexact sum is only that exact.
    """
    rtol = max(ROUNDING[dtype], ROUNDING.get(precision or "", 0.0))
    a, b = np.broadcast_arrays(x.astype(np.float64), y.astype(np.float64))
    finite = np.isfinite(a) & np.isfinite(b)
    scale = np.maximum(max(1.0, mag), np.maximum(np.abs(a), np.abs(b)))
    with np.errstate(all="ignore"):
        close = finite & (np.abs(a - b) <= 8 * rtol * scale)
    return bool(np.any(close))


def negate(x: Val) -> Val:
    if x.dtype == "bool":
        raise Unsupported("'-' of a bool (the checker rejects it)")
    with np.errstate(all="ignore"):
        return finish(np.negative(x.data), x.dtype, x.weak, x.exact, mag=x.mag, of=(x,))


def logical_not(x: Val) -> Val:
    if x.dtype != "bool":
        raise Unsupported(f"'!' of {x.dtype}")
    return finish(np.logical_not(x.data), "bool", x.weak, x.exact, x.near, of=(x,))


def unary(fn: str, x: Val) -> Val:
    """An elementwise unary builtin."""
    if fn == "neg":
        return negate(x)
    if fn in ("abs", "relu", "floor", "ceil"):
        if x.dtype == "bool":
            return x  # the identity on bools, as NumPy's abs and maximum(x, False)
        if is_int(x.dtype) and fn in ("floor", "ceil"):
            return x
        f = KEEP_DTYPE[fn]
        with np.errstate(all="ignore"):
            return finish(f(x.data), x.dtype, x.weak, x.exact, mag=x.mag, of=(x,))
    if fn not in TRANSCENDENTAL:
        raise Unsupported(f"unary builtin '{fn}'")
    dtype = x.dtype if is_float(x.dtype) else (WEAK[2] if x.weak else FLOAT_RESULT[x.dtype])
    # computed in f64 and rounded once: at least as accurate as any backend
    with np.errstate(all="ignore"):
        out = TRANSCENDENTAL[fn](store(x.data, dtype).astype(np.float64))
    exact = x.exact and fn == "sqrt"
    return finish(np.asarray(out, dtype=np.float64), dtype, x.weak, exact, mag=x.mag, of=(x,))


def where(c: Val, a: Val, b: Val) -> Val:
    if c.dtype != "bool":
        raise Unsupported(f"where with a {c.dtype} condition")
    dtype, weak = promote(a, b)
    out = np.where(c.data, convert(a, dtype), convert(b, dtype))
    return finish(out, dtype, weak, a.exact and b.exact and c.exact, mag=max(a.mag, b.mag),
                  of=(c, a, b))


def matmul(a: Val, b: Val) -> Val:
    """NumPy matmul in the promoted dtype: integers wrap, bools are logical."""
    if a.data.ndim == 0 or b.data.ndim == 0:
        raise Unsupported("matmul of a scalar (the checker rejects it)")
    dtype, weak = promote(a, b)
    x, y = convert(a, dtype), convert(b, dtype)
    k_b = y.shape[0] if y.ndim == 1 else y.shape[-2]
    if x.shape[-1] != k_b:
        raise RuntimeFailure(f"matmul inner extents differ: {x.shape} @ {y.shape}")
    if dtype == "bf16":
        x, y = x.astype(np.float32), y.astype(np.float32)
    with np.errstate(all="ignore"):
        out = np.matmul(x, y)
        # rounding is relative to sum |a_ik| |b_kj| (operands' own error bounds included)
        bound = np.matmul(np.maximum(np.abs(x.astype(np.float64)), a.mag),
                          np.maximum(np.abs(y.astype(np.float64)), b.mag))
        free = _matmul_free(a, b, x, y, dtype)
    v = finish(out, dtype, weak, a.exact and b.exact and KIND[dtype] < 2, mag=absmax(bound))
    return v if free is None else replace(v, free=free)


def _matmul_free(a: Val, b: Val, x: np.ndarray, y: np.ndarray, dtype: str) -> np.ndarray | None:
    """Elements of ``x @ y`` whose sum could overflow in some order (sum over k of
    the finite |x_ik y_kj| near the dtype's max), or whose operands are ``free``."""
    if not is_float(dtype):
        return None
    x64, y64 = np.abs(x.astype(np.float64)), np.abs(y.astype(np.float64))
    x64, y64 = np.where(np.isfinite(x64), x64, 0.0), np.where(np.isfinite(y64), y64, 0.0)
    free = np.asarray(np.matmul(x64, y64) > overflow_limit(dtype, x.shape[-1]))
    ones_x, ones_y = np.ones(x.shape), np.ones(y.shape)
    if a.free is not None and a.free.any():
        free = free | (np.matmul(np.broadcast_to(a.free, x.shape).astype(float), ones_y) > 0)
    if b.free is not None and b.free.any():
        free = free | (np.matmul(ones_x, np.broadcast_to(b.free, y.shape).astype(float)) > 0)
    return free if free.any() else None
