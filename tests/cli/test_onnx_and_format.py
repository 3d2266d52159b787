"""`wiac model.onnx ...` (the first seed's graph-capture path) and `--emit wia`."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the onnx extra is not installed")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


@pytest.fixture
def model(tmp_path):
    """x[batch, 4] @ W[4, 64] -> relu: W is large enough to become a weight input."""
    w = np.arange(256, dtype=np.float32).reshape(4, 64) / 256
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
        "net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 64])],
        [numpy_helper.from_array(w, "W")])
    path = tmp_path / "net.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path, w


def test_emit_wia_shows_the_imported_model_as_source(wiac, model):
    path, _ = model
    proc = wiac(str(path), "--emit", "wia")
    assert proc.returncode == 0, proc.err
    assert "kernel net(input x: f32[batch, 4]" in proc.out
    assert "relu(" in proc.out


def test_defines_fix_dims_at_import(wiac, model):
    path, _ = model
    proc = wiac(str(path), "--emit", "opt-ir", "-D", "batch=1")
    assert proc.returncode == 0, proc.err
    assert "tensor<1x4xf32>" in proc.out and "fused" in proc.out


def test_run_binds_the_weights(wiac, model, tmp_path):
    path, w = model
    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "y.npz"
    proc = wiac(str(path), "--run", "--input", f"x={tmp_path / 'x.npy'}", "-o", str(out))
    assert proc.returncode == 0, proc.err
    np.testing.assert_allclose(np.load(out)["y"], np.maximum(x @ w, 0), rtol=1e-5, atol=1e-6)


def test_ptx_output_keeps_the_weights_beside_it(wiac, model, tmp_path):
    path, w = model
    out = tmp_path / "net.ptx"
    proc = wiac(str(path), "-D", "batch=2", "-o", str(out))
    assert proc.returncode == 0, proc.err
    assert out.read_text().startswith("//") or ".entry" in out.read_text()
    weights = np.load(str(out) + ".weights.npz")
    np.testing.assert_array_equal(weights[list(weights.keys())[0]], w)


def test_emit_wia_formats_source_canonically(wiac, tmp_path):
    src = tmp_path / "messy.wia"
    src.write_text("kernel   k(input x:f32[N],output y:f32[N]){y=x*(2.0)+1.0;}")
    proc = wiac(str(src), "--emit", "wia")
    assert proc.returncode == 0, proc.err
    assert proc.out == ("kernel k(input x: f32[N], output y: f32[N]) {\n"
                        "    y = x * 2.0 + 1.0;\n}\n")
