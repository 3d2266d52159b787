"""The protobuf reader of ONNX models (wiadsl/onnx/proto.py), against the onnx package:
its field numbers are onnx's, its tensors are ``numpy_helper.to_array``'s for every
element type in raw and typed encodings, packed and not, attributes are
``helper.get_attribute_value``'s, and malformed bytes are an OnnxImportError at
every truncation of a real model, never another exception."""

from __future__ import annotations

import numpy as np
import pytest

from tests.onnx.helpers import require_onnx

require_onnx()

import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from tests.onnx import models  # noqa: E402
from wiadsl.onnx import proto as pb  # noqa: E402
from wiadsl.onnx.graph import OnnxImportError  # noqa: E402
from wiadsl.onnx.importer import import_onnx, load_model  # noqa: E402

MESSAGES = [(pb.Model, onnx.ModelProto), (pb.Graph, onnx.GraphProto), (pb.Node, onnx.NodeProto),
            (pb.Attribute, onnx.AttributeProto), (pb.Tensor, onnx.TensorProto),
            (pb.ValueInfo, onnx.ValueInfoProto), (pb.TypeProto, onnx.TypeProto),
            (pb.TensorType, onnx.TypeProto.Tensor), (pb.TensorShape, onnx.TensorShapeProto),
            (pb.Dimension, onnx.TensorShapeProto.Dimension), (pb.OperatorSetId, onnx.OperatorSetIdProto),
            (pb.StringStringEntry, onnx.StringStringEntryProto)]


@pytest.mark.parametrize("ours,theirs", MESSAGES, ids=[t.__name__ for _, t in MESSAGES])
def test_field_numbers_are_onnx_ones(ours, theirs):
    by_name = {f.name: f.number for f in theirs.DESCRIPTOR.fields}
    for number, (name, _) in ours.FIELDS.items():
        assert by_name[name] == number, (theirs.__name__, name)


RNG = np.random.default_rng(3)
ARRAYS = {
    TensorProto.FLOAT: RNG.standard_normal((3, 4)).astype(np.float32),
    TensorProto.DOUBLE: RNG.standard_normal(5),
    TensorProto.FLOAT16: RNG.standard_normal((2, 3)).astype(np.float16),
    TensorProto.INT8: np.array([-128, -1, 0, 127], np.int8),
    TensorProto.UINT8: np.array([0, 1, 255], np.uint8),
    TensorProto.INT16: np.array([-32768, 5, 32767], np.int16),
    TensorProto.UINT16: np.array([0, 65535], np.uint16),
    TensorProto.INT32: np.array([-(2 ** 31), -1, 2 ** 31 - 1], np.int32),
    TensorProto.UINT32: np.array([0, 2 ** 32 - 1], np.uint32),
    TensorProto.INT64: np.array([-(2 ** 63), -1, 0, 2 ** 63 - 1], np.int64),
    TensorProto.UINT64: np.array([0, 2 ** 64 - 1], np.uint64),
    TensorProto.BOOL: np.array([[True, False], [False, True]]),
}


@pytest.mark.parametrize("raw", [True, False])
@pytest.mark.parametrize("data_type", sorted(ARRAYS))
def test_tensors_read_like_numpy_helper(data_type, raw):
    want = ARRAYS[data_type]
    t = helper.make_tensor("t", data_type, want.shape,
                           want.tobytes() if raw else want.ravel().tolist(), raw=raw)
    got = pb.to_array(pb.Tensor.parse(t.SerializeToString()))
    expected = numpy_helper.to_array(t)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("raw", [True, False])
def test_bfloat16_reads_like_numpy_helper(raw):
    """bfloat16: ml_dtypes' arrays, as onnx gives (its 16 bits in int32_data, or raw)."""
    import ml_dtypes
    values = np.array([1.0, -2.5, 3.0e38, 0.0], ml_dtypes.bfloat16)
    t = (numpy_helper.from_array(values) if raw else
         helper.make_tensor("t", TensorProto.BFLOAT16, [4], values.astype(np.float32).tolist()))
    got, want = pb.to_array(pb.Tensor.parse(t.SerializeToString())), numpy_helper.to_array(t)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


def test_strings_empty_tensors_and_scalars():
    strings = helper.make_tensor("s", TensorProto.STRING, [2], [b"ab", b""])
    assert pb.to_array(pb.Tensor.parse(strings.SerializeToString())).tolist() == [b"ab", b""]
    empty = numpy_helper.from_array(np.zeros((0, 3), np.float32))
    assert pb.to_array(pb.Tensor.parse(empty.SerializeToString())).shape == (0, 3)
    scalar = numpy_helper.from_array(np.array(2.5, np.float32))
    assert pb.to_array(pb.Tensor.parse(scalar.SerializeToString())).shape == ()


