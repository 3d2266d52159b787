"""NumPy representation of IR values, shared by constant folding and the interpreter.

Invariants:
- A scalar of dtype D is held as a 0-d array of ``D.numpy`` while computing and
  returned as a NumPy scalar of that dtype; ``index`` is held as int64.
- A ``vector<NxD>`` is a 1-d array of N elements of ``D.numpy``.
- bf16 values live in float32 arrays whose low 16 bits are zero: every result of
  bf16 type goes through ``round_bf16`` (round to nearest even on the top half).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..dtypes import DType
from .types import IndexType, IRType, TensorType, VectorType


def storage_dtype(t: IRType) -> np.dtype:
    """The NumPy dtype that holds values of ``t``."""
    return np.dtype(np.int64) if isinstance(t, IndexType) else t.dtype.numpy


def round_bf16(x: np.ndarray) -> np.ndarray:
    """Round float32 values to bf16 precision (nearest even), keeping NaN a NaN."""
    # np.ascontiguousarray would turn a 0-d array into shape (1,): keep the shape.
    f = np.array(x, dtype=np.float32, order="C", copy=True)
    bits = f.reshape(-1).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    out = rounded.astype(np.uint32).view(np.float32).reshape(f.shape)
    return np.where(np.isnan(f), f, out)


def to_type(x: Any, t: IRType) -> np.ndarray:
    """``x`` converted to the storage of ``t`` as an array (a 0-d one for scalars)."""
    arr = np.asarray(x)
    with np.errstate(all="ignore"):
        out = arr.astype(storage_dtype(t), copy=False)
    if not isinstance(t, IndexType) and t.dtype is DType.BF16:
        out = round_bf16(out)
    return out


def to_dtype(x: Any, dtype: DType) -> np.ndarray:
    """``x`` converted to ``dtype`` storage (bf16 rounded)."""
    with np.errstate(all="ignore"):
        out = np.asarray(x).astype(dtype.numpy, copy=False)
    return round_bf16(out) if dtype is DType.BF16 else out


def compute_dtype(dtype: DType) -> np.dtype:
    """The dtype float math runs in: the dtype itself, float32 for bf16."""
    return dtype.numpy


def finish(x: Any, t: IRType) -> Any:
    """A computed value in the final form for type ``t``: array or NumPy scalar."""
    out = to_type(x, t)
    if isinstance(t, VectorType):
        return np.ascontiguousarray(np.broadcast_to(out, (t.lanes,)))
    if isinstance(t, TensorType):
        return np.ascontiguousarray(out)
    return out.reshape(())[()]


def python_value(x: Any) -> Any:
    """A NumPy scalar as the plain Python value an attribute holds."""
    return x.item() if isinstance(x, np.generic) else x


def cast_values(x: Any, dtype: DType) -> np.ndarray:
    """``x`` cast to ``dtype`` storage as the language's ``cast`` (LANGUAGE.md §3): NumPy's
    ``astype``, except that float -> integer rounds toward zero, saturates to the
    destination range and maps NaN to 0 (NumPy leaves those undefined). To bool is
    ``x != 0`` (NaN is true); bf16 results are rounded."""
    arr = np.asarray(x)
    if arr.dtype.kind == "f" and dtype.is_int:
        return saturating_float_to_int(arr, dtype.numpy)
    return to_dtype(arr, dtype)


def saturating_float_to_int(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Floats truncated toward zero into the integer ``dtype``, saturating; NaN gives 0."""
    info = np.iinfo(dtype)
    t = np.trunc(np.asarray(x, np.float64))  # exact for every float dtype held here
    high = t >= -float(info.min)  # 2^(bits-1): exact in float64, unlike info.max
    low = t < float(info.min)
    with np.errstate(invalid="ignore"):
        inside = np.where(high | low | np.isnan(t), 0.0, t).astype(dtype)
    out = np.where(high, dtype.type(info.max), np.where(low, dtype.type(info.min), inside))
    return out.astype(dtype, copy=False)
