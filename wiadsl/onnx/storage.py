"""ONNX element types WIA DSL has no dtype for, held in one it has.

ONNX graphs carry uint8, int16, uint16, uint32 and uint64 tensors; the language has
i8, i32 and i64. A value of such a type is *held* (``Val.held``) in a wider dtype
that represents every value of it exactly: uint8, int16 and uint16 in i32, uint32 in
i64, and uint64 in i64 as its bit pattern (two's complement: ``2**64 - 1`` is held as
``-1``). The importer keeps that exact:

- **Wrapping.** An op that can leave the type's range (``Add``, ``Mul``, ``Cast``...)
  is followed by a wrap to it (uint8: ``x % 256``), so every held value is one the
  ONNX type has, whatever ops follow. i32 and i64 wrap on overflow, and 2**32 and
  2**64 are multiples of the narrow ranges, so a product that overflows the storage
  still wraps to the right value. Ops that only select or move elements need none.
- **uint64 order.** Adding ``-2**63`` to a bit pattern maps unsigned order onto
  signed order, so the comparisons, ``Max``/``Min`` and the other ordered ops read
  biased operands (and a selected value is unbiased again). An op that would read
  the bits as a signed number in another way (``Div``, ``Cast`` to float) is refused.
- **uint8 has a second form**: quantized data is held shifted into i8
  (``Val.offset``, for the int8 GEMM). Q/DQ ops read that form, every other op the
  held one; ``held_for`` converts between them where a value meets the other kind.
- **Narrow floats compute in f32.** An op on float16 or bfloat16 data reads its
  operands as f32 and rounds each result once, as ONNX Runtime's kernels do: a
  translation of several DSL ops (``Celu``, ``LayerNormalization``) would otherwise
  round after each of them, off by an ulp of a type that has 8 bits of mantissa.
- **The boundary.** Graph inputs and outputs of these types (and bfloat16, which the
  language holds in f32 arrays) are converted by the imported model's kernel
  (``module.OnnxKernel``): callers pass and get arrays of the ONNX element type.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..dtypes import DType
from .graph import U8_OFFSET, Node, Val
from .shapes import shape_of

U64_BIAS = "(-9223372036854775807 - 1)"


@dataclass(frozen=True)
class Held:
    """One ONNX integer type and the DSL dtype that holds it."""

    name: str
    storage: DType
    numpy: np.dtype

    @property
    def bit_pattern(self) -> bool:
        """uint64: held as the i64 with the same bits (it needs no wrap, but a bias to order)."""
        return self.numpy == np.dtype(np.uint64)

    def wrap(self, expr: str) -> str:
        """DSL text for ``expr`` (in the storage dtype) reduced into this type's range."""
        if self.bit_pattern:
            return expr
        info = np.iinfo(self.numpy)
        span = int(info.max) - int(info.min) + 1
        if info.min == 0:
            return f"({expr}) % {span}"
        return f"({expr} + {-int(info.min)}) % {span} - {-int(info.min)}"

    def wrap_const(self, array: np.ndarray) -> np.ndarray:
        """A constant (storage dtype) reduced into the range, as NumPy's own cast wraps."""
        if self.bit_pattern:
            return np.asarray(array).astype(np.int64)
        return np.asarray(array).astype(self.numpy).astype(self.storage.numpy)

    def to_storage(self, array: np.ndarray) -> np.ndarray:
        """An array of this type as the kernel takes it."""
        if self.bit_pattern:
            return np.asarray(array).view(np.int64)
        return np.asarray(array).astype(self.storage.numpy)

    def from_storage(self, array: np.ndarray) -> np.ndarray:
        """A kernel result (in range: every held value is) as an array of this type."""
        if self.bit_pattern:
            return np.asarray(array).view(np.uint64)
        return np.asarray(array).astype(self.numpy)


#: ONNX TensorProto element type -> how it is held
HELD: dict[int, Held] = {
    2: Held("uint8", DType.I32, np.dtype(np.uint8)),
    4: Held("uint16", DType.I32, np.dtype(np.uint16)),
    5: Held("int16", DType.I32, np.dtype(np.int16)),
    12: Held("uint32", DType.I64, np.dtype(np.uint32)),
    13: Held("uint64", DType.I64, np.dtype(np.uint64)),
}
UINT8 = HELD[2]
HELD_BY_NUMPY = {h.numpy: h for h in HELD.values()}