def test_unpacked_repeated_numbers_are_read():
    """Old writers put one key per element (the encoding lets readers take both)."""
    dims = b"".join(bytes([1 << 3 | pb.VARINT, d]) for d in (2, 3))
    floats = b"".join(bytes([4 << 3 | pb.FIXED32]) + np.float32(v).tobytes() for v in range(6))
    t = pb.Tensor.parse(dims + bytes([2 << 3 | pb.VARINT, TensorProto.FLOAT]) + floats)
    np.testing.assert_array_equal(pb.to_array(t), np.arange(6, dtype=np.float32).reshape(2, 3))


@pytest.mark.parametrize("value", [1.5, -3, b"text", [1.0, -2.5], [-1, 0, 2 ** 40], [b"a", b"bc"]])
def test_attributes_read_like_helper(value):
    a = helper.make_attribute("x", value)
    got = pb.attribute_value(pb.Attribute.parse(a.SerializeToString()))
    want = helper.get_attribute_value(a)
    assert (list(got) if isinstance(got, list) else got) == (list(want) if isinstance(want, list) else want)


def test_a_tensor_attribute_and_a_subgraph():
    t = numpy_helper.from_array(np.arange(4, dtype=np.int64))
    got = pb.Attribute.parse(helper.make_attribute("value", t).SerializeToString())
    np.testing.assert_array_equal(pb.to_array(pb.attribute_value(got)), np.arange(4))
    g = helper.make_graph([helper.make_node("Relu", ["a"], ["b"])], "body", [], [])
    sub = pb.Attribute.parse(helper.make_attribute("then_branch", g).SerializeToString())
    assert [n.op_type for n in pb.attribute_value(sub).node] == ["Relu"]


def test_a_model_reads_like_onnx():
    built = models.cnn(3, 12, 5)
    ours, external = load_model(built.model.SerializeToString())
    theirs = built.model
    assert not external
    assert [(n.op_type, list(n.input), list(n.output)) for n in ours.graph.node] == \
        [(n.op_type, list(n.input), list(n.output)) for n in theirs.graph.node]
    for a, b in zip(ours.graph.initializer, theirs.graph.initializer, strict=True):
        np.testing.assert_array_equal(pb.to_array(a), numpy_helper.to_array(b))
    assert [o.version for o in ours.opset_import] == [o.version for o in theirs.opset_import]
    dims = [(d.dim_value, d.dim_param) for d in ours.graph.input[0].type.tensor_type.shape.dim]
    assert dims == [(None if not d.HasField("dim_value") else d.dim_value, d.dim_param)
                    for d in theirs.graph.input[0].type.tensor_type.shape.dim]


def test_every_truncation_is_an_import_error():
    """A model cut at any byte: a clear error (or, where the cut falls between fields
    of the outer message, a smaller model), never a crash or another exception."""
    data = helper.make_model(helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])],
        [numpy_helper.from_array(np.ones(3, np.float32), "w")])).SerializeToString()
    for cut in range(len(data)):
        try:
            import_onnx(data[:cut])
        except OnnxImportError:
            pass


@pytest.mark.parametrize("junk", [b"", b"\xff" * 20, b"\x08", b"\x0a\x80", b"\x3a\x05abc",
                                  b"\x07", b"\x0b\x00", b"ir_version: 8"])
def test_junk_is_an_import_error(junk):
    with pytest.raises(OnnxImportError, match="is not an ONNX model"):
        import_onnx(junk)


def test_external_data_outside_the_model_folder_is_refused(tmp_path):
    w = numpy_helper.from_array(np.ones(3, np.float32), "w")
    w.data_location = TensorProto.EXTERNAL
    w.ClearField("raw_data")
    entry = w.external_data.add()
    entry.key, entry.value = "location", "../secret.bin"
    model = helper.make_model(helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])], [w]))
    (tmp_path / "m").mkdir()
    path = tmp_path / "m" / "model.onnx"
    path.write_bytes(model.SerializeToString())
    (tmp_path / "secret.bin").write_bytes(np.ones(3, np.float32).tobytes())
    with pytest.raises(OnnxImportError, match="is not a file beside the model"):
        import_onnx(path)
