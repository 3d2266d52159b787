"""What the importer refuses, and how it says so: a WiaError naming the op, its node
and the opset (or the input, the attribute, the type) — never a silent skip."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.onnx.helpers import require_onnx

require_onnx()

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from wiadsl import WiaError  # noqa: E402
from wiadsl.onnx.graph import OnnxImportError  # noqa: E402
from wiadsl.onnx.importer import import_onnx, load_onnx  # noqa: E402


def _model(nodes: list, inputs: list, inits: tuple = (), opset: int = 17,
           out: str = "y") -> Any:
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info(out, 1, None)],
                              list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


X = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])
IMG = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])
W = numpy_helper.from_array(np.ones((4, 1, 3, 3), np.float32), "w")


@pytest.mark.parametrize(("nodes", "inputs", "inits", "message"), [
    ([helper.make_node("NonMaxSuppression", ["x"], ["y"], name="nms_7")], [X], (),
     "ONNX op NonMaxSuppression (node 'nms_7', opset 17): this op is not supported"),
    ([helper.make_node("Conv", ["x", "w"], ["y"], name="dw", group=3)], [IMG], (W,),
     "ONNX op Conv (node 'dw', opset 17): group=3 does not divide the weight [4, 1, ...] "
     "and the input's 4 channels"),
    ([helper.make_node("Conv", ["x", "w"], ["y"], name="c", dilations=[2, 2, 1])], [IMG],
     (numpy_helper.from_array(np.ones((2, 4, 3, 3), np.float32), "w"),),
     "ONNX op Conv (node 'c', opset 17): dilations=[2, 2, 1] must have 2 entries for a 2-D "
     "input"),
    ([helper.make_node("Conv", ["x", "w"], ["y"], name="big")], [IMG],
     (numpy_helper.from_array(np.ones((2, 4, 9, 9), np.float32), "w"),),
     "ONNX op Conv (node 'big', opset 17): the kernel [9, 9] does not fit the padded input "
     "[8, 8]"),
    ([helper.make_node("MaxPool", ["x"], ["y"], name="p", kernel_shape=[3, 3, 3])],
     [IMG], (), "ONNX op MaxPool (node 'p', opset 17): a 3-D kernel needs an input of rank 5 "
     "(N, C and 3 spatial axes), got rank 4"),
    ([helper.make_node("AveragePool", ["x"], ["y", "i"], name="pi", kernel_shape=[2, 2])],
     [IMG], (), "ONNX op AveragePool (node 'pi', opset 17): only MaxPool has an Indices output"),
    ([helper.make_node("Reshape", ["x", "x"], ["y"], name="r")], [X], (),
     "ONNX op Reshape (node 'r', opset 17): the shape (input 1) must be a constant initializer"),
    ([helper.make_node("Dropout", ["x", "r", "t"], ["y"], name="d")], [X],
     (numpy_helper.from_array(np.array(0.5, np.float32), "r"),
      numpy_helper.from_array(np.array(True), "t")),
     "ONNX op Dropout (node 'd', opset 17): training_mode (input 2) must be a constant initializer: "
     "false, or true with a constant ratio of 0"),
    ([helper.make_node("Gelu", ["x"], ["y"], name="g", approximate="fast")], [X], (),
     "ONNX op Gelu (node 'g', opset 20): approximate='fast' is not supported"),
    ([helper.make_node("Relu", ["x"], ["y"], domain="com.microsoft", name="ms")], [X], (),
     "ONNX op Relu (node 'ms', opset 17): domain 'com.microsoft' is not supported"),
    ([helper.make_node("Cast", ["x"], ["y"], name="c8", to=TensorProto.STRING)], [X], (),
     "ONNX op Cast (node 'c8', opset 17): casting to string is not supported"),
    ([helper.make_node("Relu", ["z"], ["y"], name="early")], [X], (),
     "input of node 'early' 'z' is used before it is defined"),
])
def test_refused_with_a_named_reason(nodes: list, inputs: list, inits: tuple,
                                     message: str) -> None:
    opset = 20 if nodes[0].op_type == "Gelu" else 17
    model = _model(nodes, inputs, inits, opset)
    with pytest.raises(OnnxImportError) as err:
        import_onnx(model)
    assert message in str(err.value)
    assert isinstance(err.value, WiaError)


def test_unnamed_node_is_described() -> None:
    model = _model([helper.make_node("Loop", ["x"], ["y"])], [X])
    with pytest.raises(OnnxImportError, match=r"ONNX op Loop \(an unnamed node, opset 17\)"):
        import_onnx(model)


def test_string_graph_input_is_refused() -> None:
    x = helper.make_tensor_value_info("x", TensorProto.STRING, [4])
    model = _model([helper.make_node("Identity", ["x"], ["y"])], [x])
    with pytest.raises(OnnxImportError, match="graph input 'x' has element type string"):
        import_onnx(model)


def test_uint64_division_is_refused_by_name() -> None:
    """uint64 is held as int64 bits: an op that would read them as signed says so."""
    u64 = [helper.make_tensor_value_info(n, TensorProto.UINT64, [4]) for n in "ab"]
    out = helper.make_tensor_value_info("y", TensorProto.UINT64, [4])
    graph = helper.make_graph([helper.make_node("Div", ["a", "b"], ["y"], name="d")], "g",
                              u64, [out])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(OnnxImportError, match=r"ONNX op Div \(node 'd', opset 17\): uint64 "
                                              r"is held as the int64 with the same bits"):
        import_onnx(model)


def test_an_output_of_another_type_than_declared_is_refused() -> None:
    """The importer's element type of a graph output must be the declared one."""
    cast = helper.make_node("Cast", ["x"], ["y"], to=TensorProto.UINT16)
    with pytest.raises(OnnxImportError, match="graph output 'y' is declared float, but its "
                                              "value here is uint16"):
        import_onnx(_model([cast], [X]))