#: Ops whose results are elements of their inputs (or of constants of the same type):
#: a held value stays in range, so no wrap follows them.
SELECTING = frozenset({
    "Identity", "Dropout", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose",
    "Concat", "Split", "Slice", "Gather", "GatherElements", "GatherND", "Expand", "Tile",
    "Pad", "Where", "Max", "Min", "Clip", "Relu", "ReduceMax", "ReduceMin", "Trilu",
    "MaxPool", "Mod", "Constant", "ConstantOfShape", "Resize", "TopK",
})
#: Ops whose results are not of their inputs' element type (indices, shapes, masks).
INDEX_RESULTS = frozenset({"ArgMax", "ArgMin", "Shape", "Size", "NonZero"})
#: Ops whose later outputs are indices (int64), whatever their first output holds.
INDEX_OUTPUTS_FROM = {"TopK": 1, "MaxPool": 1}
#: Ops that compare held uint64 values: they read biased operands.
ORDERED = frozenset({"Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Max", "Min",
                     "Clip", "ReduceMax", "ReduceMin", "ArgMax", "ArgMin", "TopK"})
#: Ops whose results are exact on uint64 bit patterns (two's complement arithmetic).
BIT_EXACT = SELECTING - {"Relu", "Mod"} | {"Add", "Sub", "Mul", "Neg", "Sum", "Equal",
                                           "ReduceSum", "ReduceProd", "CumSum", "MatMul",
                                           "Shape", "Size"}
QDQ = frozenset({"QuantizeLinear", "DequantizeLinear"})


def held_const(array: np.ndarray, hint: str = "") -> Val | None:
    """A constant of a held type (uint8 aside: ``graph.const_val`` shifts it), or None."""
    held = HELD_BY_NUMPY.get(np.asarray(array).dtype)
    if held is None or held is UINT8:
        return None
    return Val(held.storage, shape_of(np.shape(array)), const=held.to_storage(array),
               hint=hint, held=held)


def _shifted_to_held(n: Node, v: Val) -> Val:
    """uint8 held shifted in i8 -> held in i32 (its true value)."""
    if v.const is not None:
        return Val(DType.I32, v.shape, const=v.const.astype(np.int32) + U8_OFFSET,
                   hint=v.hint, held=UINT8)
    w = n.em.bind(f"cast({n.ref(v)}, i32) + {U8_OFFSET}", DType.I32, v.shape, "u8")
    w.held = UINT8
    return w


def _held_to_shifted(n: Node, v: Val) -> Val:
    """uint8 held in i32 -> shifted into i8 (what the quantization builtins read)."""
    if v.const is not None:
        return Val(DType.I8, v.shape, const=(v.const - U8_OFFSET).astype(np.int8),
                   offset=U8_OFFSET, hint=v.hint)
    w = n.em.bind(f"cast({n.ref(v)} - {U8_OFFSET}, i8)", DType.I8, v.shape, "u8_shifted")
    w.offset = U8_OFFSET
    return w


def _biased(n: Node, v: Val) -> Val:
    """A uint64 bit pattern with its top bit flipped: unsigned order as signed order."""
    if v.const is not None:
        return Val(DType.I64, v.shape, const=v.const ^ np.int64(-2**63), hint=v.hint)
    return n.em.bind(f"{n.ref(v)} + {U64_BIAS}", DType.I64, v.shape, "biased")


#: Ops that compute nothing on their data (or only compare it): narrow floats stay.
KEEPS_NARROW_FLOATS = SELECTING | INDEX_RESULTS | QDQ | frozenset({
    "Cast", "CastLike", "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual",
    "IsNaN", "IsInf", "Neg", "Abs", "Sign"})
NARROW_FLOATS = (DType.F16, DType.BF16)


def prepare_inputs(n: Node, reads_shifted: frozenset[str]) -> None:
    """Put each input of ``n`` in the form the op's translator reads (in place)."""
    widen = n.op not in KEEPS_NARROW_FLOATS
    for i, v in enumerate(n.vals):
        if v is None:
            continue
        if widen and v.dtype in NARROW_FLOATS:
            n.vals[i] = _as_f32(n, v)
        if v.offset and n.op not in reads_shifted:
            n.vals[i] = _shifted_to_held(n, v)
        elif v.held is UINT8 and n.op in QDQ:
            n.vals[i] = _held_to_shifted(n, v)
        elif v.held is not None and v.held.bit_pattern:
            if n.op in ORDERED:
                n.vals[i] = _biased(n, v)
            elif n.op not in BIT_EXACT:
                raise n.fail("uint64 is held as the int64 with the same bits, and this op "
                             "would read them as a signed number; uint64 takes only "
                             f"{', '.join(sorted(BIT_EXACT | ORDERED))}")


