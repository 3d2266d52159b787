"""The ONNX importer's state: typed values, names, and the WIA DSL text being written.

The importer translates an ONNX graph node by node into statements of one WIA DSL
kernel (``name = expr;``). This module holds what every op translator shares.

Invariants:
- Every ONNX tensor name maps to one ``Val``: its dtype, symbolic shape, and
  either the DSL name that holds it (``ref``) or a known constant (``const``),
  or both. Shapes are tracked exactly (``onnx_shapes``), so every reshape target
  and output declaration is written from them, never guessed.
- DSL names are unique identifiers, never keywords, builtins, dim names or
  ``nn``; graph inputs keep their ONNX name where it is a legal identifier.
- A constant becomes DSL text only when used: a one-element constant as a weak
  literal (ONNX operands share a dtype, so weakness never changes a result);
  up to ``inline_limit`` elements as a cast array literal; anything larger as a
  kernel input (a *weight*) whose value the loader binds, so the source stays
  small whatever the model's size.
- ONNX integer types WIA DSL lacks (uint8, int16, uint16, uint32, uint64) are held in
  a wider dtype (``Val.held``, ``storage``); quantized uint8 is held shifted into
  int8 instead: ``real = stored + offset`` with ``offset = 128``, read by Q/DQ ops.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..diagnostics import WiaError
from ..dtypes import DType
from .shapes import Dim, DimError, Shape, shape_of, shape_text
from .text import Names, array_literal, literal, param_type

if TYPE_CHECKING:
    from .storage import Held


class OnnxImportError(WiaError):
    """An ONNX model that cannot be imported: an unsupported op, attribute or type."""


#: ONNX TensorProto element type -> DSL dtype (the types it lacks: ``storage.HELD``).
ONNX_DTYPES: dict[int, DType] = {1: DType.F32, 11: DType.F64, 10: DType.F16, 16: DType.BF16,
                                 3: DType.I8, 6: DType.I32, 7: DType.I64, 9: DType.BOOL}
ONNX_TYPE_NAMES = {1: "float", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32",
                   7: "int64", 8: "string", 9: "bool", 10: "float16", 11: "double",
                   12: "uint32", 13: "uint64", 16: "bfloat16"}
U8_OFFSET = 128


@dataclass
class Val:
    """One ONNX tensor as the importer knows it."""

    dtype: DType
    shape: Shape
    ref: str | None = None
    const: np.ndarray | None = None
    offset: int = 0
    hint: str = ""  # a name for a constant (its initializer's), used if it is materialized
    #: for a DequantizeLinear result with one scale and zero point: (data, scale, zero point)
    dequantized: tuple[Val, Val, Val] | None = None
    #: a symbolic shape value (``onnx_symbolic``): the extents this i64 tensor holds
    sym: tuple[Dim, ...] | None = None
    #: the ONNX type this value holds when its dtype is only the storage (``storage``)
    held: Held | None = None

    @property
    def rank(self) -> int:
        return len(self.shape)


@dataclass
class Emitter:
    """The kernel being written: parameters, body statements, weights.

    ``outputs`` maps the ONNX names of graph outputs to their reserved DSL names:
    the node computing one binds it directly (``y = x @ w;``, not ``y = t; ``).
    """

    inline_limit: int = 16
    names: Names = field(default_factory=Names)
    inputs: list[str] = field(default_factory=list)
    body: list[str] = field(default_factory=list)
    weights: dict[str, np.ndarray] = field(default_factory=dict)
    weight_decls: list[str] = field(default_factory=list)
    outputs: dict[str, str] = field(default_factory=dict)
    uses_nn: bool = False
    #: dynamic dim name -> ``dim(input, axis)`` of the first input declaring it
    dim_sources: dict[str, str] = field(default_factory=dict)

    def bind(self, expr: str, dtype: DType, shape: Shape, hint: str,
             onnx_name: str | None = None) -> Val:
        """``hint = expr;`` -> the Val naming the result (a graph output's own name)."""
        name = self.outputs.get(onnx_name or "") or self.names.fresh(hint)
        self.body.append(f"    {name} = {expr};")
        return Val(dtype, shape, ref=name)

    def shape_tensor(self, v: Val) -> Val:
        """A symbolic shape value (``Val.sym``) as an i64 value of the kernel: a scalar, or
        a 1-D tensor of its extents, each read from an input with ``dim``."""
        assert v.sym is not None
        if not v.shape:
            return self.bind(self.extent(v.sym[0]), DType.I64, (), "extent")
        parts = ", ".join(f"full([1], {self.extent(d)}, i64)" for d in v.sym)
        return self.bind(f"concat([{parts}], axis=0)", DType.I64, v.shape, "extents")

    def pad_constant(self, x: Val, ref: str, before: list[int], after: list[int], fill: str) -> Val:
        """``x`` (DSL text ``ref``) with ``before[a]`` / ``after[a]`` elements of ``fill`` on
        each axis ``a``, as a filled buffer and one slice assignment (two passes over the
        data; a concat per padded axis made one copy of everything per axis)."""
        axes = list(zip(x.shape, before, after, strict=True))  # padded axes are static
        shape = tuple(Dim(d.value + b + a) if b or a else d for d, b, a in axes)
        name = self.names.fresh("padded")
        dims = ", ".join(d.text() for d in shape)
        self.body.append(f"    {name} = full([{dims}], {fill}, {x.dtype});")
        window = ", ".join(f"{b}:{b + d.value}" if b or a else ":" for d, b, a in axes)
        self.body.append(f"    {name}[{window}] = {ref};")
        return Val(x.dtype, shape, ref=name)

    def ref(self, v: Val, rank: int | None = None) -> str:
        """DSL text for ``v`` as an operand of a result of rank ``rank``.

        A one-element constant becomes a literal when it cannot change the result's
        shape (its rank is at most ``rank``); other constants are materialized once.
        """
        if v.const is not None and v.const.size == 1 and v.const.ndim <= (rank or 0):
            return literal(v.const.reshape(-1)[0], v.dtype)
        if v.ref is None:
            v.ref = self._materialize(v)
        return v.ref

    def _materialize(self, v: Val) -> str:
        assert v.const is not None
        array = np.ascontiguousarray(v.const, dtype=v.dtype.numpy)
        if array.size == 0:
            raise OnnxImportError("an empty constant tensor cannot be written in WIA DSL")
        if array.size <= self.inline_limit:
            name = self.names.fresh(v.hint or "k")
            self.body.append(f"    {name} = cast({array_literal(array, v.dtype)}, {v.dtype});")
            return name
        name = self.names.fresh(v.hint or "w")
        self.weight_decls.append(f"input {name}: {v.dtype}{shape_text(v.shape)}")
        self.weights[name] = array
        return name

    def declare_input(self, onnx_name: str, dtype: DType, shape: Shape) -> Val:
        name = self.names.fresh(onnx_name, keep=True)
        self.inputs.append(f"input {name}: {param_type(dtype, shape)}")
        for axis, d in enumerate(shape):
            symbol = d.declared()
            if not d.is_static and symbol is not None:
                self.dim_sources.setdefault(symbol, f"dim({name}, {axis})")
        return Val(dtype, shape, ref=name)

    def extent(self, d: Dim) -> str:
        """A DSL value (i64) of extent ``d``: its symbols read from the inputs with ``dim``."""
        missing = [s for s in d.names if s not in self.dim_sources]
        if missing:
            raise OnnxImportError(f"no graph input has the dynamic dim '{missing[0]}'")
        return " * ".join([str(d.coef)] * (d.coef != 1 or not d.names)
                          + [self.dim_sources[s] for s in d.names])

    def reserve_output(self, onnx_name: str) -> str:
        if onnx_name not in self.outputs:
            self.outputs[onnx_name] = self.names.fresh(onnx_name, keep=True)
        return self.outputs[onnx_name]

    def finish_output(self, onnx_name: str, v: Val) -> str:
        """The declaration of output ``onnx_name``; assigns it unless a node did."""
        name = self.outputs[onnx_name]
        if v.ref != name:
            if v.const is not None and v.rank == 0:  # a literal would be weak
                value = f"cast({literal(v.const.item(), v.dtype)}, {v.dtype})"
            else:  # (rank - 1: a one-element constant is materialized, not a literal)
                value = self.ref(v, v.rank - 1)
            self.body.append(f"    {name} = {value};")
        return f"output {name}: {param_type(v.dtype, v.shape)}"

    def source(self, kernel: str, header: str, outputs: list[str]) -> str:
        lines = [f"// {line}" for line in header.splitlines()]
        if self.uses_nn:
            lines.append("import nn;")
        params = ",\n".join(f"    {p}" for p in self.inputs + self.weight_decls + outputs)
        lines += ["", f"kernel {kernel}(\n{params}\n) {{", *self.body, "}", ""]
        return "\n".join(lines)


@dataclass
class Node:
    """One ONNX node being translated: its attributes, inputs, and how to fail."""

    proto: Any
    opset: int
    em: Emitter
    vals: list[Val | None]

    @property
    def op(self) -> str:
        return str(self.proto.op_type)

    @property
    def label(self) -> str:
        return self.proto.name or (self.proto.output[0] if self.proto.output else "")

    def fail(self, why: str) -> OnnxImportError:
        where = f"node '{self.proto.name}'" if self.proto.name else "an unnamed node"
        return OnnxImportError(f"ONNX op {self.op} ({where}, opset {self.opset}): {why}")

    def attr(self, name: str, default: Any = None) -> Any:
        from . import proto as pb

        for a in self.proto.attribute:
            if a.name == name:
                try:
                    value = pb.attribute_value(a)
                    if isinstance(value, pb.Tensor):
                        return pb.to_array(value)
                except pb.ProtoError as exc:
                    raise self.fail(str(exc)) from None
                return value.decode() if isinstance(value, bytes) else value
        return default

    def input(self, i: int, required: bool = True) -> Val | None:
        v = self.vals[i] if i < len(self.vals) else None
        if v is None and required:
            raise self.fail(f"input {i} is required")
        return v

    def x(self, i: int = 0) -> Val:
        v = self.input(i)
        assert v is not None
        return v

    def const(self, i: int, what: str) -> np.ndarray | None:
        """The value of input ``i``, which must be a constant (None if absent)."""
        v = self.input(i, required=False)
        if v is None:
            return None
        if v.const is None:
            raise self.fail(f"{what} (input {i}) must be a constant initializer")
        return v.const

    def dims(self, i: int, what: str) -> list[Dim]:
        """Input ``i`` as extents: an int64 constant or a symbolic shape value."""
        v = self.x(i)
        if v.sym is not None:
            return list(v.sym)
        value = self.const(i, what)
        assert value is not None
        return [Dim(int(d)) for d in value.reshape(-1)]

    def out(self, expr: str, dtype: DType, shape: Shape, i: int = 0) -> Val:
        onnx_name = self.proto.output[i] if i < len(self.proto.output) else ""
        return self.em.bind(expr, dtype, shape, onnx_name or self.op.lower(), onnx_name)

    def ref(self, v: Val, rank: int | None = None) -> str:
        return self.em.ref(v, rank)

    def axis(self, axis: int, rank: int) -> int:
        if not -rank <= axis < max(rank, 1):
            raise self.fail(f"axis {axis} is out of range for rank {rank}")
        return axis % max(rank, 1)


_NUMPY_DTYPES = {np.dtype(np.float32): DType.F32, np.dtype(np.float64): DType.F64,
                 np.dtype(np.float16): DType.F16, np.dtype(np.int8): DType.I8,
                 np.dtype(np.int32): DType.I32, np.dtype(np.int64): DType.I64,
                 np.dtype(np.bool_): DType.BOOL}


def const_val(array: np.ndarray, dtype: DType | None = None, hint: str = "") -> Val:
    """A constant Val; uint8 data is held shifted into int8 (``offset`` 128)."""
    array = np.asarray(array)
    if array.dtype == np.uint8 and dtype is None:
        shifted = (array.astype(np.int16) - U8_OFFSET).astype(np.int8)
        return Val(DType.I8, shape_of(array.shape), const=shifted, offset=U8_OFFSET, hint=hint)
    if dtype is None:
        from .storage import held_const

        held = held_const(array, hint)
        if held is not None:
            return held
        if array.dtype not in _NUMPY_DTYPES:
            raise OnnxImportError(f"constants of element type {array.dtype} are not supported")
        dtype = _NUMPY_DTYPES[array.dtype]
    return Val(dtype, shape_of(array.shape), const=np.asarray(array, dtype.numpy), hint=hint)


def checked(node: Node, fn: Any) -> Any:
    """Run ``fn()``; a shape the monomials cannot express names the node."""
    try:
        return fn()
    except DimError as err:
        raise node.fail(str(err)) from None


__all__ = ["Dim", "Emitter", "Names", "Node", "OnnxImportError", "Val", "literal"]
