"""WIA DSL text for the ONNX importer: identifiers, literals, parameter types.

Invariants:
- ``Names.fresh`` returns legal identifiers, unique in the kernel, never a keyword,
  builtin, dtype, ``nn``/``linalg``, or a Python keyword.
- ``literal`` round-trips: the frontend reads it (as f64, then the operand's
  dtype) back to exactly ``value`` in ``dtype``; negatives are parenthesized so a
  literal can stand after any operator. NaN has no literal (an error).
"""

from __future__ import annotations

import keyword as pykeyword
import re
from typing import Any

import numpy as np

from ..dtypes import DType
from ..frontend.builtins import BUILTINS
from .shapes import Shape


class LiteralError(ValueError):
    """A value WIA DSL cannot spell (the importer reports it as an import error)."""


_RESERVED = frozenset({"kernel", "func", "const", "import", "input", "output", "if", "else",
                       "for", "in", "while", "return", "true", "false", "none", "range", "tensor",
                       "nn", "linalg", *(d.value for d in DType), *BUILTINS})


class Names:
    """Unique, legal DSL identifiers from arbitrary ONNX names."""

    def __init__(self) -> None:
        self.taken: set[str] = set(_RESERVED)

    def fresh(self, hint: str, keep: bool = False) -> str:
        base = re.sub(r"[^A-Za-z0-9_]+", "_", hint).strip("_") or "v"
        if not keep:
            base = base[-40:].lstrip("_0123456789") or "v"
        if base[0].isdigit():
            base = "v_" + base
        if pykeyword.iskeyword(base):
            base += "_"
        name, n = base, 1
        while name in self.taken:
            name, n = f"{base}_{n}", n + 1
        self.taken.add(name)
        return name


def literal(value: Any, dtype: DType) -> str:
    """A DSL literal for one value of ``dtype`` (negative ones parenthesized)."""
    if dtype is DType.BOOL:
        return "true" if bool(value) else "false"
    if dtype.is_int:
        v = int(value)
        return f"({v})" if v < 0 else str(v)
    f = float(value)
    if np.isnan(f):
        raise LiteralError("a NaN constant cannot be written as a WIA DSL literal")
    # no literal overflows to inf (1e400 is an error): a division spells it
    text = "(1.0 / 0.0)" if np.isinf(f) else _shortest(abs(f), dtype)
    if "." not in text and "e" not in text:
        text += ".0"
    return f"(-{text})" if f < 0 or (f == 0 and np.signbit(f)) else text


def extreme_literal(dtype: DType, lowest: bool) -> str:
    """The lowest (or highest) value of ``dtype``: -inf / inf for floats, the integer
    limits otherwise (``-2^63`` spelled ``(-2^63 + 1) - 1``: 2^63 has no i64 literal)."""
    if dtype.is_float:
        return literal(-np.inf if lowest else np.inf, dtype)
    info = np.iinfo(dtype.numpy)
    return f"({literal(int(info.min) + 1, dtype)} - 1)" if lowest else literal(info.max, dtype)


def _shortest(f: float, dtype: DType) -> str:
    """The shortest decimal that reads back (through f64, as the frontend parses it)
    to the same ``dtype`` value; f64's own repr otherwise."""
    if f == 0.0:
        return "0.0"
    if dtype in (DType.F32, DType.F16, DType.BF16):
        store = np.float16 if dtype is DType.F16 else np.float32
        short = np.format_float_positional(store(f), unique=True, trim="0") \
            if 1e-4 <= f < 1e16 else np.format_float_scientific(store(f), unique=True, trim="0")
        if store(float(short)) == store(f):
            return short
    return repr(f)


def array_literal(array: np.ndarray, dtype: DType) -> str:
    if array.ndim == 0:
        return literal(array.item(), dtype)
    return "[" + ", ".join(array_literal(a, dtype) for a in array) + "]"


def param_type(dtype: DType, shape: Shape) -> str:
    """``f32[batch, 784]``; ``tensor`` when a dim is not an int or one name."""
    if not shape:
        return str(dtype)
    spelled = [d.declared() for d in shape]
    if any(s is None for s in spelled):
        return "tensor"
    return f"{dtype}[{', '.join(spelled)}]"  # type: ignore[arg-type]
