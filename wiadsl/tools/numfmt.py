"""How the tools print values: a type line in the language's spelling, then NumPy's text.

``format_value("C", arr)`` gives

    C: f32[2, 3]
    [[1. 2. 3.]
     [4. 5. 6.]]

Large arrays are summarized the way NumPy does (edge items and ``...``).
"""

from __future__ import annotations

import numpy as np

from ..dtypes import from_numpy


def type_of(value: object) -> str:
    """``f32[2, 3]`` for a 2x3 float32 array, ``f64`` for a float64 scalar, and
    ``f64 (weak)`` for a Python float (NEP 50: it adapts to the other operand)."""
    if isinstance(value, (bool, int, float)):
        return {bool: "bool", int: "i64", float: "f64"}[type(value)] + " (weak)"
    array = np.asarray(value)
    found = from_numpy(array.dtype)
    dtype = str(found) if found is not None else str(array.dtype)
    if array.ndim == 0:
        return dtype
    return f"{dtype}[{', '.join(str(n) for n in array.shape)}]"


def format_array(value: object) -> str:
    array = np.asarray(value)
    with np.printoptions(threshold=200, edgeitems=3, linewidth=100, precision=6,
                         suppress=False):
        return np.array2string(array) if array.ndim else str(array[()])


def format_value(name: str, value: object) -> str:
    """The type line and the values, with a trailing newline."""
    return f"{name}: {type_of(value)}\n{format_array(value)}\n"
