"""The imported source (``wiac model.onnx --emit wia``), its names, dims and weights, and
the compiled-model dump (``--emit opt-ir`` with fixed dims: static shapes, fused
ops with their ``kernel`` names)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.onnx.helpers import assert_close, ort_run, require_onnx

require_onnx()

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import wiadsl  # noqa: E402
from tests.onnx import models  # noqa: E402
from wiadsl.frontend.compile import compile_to_ir  # noqa: E402
from wiadsl.ir import print_module  # noqa: E402
from wiadsl.onnx.importer import import_onnx, load_onnx, onnx_to_source  # noqa: E402
from wiadsl.passes import optimize  # noqa: E402


def test_mlp_source_reads_like_the_graph() -> None:
    src = onnx_to_source(models.mlp().model)
    assert "kernel mlp(" in src
    assert "input x: f32[batch, 64]" in src
    assert "input fc1_weight: f32[64, 128]" in src  # Gemm transB folded at import
    assert "relu(" in src and "@" in src
    assert "output logits: f32[batch, 10]" in src
    # Gemm's alpha folded into the constant weight, beta into the bias
    assert "logits = relu_5 @ fc3_weight + fc3_bias;" in src


def test_dims_fix_symbolic_extents() -> None:
    src = onnx_to_source(models.encoder().model, {"batch": 1})
    assert "input x: f32[1, 8, 32]" in src and "reshape(" in src and "batch" not in src


def test_unnamed_dynamic_dims_get_names() -> None:
    x = helper.make_tensor_value_info("input.1", TensorProto.FLOAT, [None, 3])
    graph = helper.make_graph([helper.make_node("Relu", ["input.1"], ["out:0"])], "g", [x],
                              [helper.make_tensor_value_info("out:0", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    imported = import_onnx(model)
    assert "input input_1: f32[input_1_0, 3]" in imported.source
    assert imported.inputs == (("input.1", "input_1"),)
    assert imported.outputs == (("out:0", "out_0"),)
    mod = load_onnx(model)
    x = np.arange(-3, 3, dtype=np.float32).reshape(2, 3)
    # by position, by DSL name, by ONNX name
    for got in (mod(x), mod(input_1=x), mod(**{"input.1": x})):
        assert_close(got, np.maximum(x, 0))


def test_small_initializers_are_literals_large_ones_weights(tmp_path: Path) -> None:
    imported = import_onnx(models.qdq_matmul().model)
    assert "bias = cast([" in imported.source  # 16 elements: inline
    assert set(imported.weights) == {"w_q"}  # the int8 weight: a kernel input
    assert imported.weights["w_q"].dtype == np.int8
    imported.save_weights(tmp_path / "w.npz")
    assert np.array_equal(np.load(tmp_path / "w.npz")["w_q"], imported.weights["w_q"])
    everything = import_onnx(models.qdq_matmul().model, inline_limit=0)
    assert set(everything.weights) == {"w_q", "bias", "w_q_colsum"}


def test_source_compiles_with_plain_jit() -> None:
    """The emitted text is ordinary WIA DSL: wiadsl.jit runs it given the weights."""
    built = models.mlp()
    imported = import_onnx(built.model)
    feeds = built.make_inputs(3)
    kernel = getattr(wiadsl.jit(imported.source), imported.kernel)
    got = kernel(feeds["x"], **imported.weights)
    assert_close(got, ort_run(built.model, feeds)[0])


def test_paths_and_bytes_import_alike(tmp_path: Path) -> None:
    model = models.cnn().model
    path = tmp_path / "cnn.onnx"
    path.write_bytes(model.SerializeToString())
    assert onnx_to_source(path) == onnx_to_source(str(path)) == onnx_to_source(
        model.SerializeToString()) == onnx_to_source(model)


def test_compiled_model_dump() -> None:
    """What ``wiac encoder.onnx --emit opt-ir -D batch=1`` shows: static inputs, fused
    ops each with its kernel name, a planned buffer per value."""
    module = compile_to_ir(onnx_to_source(models.encoder().model, {"batch": 1}))
    optimize(module, 3)
    text = print_module(module)
    assert "func @encoder_block(%x: tensor<1x8x32xf32>" in text
    assert "?" not in text.split("\n")[0]
    kernels = {line.split('kernel = "')[1].split('"')[0]
               for line in text.splitlines() if 'kernel = "' in line}
    assert any(k.startswith("matmul_bias") for k in kernels), kernels
    assert any("reduce" in k for k in kernels), kernels  # softmax / layer norm rows
    assert "buffer = " in text


def test_module_describes_itself() -> None:
    mod = load_onnx(models.mlp().model)
    assert mod.input_names == ["x"] and mod.output_names == ["logits"]
    assert "weights=5" in repr(mod)
    assert mod.kernels["mlp"] is mod.kernel is mod.mlp


def test_multiple_outputs_and_passthrough() -> None:
    """Outputs come back in graph order; an output may be an input or a constant."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    c = numpy_helper.from_array(np.array([1.5], np.float32), "c")
    nodes = [helper.make_node("Neg", ["x"], ["n"]), helper.make_node("Identity", ["c"], ["k"])]
    outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in ("n", "x", "k")]
    graph = helper.make_graph(nodes, "g", [x], outs, [c])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    xs = np.array([1.0, -2.0], np.float32)
    got = load_onnx(model)(xs)
    for g, w in zip(got, ort_run(model, {"x": xs}), strict=True):
        assert_close(g, w)


@pytest.mark.parametrize("name", list(models.MODELS))
def test_every_model_source_has_no_unbound_dims(name: str) -> None:
    src = onnx_to_source(models.MODELS[name]().model)
    assert "tensor" not in src.split("{")[0], "every parameter has a declared shape"