def test_missing_file_is_a_wia_error(tmp_path: Any) -> None:
    with pytest.raises(OnnxImportError, match="cannot read ONNX model"):
        load_onnx(tmp_path / "nope.onnx")
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x00not a protobuf\xff" * 3)
    with pytest.raises(OnnxImportError, match="is not an ONNX model"):
        import_onnx(bad)


def test_bad_call_names_the_input() -> None:
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [X])
    mod = load_onnx(model)
    with pytest.raises(WiaError, match="x"):
        mod(np.zeros((2, 3), np.float32))


def test_unknown_dim_name_is_refused() -> None:
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [X])
    with pytest.raises(OnnxImportError, match=r"dims \['btch'\] are not dims of the model's "
                                              r"inputs \(its dims: batch\)"):
        import_onnx(model, {"btch": 1})


def test_gather_nd_index_out_of_range_stops_the_call() -> None:
    """A run-time GatherND index past its axis is the DSL's index error (with the line
    that reads it), never a row of another axis; negative ones count from the end."""
    node = helper.make_node("GatherND", ["x", "i"], ["y"])
    model = _model([node], [helper.make_tensor_value_info("x", 1, [3, 4]),
                            helper.make_tensor_value_info("i", TensorProto.INT64, [2, 2])])
    mod = load_onnx(model)
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(mod(x, np.array([[0, 1], [-1, -4]])), [1.0, 8.0])
    with pytest.raises(WiaError, match="index is out of range for axis 1"):
        mod(x, np.array([[0, 1], [2, 4]]))
    with pytest.raises(WiaError, match="index is out of range for axis 0"):
        mod(x, np.array([[3, 0], [0, 0]]))


def test_gather_nd_with_batch_dims_past_the_indices_is_refused() -> None:
    node = helper.make_node("GatherND", ["x", "i"], ["y"], batch_dims=2)
    model = _model([node], [helper.make_tensor_value_info("x", 1, [3, 4]),
                            helper.make_tensor_value_info("i", TensorProto.INT64, [3, 1])])
    with pytest.raises(OnnxImportError, match=r"GatherND .*batch_dims \(2\)"):
        import_onnx(model)
