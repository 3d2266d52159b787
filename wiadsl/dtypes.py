"""Element types and NumPy 2.x promotion (NEP 50), shared by every phase.

A value is *weak* when it comes only from literals, dim names and loop indices
(LANGUAGE.md §3): it adapts to the dtype of a strong operand of the same or a
higher kind, as a Python scalar does in NumPy 2.
"""

from __future__ import annotations

from enum import Enum

import numpy as np


class DType(Enum):
    """The element types of the language; the value is the source spelling."""

    BOOL = "bool"
    I8 = "i8"
    I32 = "i32"
    I64 = "i64"
    F16 = "f16"
    BF16 = "bf16"
    F32 = "f32"
    F64 = "f64"

    def __str__(self) -> str:
        return self.value

    @property
    def kind(self) -> int:
        """0 for bool, 1 for integers, 2 for floats: the NEP 50 kind order."""
        return _KIND[self]

    @property
    def is_float(self) -> bool:
        return self.kind == 2

    @property
    def is_int(self) -> bool:
        return self.kind == 1

    @property
    def bits(self) -> int:
        return _BITS[self]

    @property
    def numpy(self) -> np.dtype:
        """The NumPy dtype used to store values of this type (bf16 is held as f32)."""
        return self._numpy  # type: ignore[attr-defined]

    @property
    def ir_name(self) -> str:
        """The IR spelling: ``i1`` for bool, otherwise the source name."""
        return "i1" if self is DType.BOOL else self.value


_KIND = {DType.BOOL: 0, DType.I8: 1, DType.I32: 1, DType.I64: 1,
         DType.F16: 2, DType.BF16: 2, DType.F32: 2, DType.F64: 2}
_BITS = {DType.BOOL: 1, DType.I8: 8, DType.I32: 32, DType.I64: 64,
         DType.F16: 16, DType.BF16: 16, DType.F32: 32, DType.F64: 64}
_NUMPY_NAME = {DType.BOOL: "bool", DType.I8: "int8", DType.I32: "int32", DType.I64: "int64",
               DType.F16: "float16", DType.BF16: "float32", DType.F32: "float32",
               DType.F64: "float64"}

for _d in DType:  # on the call path of every kernel: no dict lookups there
    _d._numpy = np.dtype(_NUMPY_NAME[_d])  # type: ignore[attr-defined]

DTYPE_NAMES: dict[str, DType] = {d.value: d for d in DType}
IR_DTYPE_NAMES: dict[str, DType] = {d.ir_name: d for d in DType}

#: The dtype a weak value of each kind has when nothing strong fixes it.
WEAK_DEFAULT = {0: DType.BOOL, 1: DType.I64, 2: DType.F64}


_FROM_NUMPY: dict[np.dtype, DType] = {
    d.numpy: d for d in (DType.BOOL, DType.I8, DType.I32, DType.I64, DType.F16, DType.F32,
                         DType.F64)
}


def from_numpy(dtype: np.dtype) -> DType | None:
    """The language dtype of a NumPy dtype, or None when the language has none."""
    found = _FROM_NUMPY.get(dtype)
    if found is None and not isinstance(dtype, np.dtype):
        found = _FROM_NUMPY.get(np.dtype(dtype))
    return found


def promote_strong(a: DType, b: DType) -> DType:
    """NumPy's result_type for two strong dtypes, extended to bf16.

    bf16 behaves as f16 does towards integers and bool; bf16 with f16 gives f32,
    as neither holds the other.
    """
    if a is b:
        return a
    if DType.BF16 in (a, b):
        other = b if a is DType.BF16 else a
        if other is DType.F16:
            return DType.F32
        if other.is_float:
            return other
        via_f16 = promote_strong(DType.F16, other)
        return DType.BF16 if via_f16 is DType.F16 else via_f16
    return from_numpy(np.result_type(a.numpy, b.numpy))  # type: ignore[return-value]


def promote(a: DType, a_weak: bool, b: DType, b_weak: bool) -> tuple[DType, bool]:
    """NEP 50 promotion of two operands; returns (dtype, weak)."""
    if a_weak and b_weak:
        return WEAK_DEFAULT[max(a.kind, b.kind)], True
    if a_weak or b_weak:
        weak, strong = (a, b) if a_weak else (b, a)
        if weak.kind <= strong.kind:
            return strong, False
        return WEAK_DEFAULT[weak.kind], False
    return promote_strong(a, b), False