def _type_input(n: Node, originals: list[Val | None]) -> Held | None:
    """The held type of the op's results, from its inputs or its attributes."""
    if n.op in ("Cast", "CastLike"):
        if n.op == "CastLike":
            like = originals[1] if len(originals) > 1 else None
            return like.held if like is not None else None
        return HELD.get(int(n.attr("to")))
    if n.op == "QuantizeLinear":  # (uint8 results are held shifted instead)
        zp = originals[2] if len(originals) > 2 else None
        held = zp.held if zp is not None else HELD.get(int(n.attr("output_dtype", 0)))
        return held if held is not UINT8 else None
    source = _type_source(n, originals)
    if source is None:
        return None
    return UINT8 if source.offset else source.held


def _as_f32(n: Node, v: Val) -> Val:
    if v.const is not None:
        return Val(DType.F32, v.shape, const=v.const.astype(np.float32), hint=v.hint)
    return n.em.bind(f"cast({n.ref(v)}, f32)", DType.F32, v.shape, "wide")


def _rounded_back(n: Node, originals: list[Val | None], outs: list[Val]) -> list[Val]:
    """The f32 results of an op on narrow floats, rounded once to its result type."""
    narrow = rounds_back_to(n, originals)
    if narrow is None:
        return outs
    rounded = []
    for v, name in zip(outs, n.proto.output):
        if v.dtype is DType.F32 and v.const is not None:
            v = Val(narrow, v.shape, const=v.const.astype(narrow.numpy), hint=v.hint)
        elif v.dtype is DType.F32:
            v = n.em.bind(f"cast({n.ref(v)}, {narrow})", narrow, v.shape, "rounded", name)
        rounded.append(v)
    return rounded


def converts_results(n: Node, originals: list[Val | None]) -> bool:
    """Whether the op's results may change form after its translator (rounded to a
    narrow float, or quantized uint8 moved from i8 to its held i32 as a graph output):
    its translator must not bind the graph outputs, which are declared in the final form."""
    return (rounds_back_to(n, originals) is not None or n.op == "QuantizeLinear"
            or any(v is not None and v.offset for v in originals))


def rounds_back_to(n: Node, originals: list[Val | None]) -> DType | None:
    """The narrow float type the op's f32 results are rounded to, if it computes in f32."""
    source = _type_source(n, originals)
    if source is None or source.dtype not in NARROW_FLOATS or n.op in KEEPS_NARROW_FLOATS:
        return None
    return source.dtype


def _type_source(n: Node, originals: list[Val | None]) -> Val | None:
    """The input whose element type the op's results have (``Where``: the values)."""
    if n.op == "Where" and len(originals) > 1:
        return originals[1]
    return next((v for v in originals if v is not None), None)


def finish_outputs(n: Node, originals: list[Val | None], outs: list[Val]) -> list[Val]:
    """Round the results of narrow-float ops; mark the results that hold a held type,
    and wrap those an op can push out of range."""
    outs = _rounded_back(n, originals, outs)
    held = _type_input(n, originals)
    if held is None or n.op in INDEX_RESULTS:
        return outs
    finished = []
    for k, v in enumerate(outs):
        if v.dtype is not held.storage or k >= INDEX_OUTPUTS_FROM.get(n.op, len(outs)):
            finished.append(v)
            continue
        if held.bit_pattern and n.op in ORDERED:  # a selected operand, still biased
            v = _biased(n, v)
        elif n.op not in SELECTING:
            v = _wrapped(n, v, held)
        v.held = held
        finished.append(v)
    return finished


def _wrapped(n: Node, v: Val, held: Held) -> Val:
    if v.const is not None:
        return Val(v.dtype, v.shape, const=held.wrap_const(v.const), hint=v.hint)
    if held.bit_pattern:
        return v
    return n.em.bind(held.wrap(n.ref(v)), v.dtype, v.shape, f"{held.name}_wrapped")


def boundary_numpy(v: Val) -> np.dtype | None:
    """The NumPy dtype callers use for a graph input or output, where it is not the
    kernel's: a held type's, or bfloat16 (ml_dtypes', which onnx itself needs)."""
    if v.held is not None:
        return v.held.numpy
    if v.dtype is DType.BF16:
        try:
            import ml_dtypes
        except ImportError:
            return None
        return np.dtype(ml_dtypes.bfloat16)
    return None


def to_kernel(array: np.ndarray, onnx_dtype: np.dtype) -> np.ndarray:
    """A caller's array of ``onnx_dtype`` as the kernel takes it."""
    held = HELD_BY_NUMPY.get(onnx_dtype)
    return held.to_storage(array) if held else np.asarray(array).astype(np.float32)


def from_kernel(array: object, onnx_dtype: np.dtype) -> np.ndarray:
    """A kernel result as an array of ``onnx_dtype``."""
    held = HELD_BY_NUMPY.get(onnx_dtype)
    return held.from_storage(np.asarray(array)) if held else np.asarray(array).astype(onnx_dtype)
