"""PTX facts the emitter relies on: targets, ISA versions, and dtype tables.

Invariants:
- Every language dtype maps to exactly one *storage* type (how it sits in global
  memory) and one *compute* register class (how a kernel holds it): f16/bf16 are
  stored as ``.b16`` and computed in ``.f32`` (rounded back after every op, as the
  reference interpreter does); i8 is stored as ``.s8`` and computed in 32-bit
  registers (re-wrapped to 8 bits after every op); i1 is stored as one byte and
  computed as a predicate.
- The PTX ISA version written in a module is never below the minimum its target
  needs (``MIN_VERSION``), and never below 8.0.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ...diagnostics import WiaUsageError
from ...dtypes import DType

#: Minimum PTX ISA version ptxas accepts per target (PTX ISA manual, "Release notes").
MIN_VERSION: dict[str, tuple[int, int]] = {
    "sm_75": (6, 3), "sm_80": (7, 0), "sm_86": (7, 1), "sm_87": (7, 4), "sm_89": (7, 8),
    "sm_90": (7, 8), "sm_90a": (8, 0), "sm_100": (8, 6), "sm_120": (8, 7),
}
BASE_VERSION = (8, 0)
DEFAULT_ARCH = "sm_80"
#: SMs of the smallest GPU of each generation a grid should fill (A100: 108, H100 SXM: 132)
SM_COUNT = {80: 108, 90: 132}


def isa_version(arch: str) -> str:
    """The ``.version`` for ``arch``: max(8.0, the arch's minimum)."""
    if arch not in MIN_VERSION:
        raise WiaUsageError(f"unknown PTX target '{arch}'; targets: {', '.join(MIN_VERSION)}")
    major, minor = max(BASE_VERSION, MIN_VERSION[arch])
    return f"{major}.{minor}"


def sm_number(arch: str) -> int:
    """80 for ``sm_80``, 90 for ``sm_90a``."""
    return int(arch[3:].rstrip("af"))


@dataclass(frozen=True)
class DTypeInfo:
    """How one dtype is stored and computed.

    ``mem``: the ld/st type suffix; ``reg``: the register class used for computing
    (``pred b32 b64 f32 f64``); ``itype``: the typed suffix for integer/float
    instructions on the compute register (``s32``, ``f32``...); ``size``: bytes in memory.
    """

    mem: str
    reg: str
    itype: str
    size: int


DTYPES: dict[DType, DTypeInfo] = {
    DType.BOOL: DTypeInfo("u8", "pred", "pred", 1),
    DType.I8: DTypeInfo("s8", "b32", "s32", 1),
    DType.I32: DTypeInfo("s32", "b32", "s32", 4),
    DType.I64: DTypeInfo("s64", "b64", "s64", 8),
    DType.F16: DTypeInfo("b16", "f32", "f32", 2),
    DType.BF16: DTypeInfo("b16", "f32", "f32", 2),
    DType.F32: DTypeInfo("f32", "f32", "f32", 4),
    DType.F64: DTypeInfo("f64", "f64", "f64", 8),
}

#: NumPy storage of each dtype on the device (bf16 is 2 bytes there, unlike the host's f32).
DEVICE_NUMPY: dict[DType, str] = {
    DType.BOOL: "uint8", DType.I8: "int8", DType.I32: "int32", DType.I64: "int64",
    DType.F16: "float16", DType.BF16: "uint16", DType.F32: "float32", DType.F64: "float64",
}

#: Parameter types for scalars passed by value (``.param`` space).
PARAM_TYPE: dict[DType, str] = {
    DType.BOOL: "u32", DType.I8: "s32", DType.I32: "s32", DType.I64: "s64",
    DType.F16: "f32", DType.BF16: "f32", DType.F32: "f32", DType.F64: "f64",
}


def info(dtype: DType) -> DTypeInfo:
    return DTYPES[dtype]


def float_literal(value: float, dtype: DType) -> str:
    """An exact PTX float immediate: ``0f3F800000`` (f32) or ``0d3FF0...`` (f64)."""
    if dtype is DType.F64:
        return "0d" + struct.pack(">d", float(value)).hex().upper()
    return "0f" + struct.pack(">f", float(value)).hex().upper()


def round16(value: float, dtype: DType) -> float:
    """``value`` rounded to f16 or bf16 (round to nearest even), as a Python float."""
    import numpy as np

    if dtype is DType.F16:
        return float(np.float16(value))
    bits = int(np.array(value, np.float32).view(np.uint32))
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return float(np.array(bits, np.uint32).view(np.float32))


def int_literal(value: int, dtype: DType) -> str:
    """An integer immediate for the compute register of ``dtype`` (wrapped to its width)."""
    bits = 64 if dtype is DType.I64 else 32
    v = int(value) & ((1 << bits) - 1)
    if v >= 1 << (bits - 1):
        v -= 1 << bits
    return str(v)
