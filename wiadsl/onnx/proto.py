"""ONNX models read from their protobuf encoding, without the ``onnx`` package.

Why: ``import onnx`` takes ~0.7 s (0.57 s of it the ``ml_dtypes`` extension it
loads), more than the rest of a cold import of a small model (issue 21: a model's
first result against ONNX Runtime's session + run). The importer reads a handful
of messages, and protobuf's wire format is small and stable
(https://protobuf.dev/programming-guides/encoding/): a message is a sequence of
``key, value`` with ``key = field << 3 | wire type``, the wire types 0 (varint),
1 (8 bytes), 2 (length-delimited: bytes, strings, messages, packed repeated
numbers) and 5 (4 bytes).

This module decodes ``ModelProto`` and what it holds (onnx/onnx.proto3) into plain
objects named as onnx names the fields. Fields it does not list are skipped, as
any protobuf reader skips unknown fields. An absent message field is None; an
absent ``Dimension.dim_value`` is None too (it is one of a ``oneof``, which the
importer tests). Repeated numbers are accepted packed and unpacked, as the
encoding requires of readers. Anything malformed raises ``ProtoError`` with the
byte offset where it was found.

Tensors: ``to_array`` makes the NumPy array of a ``TensorProto`` (raw little-endian
bytes, or the typed fields: float16 and bfloat16 bits in ``int32_data``...);
``load_external`` reads the bytes of tensors stored beside the model file.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np

#: wire types
VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5
#: ``TensorProto.data_location``: the tensor's bytes are in another file
EXTERNAL = 1


class ProtoError(ValueError):
    """Bytes that are not a well-formed encoding of the message read."""


# ---------------------------------------------------------------- wire format

def _varint(buf: memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    end = len(buf)
    while True:
        if pos >= end:
            raise ProtoError(f"a number runs past the end of the data (byte {pos})")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise ProtoError(f"a number longer than 10 bytes (byte {pos})")


def fields(buf: memoryview) -> Iterator[tuple[int, int, Any]]:
    """(field number, wire type, value) of every field of the message in ``buf``: an
    int for wire types 0, 1 and 5 (unsigned), a memoryview for type 2."""
    pos, end = 0, len(buf)
    while pos < end:
        at = pos
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ProtoError(f"field number 0 (byte {at})")
        value: int | memoryview
        if wire == VARINT:
            value, pos = _varint(buf, pos)
        elif wire in (FIXED64, FIXED32):
            size = 8 if wire == FIXED64 else 4
            if pos + size > end:
                raise ProtoError(f"a {size}-byte field runs past the end of the data (byte {at})")
            value = int.from_bytes(buf[pos:pos + size], "little")
            pos += size
        elif wire == LENGTH:
            size, pos = _varint(buf, pos)
            if pos + size > end:
                raise ProtoError(f"a field of {size} bytes runs past the end of the data (byte {at})")
            value = buf[pos:pos + size]
            pos += size
        else:
            raise ProtoError(f"wire type {wire} (byte {at}) is not one of protobuf's")
        yield number, wire, value


def packed_varints(buf: memoryview) -> np.ndarray:
    """The varints packed in ``buf`` as uint64 (two's complement for negative int64 and
    int32), decoded with NumPy: an int32_data of a million float16 weights is one
    field."""
    data = np.frombuffer(buf, np.uint8)
    if not len(data):
        return np.zeros(0, np.uint64)
    last = np.flatnonzero(data < 0x80)
    if not len(last) or last[-1] != len(data) - 1:
        raise ProtoError("packed numbers: the last one runs past the end of its field")
    first = np.concatenate(([0], last[:-1] + 1))
    lengths = last - first + 1
    if lengths.max() > 10:
        raise ProtoError("packed numbers: a number longer than 10 bytes")
    position = np.arange(len(data)) - np.repeat(first, lengths)
    chunks = (data & 0x7F).astype(np.uint64) << (7 * position).astype(np.uint64)
    return np.bitwise_or.reduceat(chunks, first)


# ---------------------------------------------------------------- field kinds

def _signed64(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _utf8(v: memoryview) -> str:
    try:
        return bytes(v).decode()
    except UnicodeDecodeError:
        raise ProtoError("a string that is not UTF-8") from None


def _f32(v: int) -> float:
    return float(np.frombuffer(v.to_bytes(4, "little"), "<f4")[0])


#: scalar field kinds: (their wire type, what they are called, the raw value converted)
SCALARS: dict[type, tuple[int, str, Any]] = {
    int: (VARINT, "an integer", _signed64), str: (LENGTH, "a string", _utf8),
    bytes: (LENGTH, "a bytes", bytes), float: (FIXED32, "a float", _f32),
    # a tensor's raw data: a view of the model's bytes (``to_array`` copies it once)
    memoryview: (LENGTH, "a bytes", lambda v: v)}


#: a repeated number field: (the NumPy dtype of its packed form, its wire type one
#: by one); varint kinds store uint64 bit patterns, converted by ``_numbers``
NUMBERS = {"float": ("<f4", FIXED32), "double": ("<f8", FIXED64), "int64": ("varint", VARINT),
           "uint64": ("varint", VARINT), "int32": ("varint", VARINT)}


def _numbers(kind: str, wire: int, v: Any) -> np.ndarray:
    """One field of a repeated number ``kind``: packed (wire type 2) or a single one."""
    packed, single = NUMBERS[kind]
    if wire == LENGTH:
        if packed == "varint":
            raw = packed_varints(v)
        elif len(v) % np.dtype(packed).itemsize:
            raise ProtoError(f"packed {kind}s: {len(v)} bytes is not a whole number of them")
        else:
            return np.frombuffer(v, packed).copy()
    elif wire == single:
        if packed != "varint":
            return np.frombuffer(v.to_bytes(np.dtype(packed).itemsize, "little"), packed).copy()
        raw = np.array([v], np.uint64)
    else:
        raise ProtoError(f"repeated {kind}s of wire type {wire}")
    return raw if kind == "uint64" else raw.view(np.int64)


class Message:
    """A decoded message: one attribute per field of ``FIELDS`` (field number ->
    (name, kind)), where a kind is ``int``, ``str``, ``bytes``, ``float``, a repeated
    number kind of ``NUMBERS`` (an array), a Message class, or ``[kind]`` (repeated
    strings, bytes or messages: a list). Absent: 0, "", b"", 0.0, an empty array or
    list; None for a message and for the names in ``OPTIONAL``."""

    FIELDS: ClassVar[dict[int, tuple[str, Any]]] = {}
    OPTIONAL: ClassVar[frozenset[str]] = frozenset()

    def __init__(self) -> None:
        for name, kind in self.FIELDS.values():
            setattr(self, name, _default(kind) if name not in self.OPTIONAL else None)

    @classmethod
    def parse(cls, buf: memoryview | bytes) -> Any:
        msg = cls()
        numbers: dict[str, list[np.ndarray]] = {}
        for number, wire, value in fields(memoryview(buf)):
            spec = cls.FIELDS.get(number)
            if spec is None:
                continue  # a field this reader does not need
            name, kind = spec
            if isinstance(kind, list):
                getattr(msg, name).append(_one(kind[0], wire, value))
            elif isinstance(kind, str) and kind in NUMBERS:
                numbers.setdefault(name, []).append(_numbers(kind, wire, value))
            else:
                setattr(msg, name, _one(kind, wire, value))
        for name, parts in numbers.items():
            setattr(msg, name, parts[0] if len(parts) == 1 else np.concatenate(parts))
        return msg


def _default(kind: Any) -> Any:
    if isinstance(kind, list):
        return []
    if isinstance(kind, str) and kind in NUMBERS:
        return np.zeros(0, np.int64 if NUMBERS[kind][0] == "varint" else NUMBERS[kind][0])
    return {int: 0, str: "", bytes: b"", float: 0.0}.get(kind)


def _one(kind: Any, wire: int, value: Any) -> Any:
    """One value of a scalar or message field."""
    expected, what, convert = SCALARS.get(kind) or (LENGTH, f"a {kind.__name__}", kind.parse)
    if wire != expected:
        raise ProtoError(f"{what} field of wire type {wire}")
    return convert(value)


# ---------------------------------------------------------------- messages (onnx.proto3)

class StringStringEntry(Message):
    key: str
    value: str
    FIELDS = {1: ("key", str), 2: ("value", str)}


class Dimension(Message):
    dim_value: int | None
    dim_param: str
    FIELDS = {1: ("dim_value", int), 2: ("dim_param", str)}
    OPTIONAL = frozenset({"dim_value"})


class TensorShape(Message):
    dim: list[Dimension]
    FIELDS = {1: ("dim", [Dimension])}


class TensorType(Message):
    elem_type: int
    shape: TensorShape | None
    FIELDS = {1: ("elem_type", int), 2: ("shape", TensorShape)}


class TypeProto(Message):
    tensor_type: TensorType | None
    FIELDS = {1: ("tensor_type", TensorType)}


class ValueInfo(Message):
    name: str
    type: TypeProto | None
    FIELDS = {1: ("name", str), 2: ("type", TypeProto)}


class Tensor(Message):
    dims: np.ndarray
    data_type: int
    float_data: np.ndarray
    int32_data: np.ndarray
    string_data: list[bytes]
    int64_data: np.ndarray
    name: str
    raw_data: memoryview | bytes | None
    double_data: np.ndarray
    uint64_data: np.ndarray
    external_data: list[StringStringEntry]
    data_location: int
    FIELDS = {1: ("dims", "int64"), 2: ("data_type", int), 4: ("float_data", "float"),
              5: ("int32_data", "int32"), 6: ("string_data", [bytes]), 7: ("int64_data", "int64"),
              8: ("name", str), 9: ("raw_data", memoryview), 10: ("double_data", "double"),
              11: ("uint64_data", "uint64"), 13: ("external_data", [StringStringEntry]),
              14: ("data_location", int)}
    OPTIONAL = frozenset({"raw_data"})


class Attribute(Message):
    name: str
    f: float
    i: int
    s: bytes
    t: Tensor | None
    g: Graph | None
    floats: np.ndarray
    ints: np.ndarray
    strings: list[bytes]
    tensors: list[Tensor]
    graphs: list[Graph]
    type: int
    # (filled in below: the Graph class is defined after this one)
    FIELDS: ClassVar[dict[int, tuple[str, Any]]] = {}


class Node(Message):
    input: list[str]
    output: list[str]
    name: str
    op_type: str
    attribute: list[Attribute]
    domain: str
    FIELDS = {1: ("input", [str]), 2: ("output", [str]), 3: ("name", str), 4: ("op_type", str),
              5: ("attribute", [Attribute]), 7: ("domain", str)}


class Graph(Message):
    node: list[Node]
    name: str
    initializer: list[Tensor]
    input: list[ValueInfo]
    output: list[ValueInfo]
    value_info: list[ValueInfo]
    FIELDS = {1: ("node", [Node]), 2: ("name", str), 5: ("initializer", [Tensor]),
              11: ("input", [ValueInfo]), 12: ("output", [ValueInfo]), 13: ("value_info", [ValueInfo])}


Attribute.FIELDS = {1: ("name", str), 2: ("f", float), 3: ("i", int), 4: ("s", bytes), 5: ("t", Tensor),
                    6: ("g", Graph), 7: ("floats", "float"), 8: ("ints", "int64"), 9: ("strings", [bytes]),
                    10: ("tensors", [Tensor]), 11: ("graphs", [Graph]), 20: ("type", int)}


class OperatorSetId(Message):
    domain: str
    version: int
    FIELDS = {1: ("domain", str), 2: ("version", int)}


class Model(Message):
    ir_version: int
    producer_name: str
    graph: Graph | None
    opset_import: list[OperatorSetId]
    FIELDS = {1: ("ir_version", int), 2: ("producer_name", str), 7: ("graph", Graph),
              8: ("opset_import", [OperatorSetId])}


def parse_model(data: bytes | memoryview) -> Model:
    """The model encoded in ``data``; ProtoError if it is not one."""
    model = Model.parse(data)
    if model.graph is None:
        raise ProtoError("no graph (field 7 of ModelProto)")
    return model


# ---------------------------------------------------------------- attribute values, tensors

#: AttributeProto.AttributeType -> the field holding the value
ATTRIBUTE_FIELDS = {1: "f", 2: "i", 3: "s", 4: "t", 5: "g", 6: "floats", 7: "ints", 8: "strings",
                    9: "tensors", 10: "graphs"}
ATTRIBUTE_TYPES = {11: "SPARSE_TENSOR", 12: "SPARSE_TENSORS", 13: "TYPE_PROTO", 14: "TYPE_PROTOS", 0: "UNDEFINED"}


def attribute_value(a: Attribute) -> Any:
    """The value of an attribute by its declared type (``onnx.helper.get_attribute_value``)."""
    field = ATTRIBUTE_FIELDS.get(a.type)
    if field is None:
        raise ProtoError(f"attribute '{a.name}' has type {ATTRIBUTE_TYPES.get(a.type, a.type)}, "
                         "which the importer does not read")
    value = getattr(a, field)
    if field in ("floats", "ints"):  # Python numbers, as onnx gives them
        return [float(v) for v in value] if field == "floats" else [int(v) for v in value]
    return value


#: TensorProto.DataType -> NumPy dtype (16, bfloat16: ml_dtypes', loaded when met)
TENSOR_DTYPES = {1: "<f4", 2: "u1", 3: "i1", 4: "<u2", 5: "<i2", 6: "<i4", 7: "<i8", 9: "?",
                 10: "<f2", 11: "<f8", 12: "<u4", 13: "<u8"}
#: the typed field holding each element type's values when there is no raw_data
TYPED_FIELD = {1: "float_data", 11: "double_data", 7: "int64_data", 12: "uint64_data",
               13: "uint64_data", 8: "string_data"}
STRING, BFLOAT16 = 8, 16


def _numpy_dtype(t: Tensor) -> np.dtype:
    if t.data_type == BFLOAT16:
        import ml_dtypes  # what onnx's to_array gives for bfloat16 (imported by onnx itself)

        return np.dtype(ml_dtypes.bfloat16)
    if t.data_type not in TENSOR_DTYPES:
        raise ProtoError(f"tensor '{t.name}' has element type {t.data_type}, which the importer "
                         "does not read")
    return np.dtype(TENSOR_DTYPES[t.data_type])


def to_array(t: Tensor) -> np.ndarray:
    """The NumPy array of ``t`` (``onnx.numpy_helper.to_array``), a copy of its bytes."""
    shape = tuple(int(d) for d in t.dims)
    if any(d < 0 for d in shape):
        raise ProtoError(f"tensor '{t.name}' has a negative dim: {list(shape)}")
    count = int(np.prod(shape, dtype=np.int64))
    if t.data_location == EXTERNAL and t.raw_data is None:
        raise ProtoError(f"tensor '{t.name}' is stored in another file that was not read")
    if t.data_type == STRING:
        if len(t.string_data) != count:
            raise ProtoError(f"tensor '{t.name}': {len(t.string_data)} strings for shape {list(shape)}")
        return np.array(t.string_data, dtype=object).reshape(shape)
    dtype = _numpy_dtype(t)
    if t.raw_data is not None:
        if len(t.raw_data) != count * dtype.itemsize:
            raise ProtoError(f"tensor '{t.name}': {len(t.raw_data)} bytes of data for shape "
                             f"{list(shape)} of {dtype.itemsize}-byte elements")
        return np.frombuffer(t.raw_data, dtype).reshape(shape).copy()
    values = getattr(t, TYPED_FIELD.get(t.data_type, "int32_data"))
    if len(values) != count:
        raise ProtoError(f"tensor '{t.name}': {len(values)} values for shape {list(shape)}")
    if t.data_type in (10, BFLOAT16):  # the 16 bits of each value, in int32_data
        return values.astype(np.uint16).view(dtype).reshape(shape)
    return values.astype(dtype).reshape(shape)


def tensors(model: Model) -> Iterator[Tensor]:
    """The initializers and the tensors of Constant nodes' attributes (of the main graph)."""
    assert model.graph is not None
    yield from model.graph.initializer
    for node in model.graph.node:
        for a in node.attribute:
            if a.t is not None:
                yield a.t


def load_external(model: Model, folder: str) -> None:
    """Read into ``raw_data`` the bytes of every tensor stored in a file beside the
    model (``external_data``: location, offset, length), a path inside ``folder``."""
    root = os.path.realpath(folder)
    for t in tensors(model):
        if t.data_location != EXTERNAL:
            continue
        info = {e.key: e.value for e in t.external_data}
        location = info.get("location", "")
        path = os.path.realpath(os.path.join(root, location))
        if not location or os.path.isabs(location) or os.path.commonpath([root, path]) != root:
            raise ProtoError(f"tensor '{t.name}': external data location {location!r} is not a "
                             "file beside the model")
        offset, length = int(info.get("offset", 0)), info.get("length")
        with open(path, "rb") as f:
            f.seek(offset)
            t.raw_data = f.read() if length is None else f.read(int(length))
        if length is not None and len(t.raw_data) != int(length):
            raise ProtoError(f"tensor '{t.name}': {location} holds {len(t.raw_data)} of its "
                             f"{length} bytes from offset {offset}")


__all__ = ["Attribute", "Graph", "Model", "Node", "ProtoError", "Tensor", "ValueInfo",
           "attribute_value", "load_external", "parse_model", "tensors", "to_array"]
