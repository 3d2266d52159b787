"""Compile-time values of operators and casts, computed as the program computes them.

A static (compile-time) scalar is the Python value of a NumPy scalar of its
frontend dtype: ``cast(2048.0, f16) + 1.0`` is 2048.0 (f16 rounds), i8 arithmetic
wraps, ``true + true`` is ``True``. Folding converts each operand to the dtype the
lowering converts it to, then evaluates the IR op the lowering emits, through the
interpreter's own evaluation (``ir.folding.evaluate_scalar``): a folded expression
and the same expression on run-time values cannot disagree (LANGUAGE.md §3).

Invariants:
- Every function answers None when it cannot fold: a non-number operand, or an op
  that would fail at run time (an integer to a negative power). That op is then
  emitted, and fails at run time with its source line, as unfolded.
- Checker and lowering fold with these same functions, so they agree on statics.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..dtypes import DType, promote
from ..ir.folding import evaluate_scalar
from ..ir.numerics import python_value
from ..ir.types import ScalarType, TensorType
from .builtins import Sym
from .typerules import ValueType

#: Operator -> the elementwise IR function the lowering emits for it.
ARITH_NAMES = {"+": "add", "-": "sub", "*": "mul", "/": "div", "%": "rem", "**": "pow",
               "&&": "and", "||": "or"}
FLOAT_CMP = {"==": "oeq", "!=": "une", "<": "olt", "<=": "ole", ">": "ogt", ">=": "oge"}
INT_CMP = {"==": "eq", "!=": "ne", "<": "slt", "<=": "sle", ">": "sgt", ">=": "sge"}
UNARY_NAMES = {"-": "neg", "!": "not"}


def is_number(v: Any) -> bool:
    """A scalar static: bool, int or float (not a dim name or a tuple)."""
    return isinstance(v, (bool, int, float))


def weak_int_outside(a: Any, at: ValueType, b: Any, bt: ValueType, dtype: DType) -> int | None:
    """The weak integer static of ``a OP b`` (a literal, a folded constant) that the
    integer ``dtype`` the op computes in cannot hold, or None. NumPy 2 (NEP 50)
    converts a Python int to the other operand's dtype and raises OverflowError
    when it does not fit (``np.int8(1) + 300``); wrapping it would give 44."""
    for static, t in ((a, at), (b, bt)):
        if t.weak and isinstance(static, int) and not isinstance(static, bool) \
                and not _fits(static, dtype):
            return static
    return None


def compare_dtype(a: Any, at: ValueType, b: Any, bt: ValueType) -> DType:
    """The dtype a comparison computes in: the NEP 50 promotion, widened to i64 when a
    weak integer (a literal, a dim, a loop index) may not fit it. NumPy 2 compares a
    Python int by value (``x == 300`` on i8 is False), where converting 300 to i8
    first would compare with 44. A literal that fits keeps the narrow compare."""
    compute, _ = promote(at.dtype, at.weak, bt.dtype, bt.weak)
    if compute.is_int and any(t.weak and t.dtype.is_int and not _fits(v, compute)
                              for v, t in ((a, at), (b, bt))):
        return DType.I64
    return compute


def _fits(value: Any, dtype: DType) -> bool:
    """``value`` is a known integer that the integer ``dtype`` holds."""
    if not dtype.is_int:
        return True
    info = np.iinfo(dtype.numpy)
    return isinstance(value, int) and info.min <= value <= info.max


def fold_binary(op: str, a: Any, at: ValueType, b: Any, bt: ValueType,
                result: ValueType) -> Any:
    """The static of ``a OP b`` (``result`` is the rule's type of it), or None."""
    if not (is_number(a) and is_number(b) and result.is_scalar):
        return None
    if op in FLOAT_CMP:
        compute = compare_dtype(a, at, b, bt)
        name = "arith.cmpf" if compute.is_float else "arith.cmpi"
        attrs = {"predicate": (FLOAT_CMP if compute.is_float else INT_CMP)[op]}
    elif op in ARITH_NAMES:
        compute, name, attrs = result.dtype, f"arith.{ARITH_NAMES[op]}", {}
    else:
        return None
    x, y = convert(a, at.dtype, compute), convert(b, bt.dtype, compute)
    if x is None or y is None:
        return None
    t = ScalarType(compute)
    return _static(evaluate_scalar(name, [(x, t), (y, t)], ScalarType(result.dtype), attrs))


def fold_unary(op: str, x: Any, xt: ValueType) -> Any:
    """The static of prefix ``-x`` or ``!x`` (same dtype as ``x``), or None."""
    if not is_number(x) or op not in UNARY_NAMES or not xt.is_scalar:
        return None
    t = ScalarType(xt.dtype)
    return _static(evaluate_scalar(f"arith.{UNARY_NAMES[op]}", [(x, t)], t))


def convert(value: Any, src: DType, dst: DType) -> Any:
    """``value`` (a static of dtype ``src``: a scalar or nested tuples) as ``cast``
    gives it in ``dst``; a static of the same form, or None."""
    if value is None or isinstance(value, Sym):
        return None
    if src is dst:
        return value
    if is_number(value):
        return _static(evaluate_scalar("arith.cast", [(value, ScalarType(src))], ScalarType(dst)))
    array = np.asarray(value, dtype=src.numpy)
    out = evaluate_scalar("tensor.cast", [(array, TensorType(src, array.shape))],
                          TensorType(dst, array.shape))
    return None if out is None else nested(out)


def nested(array: np.ndarray) -> Any:
    """An array as a static: nested tuples of Python scalars (a scalar for 0-d)."""
    return _tuples(np.asarray(array).tolist())


def _tuples(v: Any) -> Any:
    return tuple(_tuples(x) for x in v) if isinstance(v, list) else v


def _static(value: Any) -> Any:
    return None if value is None else python_value(value)
