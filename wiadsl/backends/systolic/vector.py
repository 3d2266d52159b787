"""The vector unit: elementwise functions on accumulator words, and the word format.

Accumulator memory is 32-bit words (``uint32`` arrays). A ``:dtype`` on an
operand says how the words are read or written: integers (i8, i32) as
two's-complement int32, floats (f16, bf16, f32) as IEEE f32. Reading as a
narrower type converts exactly as the IR does (i8 wraps, bf16 rounds to nearest
even), so an int32 accumulator read ``:i8`` is NumPy's int8 matmul result.

Invariant: every function computes what the IR op it stands for computes (the
IR's own NumPy helpers are reused), so vector-unit results are bit-identical to
the reference interpreter's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ...dtypes import DType
from ...ir.numerics import cast_values, to_dtype
from ...ir.ops_elementwise import ELEMENTWISE_BY_NAME, apply_elementwise
from ...ir.ops_tensor import _quantize
from .isa import SasmError

#: dtypes the vector unit and the accumulator words hold.
VEC_DTYPES = frozenset({DType.I8, DType.I32, DType.F16, DType.BF16, DType.F32})


def read_words(words: np.ndarray, dtype: DType) -> np.ndarray:
    """Accumulator words as values of ``dtype``."""
    raw = words.view(np.int32) if dtype.is_int else words.view(np.float32)
    return to_dtype(raw, dtype)


def write_words(words: np.ndarray, values: np.ndarray, dtype: DType) -> None:
    """Store ``values`` (converted to ``dtype``) into accumulator words."""
    typed = to_dtype(values, dtype)
    container = np.int32 if dtype.is_int else np.float32
    words[...] = np.ascontiguousarray(typed.astype(container)).view(np.uint32)


@dataclass(frozen=True)
class VecFn:
    """One vector-unit function: its IR name, arity and NumPy semantics.

    ``compute(args, src_dtypes, dst_dtype)`` gets operands already converted to
    their dtypes and returns values of ``dst_dtype``.
    """

    name: str
    arity: int
    compute: Callable[[list[np.ndarray], Sequence[DType], DType], np.ndarray]
    #: True when every operand and the result must share one dtype.
    uniform: bool


def _elementwise(name: str) -> VecFn:
    fn = ELEMENTWISE_BY_NAME[name]
    return VecFn(name, fn.arity, lambda args, _s, d: apply_elementwise(fn, args, d), True)


def _dequantize(args: list[np.ndarray]) -> np.ndarray:
    x, scale, zp = args
    return (to_dtype(x, DType.F32) - to_dtype(zp, DType.F32)) * to_dtype(scale, DType.F32)


VEC_FNS: dict[str, VecFn] = {name: _elementwise(name) for name in ELEMENTWISE_BY_NAME}
VEC_FNS["cast"] = VecFn("cast", 1, lambda a, _s, d: cast_values(a[0], d), False)
VEC_FNS["quantize"] = VecFn(
    "quantize", 3, lambda a, s, _d: _quantize(a[0], a[1], a[2], s[0]), False)
VEC_FNS["dequantize"] = VecFn("dequantize", 3, lambda a, _s, _d: _dequantize(a), False)
VEC_FNS["fake_quant"] = VecFn(
    "fake_quant", 3, lambda a, s, _d: _dequantize([_quantize(a[0], a[1], a[2], s[0]), *a[1:]]),
    False)


def vec_fn(name: str, src_dtypes: Sequence[DType], dst_dtype: DType) -> VecFn:
    """The function ``name`` after checking its operand count and dtypes."""
    if name not in VEC_FNS:
        raise SasmError(f"unknown vector function 'vec.{name}'")
    fn = VEC_FNS[name]
    if len(src_dtypes) != fn.arity:
        raise SasmError(f"vec.{name} takes {fn.arity} sources, got {len(src_dtypes)}")
    for d in (*src_dtypes, dst_dtype):
        if d not in VEC_DTYPES:
            raise SasmError(f"vec.{name}: the vector unit has no {d.ir_name} type")
    if fn.uniform and len({*src_dtypes, dst_dtype}) != 1:
        raise SasmError(f"vec.{name}: operands and result must share one dtype")
    return fn


# ----------------------------------------------------------------- row reductions

#: row-reduction kinds of ``vec.rKIND`` and how two partial results combine
REDUCE_COMBINE: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "max": np.maximum, "min": np.minimum, "sum": np.add,
}


def reduce_dtypes(kind: str, src: DType, dst: DType) -> None:
    """Check a row reduction's dtypes. max/min keep the source dtype; a sum may also
    write the unit's accumulation type (f32 for floats, i32 for integers), so a mean
    of f16 rows divides the f32 sum and rounds once, as NumPy's mean does."""
    if kind not in REDUCE_COMBINE:
        raise SasmError(f"unknown row reduction 'vec.r{kind}'; kinds: {', '.join(REDUCE_COMBINE)}")
    for d in (src, dst):
        if d not in VEC_DTYPES:
            raise SasmError(f"vec.r{kind}: the vector unit has no {d.ir_name} type")
    wide = DType.I32 if src.is_int else DType.F32
    if dst is not src and not (kind == "sum" and dst is wide):
        raise SasmError(f"vec.r{kind}: {src.ir_name} rows reduce to {src.ir_name}"
                        + (f" or {wide.ir_name}" if kind == "sum" else "")
                        + f", not {dst.ir_name}")


def reduce_rows(kind: str, values: np.ndarray, dst: DType) -> np.ndarray:
    """Each row of ``values`` reduced to one column ([h, w] -> [h, 1]). Sums run in
    the accumulation type: wrapping int32 (so an i8 result read back wraps exactly
    as the IR's i8 sum) or f32 (float rows; NumPy's order may differ by rounding)."""
    if kind == "sum":
        acc = np.int32 if dst.is_int else np.float32
        with np.errstate(all="ignore"):
            return np.asarray(np.sum(values.astype(acc), axis=1, keepdims=True, dtype=acc))
    return np.max(values, axis=1, keepdims=True) if kind == "max" else \
        np.min(values, axis=1, keepdims=True)
