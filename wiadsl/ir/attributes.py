"""Attribute values and their text form (the parser side is in parser.py).

Attributes are plain Python values; their spelling:
    int        3, -1                       bool   true, false
    float      1.5, -2.0e-05, inf, nan     str    "text" (JSON escapes)
    list       [1, 2, "s:e"]               DType  f32, i1, bf16 (a bare type name)
    ndarray    dense<[[1.0, 2.0], [3.0, 4.0]] : tensor<2x2xf32>>, dense<7 : i64>
In an attribute dict a ``True`` value prints as the bare key (``{kernel}``),
like MLIR's unit attributes; ``{k = true}`` parses to the same value.
Floats always carry a ``.``, an exponent, or are inf/nan, so 1 and 1.0 differ.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import numpy as np

from ..diagnostics import WiaIRError
from ..dtypes import DType, from_numpy

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")


def format_float(value: float | np.floating[Any], dtype: DType = DType.F64) -> str:
    """The shortest text that reads back as the same ``dtype`` value."""
    value = float(value)
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if dtype is DType.F16:
        text = str(np.float16(value))
    elif dtype in (DType.F32, DType.BF16):
        text = str(np.float32(value))
    else:
        text = repr(value)
    return text if any(c in text for c in ".en") else text + ".0"


def format_scalar(value: Any, dtype: DType | None) -> str:
    """A scalar of ``dtype`` (None: index) as an attribute literal."""
    if dtype is DType.BOOL or isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if dtype is not None and dtype.is_float:
        return format_float(value, dtype)
    if isinstance(value, (float, np.floating)):
        return format_float(value)
    return str(int(value))


def format_dense(array: np.ndarray) -> str:
    """``dense<nested-list : type>``; the type records dtype and shape exactly."""
    dtype = from_numpy(array.dtype)
    if dtype is None:
        raise WiaIRError(f"cannot print a dense attribute of NumPy dtype {array.dtype}")
    body = _nested(array, dtype)
    if array.ndim == 0:
        return f"dense<{body} : {dtype.ir_name}>"
    dims = "".join(f"{d}x" for d in array.shape)
    return f"dense<{body} : tensor<{dims}{dtype.ir_name}>>"


def _nested(array: np.ndarray, dtype: DType) -> str:
    if array.ndim == 0:
        return format_scalar(array[()], dtype)
    return "[" + ", ".join(_nested(a, dtype) for a in array) + "]"


def format_attr(value: Any) -> str:
    """Any attribute value; unsupported Python types are an error."""
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return format_float(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, DType):
        return value.ir_name
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(format_attr(v) for v in value) + "]"
    if isinstance(value, np.ndarray):
        return format_dense(value)
    raise WiaIRError(f"cannot print attribute value {value!r} of type {type(value).__name__}")


def format_attr_dict(attributes: dict[str, Any]) -> str:
    """``{a = 1, flag}``, or "" when empty. Keys keep their insertion order."""
    if not attributes:
        return ""
    items = []
    for key, value in attributes.items():
        shown = key if _IDENT.match(key) else json.dumps(key)
        items.append(shown if value is True else f"{shown} = {format_attr(value)}")
    return "{" + ", ".join(items) + "}"
