"""IR types -> LLVM types, and the bf16/f16 storage conventions.

Invariants:
- Registers: i1 for booleans, ``half`` for f16, ``float`` for bf16 (values whose
  low 16 bits are zero, as the interpreter keeps them), i64 for ``index``.
- Memory: booleans are one byte (NumPy's bool), everything else as in registers.
- ``vector<NxT>`` is the LLVM vector ``<N x reg(T)>`` (``<8 x float>``: one ymm).
- f16 and bf16 arithmetic runs in float and is rounded back after every op
  (``compute_type``/``finish``), exactly as the interpreter does.
"""

from __future__ import annotations

import functools

import numpy as np
from llvmlite import ir

from ...dtypes import DType
from ...ir.types import IndexType, IRType, ScalarType, VectorType

I1, I8, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
F16, F32, F64 = ir.HalfType(), ir.FloatType(), ir.DoubleType()
PTR = ir.PointerType()
#: ``prepack(B, P, n, k, ldb)``: B into the layout a packed-B product reads (gemm.py's
#: and qgemm.py's), called once per frozen B (prepacked.py)
PREPACK_TYPE = ir.FunctionType(ir.VoidType(), [PTR, PTR, I64, I64, I64])

class _WholeConstant(ir.Constant):
    """A constant with its lanes (llvmlite checks a shuffle mask's) that prints as LLVM's
    one word for it, ``zeroinitializer`` or ``undef``. llvmlite writes
    ``ir.Constant(<16 x float>, 0.0)`` lane by lane (~400 characters): a micro-kernel
    helper's IR text was one third such constants, all printed and parsed again on
    its first build."""

    def __init__(self, typ: ir.Type, lanes: object, word: str) -> None:
        super().__init__(typ, lanes)
        self.word = word

    def _get_reference(self) -> str:
        return self.word


class Callee:
    """An indirect callee for ``IRBuilder.call`` (a function pointer, loaded or
    selected): with opaque pointers llvmlite needs the function type from the callee
    object itself."""

    def __init__(self, ptr: ir.Value, ftype: ir.FunctionType):
        self.ptr, self.function_type, self.type = ptr, ftype, ptr.type

    def get_reference(self) -> str:
        return self.ptr.get_reference()


@functools.cache
def zeros(t: ir.Type) -> ir.Constant:
    """The all-zero constant of ``t`` (+0.0 in every float lane)."""
    return _WholeConstant(t, 0, "zeroinitializer")


@functools.cache
def undef(t: ir.Type) -> ir.Constant:
    return _WholeConstant(t, ir.Undefined, "undef")


def splat(b: ir.IRBuilder, x: ir.Value, vt: ir.VectorType) -> ir.Value:
    """``x`` in every lane of ``vt`` (insertelement + a zero shuffle: x86 broadcasts)."""
    one = b.insert_element(undef(vt), x, ir.Constant(I32, 0))
    return b.shuffle_vector(one, undef(vt), zeros(ir.VectorType(I32, vt.count)))


_REG = {DType.BOOL: I1, DType.I8: I8, DType.I32: I32, DType.I64: I64,
        DType.F16: F16, DType.BF16: F32, DType.F32: F32, DType.F64: F64}


def reg_type(dtype: DType | None) -> ir.Type:
    return I64 if dtype is None else _REG[dtype]


def mem_type(dtype: DType) -> ir.Type:
    return I8 if dtype is DType.BOOL else _REG[dtype]


def dtype_of(t: IRType) -> DType | None:
    return None if isinstance(t, IndexType) else t.dtype  # type: ignore[union-attr]


def scalar_type(t: IRType) -> ir.Type:
    """The register type of a scalar, ``index`` or vector value."""
    if isinstance(t, VectorType):
        return ir.VectorType(reg_type(t.dtype), t.lanes)
    assert isinstance(t, (ScalarType, IndexType))
    return reg_type(dtype_of(t))


def like(v: ir.Value, t: ir.Type) -> ir.Type:
    """``t``, or a vector of ``t`` with ``v``'s lane count when ``v`` is a vector."""
    return ir.VectorType(t, v.type.count) if isinstance(v.type, ir.VectorType) else t


def element(t: ir.Type) -> ir.Type:
    """The element type of a vector type; a scalar type itself."""
    return t.element if isinstance(t, ir.VectorType) else t


def compute_dtype(dtype: DType) -> DType:
    """The dtype math runs in: f32 for the 16-bit floats."""
    return DType.F32 if dtype in (DType.F16, DType.BF16) else dtype


def to_compute(b: ir.IRBuilder, v: ir.Value, dtype: DType) -> ir.Value:
    return b.fpext(v, F32) if dtype is DType.F16 else v


def round_bf16(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    """Round a float to bf16 precision, nearest even; NaN stays NaN."""
    bits = b.bitcast(v, I32)
    lsb = b.and_(b.lshr(bits, ir.Constant(I32, 16)), ir.Constant(I32, 1))
    rounded = b.and_(b.add(b.add(bits, ir.Constant(I32, 0x7FFF)), lsb),
                     ir.Constant(I32, 0xFFFF0000 - (1 << 32)))
    is_nan = b.fcmp_unordered("uno", v, v)
    return b.select(is_nan, v, b.bitcast(rounded, F32))


def from_compute(b: ir.IRBuilder, v: ir.Value, dtype: DType) -> ir.Value:
    if dtype is DType.F16:
        return b.fptrunc(v, F16)
    if dtype is DType.BF16:
        return round_bf16(b, v)
    return v


def constant(dtype: DType | None, value: object) -> ir.Constant:
    """An LLVM constant of a scalar dtype (bf16 and f16 values pre-rounded)."""
    t = reg_type(dtype)
    if dtype is None or dtype.is_int:
        return ir.Constant(t, int(value))  # type: ignore[arg-type]
    if dtype is DType.BOOL:
        return ir.Constant(t, int(bool(value)))
    if dtype is DType.F16:
        return ir.Constant(t, float(np.float16(value)))  # type: ignore[arg-type]
    if dtype in (DType.F32, DType.BF16):
        x = np.float32(value)  # type: ignore[arg-type]
        if dtype is DType.BF16:
            from ...ir.numerics import round_bf16 as np_round
            x = np_round(np.asarray(x))[()]
        return ir.Constant(t, float(x))
    return ir.Constant(t, float(value))  # type: ignore[arg-type]


def is_x86(triple: str) -> bool:
    """Whether ``triple`` targets x86 (the ISA whose instructions some helpers emit:
    PAUSE in the pool's spin loop, SFENCE after non-temporal stores)."""
    return triple.startswith(("x86_64", "i686", "i386"))


def itemsize(dtype: DType) -> int:
    return 1 if dtype is DType.BOOL else np.dtype(dtype.numpy).itemsize
