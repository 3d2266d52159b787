"""The four models of issue 12, imported and run on every target, against ONNX Runtime.

Each model is built with ``onnx.helper`` (tests/onnx/models.py), imported once
per module, and compared on the same inputs: the interpreter and the CPU backend
on every model, the systolic simulator and the PTX simulator too, and the PTX
assembled by ptxas where it is installed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests.onnx.helpers import assert_close, ort_run, require_onnx

require_onnx()

from tests.onnx import models  # noqa: E402
from wiadsl.backends.ptx.emit import emit_ptx  # noqa: E402
from wiadsl.frontend.compile import compile_to_ir  # noqa: E402
from wiadsl.onnx.importer import import_onnx, load_onnx  # noqa: E402
from wiadsl.runtime.backend import TARGETS  # noqa: E402

# The registry file is owned elsewhere; the simulator target is reached through it.
TARGETS.setdefault("ptxsim", "wiadsl.backends.ptx.simbackend:BACKEND")

NAMES = list(models.MODELS)
BATCH = 2
#: Float tolerance per model; the QDQ model's outputs are multiples of its output
#: scale, so a float difference could only show as one whole step (it must not).
TOL = {"mlp": 1e-5, "cnn": 1e-5, "mobilenet_v2": 1e-5, "encoder": 2e-5, "qdq_matmul": 1e-6}


class Case:
    def __init__(self, name: str):
        built = models.MODELS[name]()
        self.name, self.model = name, built.model
        self.feeds = built.make_inputs(BATCH)
        self.want = ort_run(built.model, self.feeds)[0]
        self.imported = import_onnx(built.model)
        self.modules: dict[str, object] = {}

    def module(self, target: str):  # compiled once per target for the module's tests
        if target not in self.modules:
            self.modules[target] = load_onnx(self.model, target=target)
        return self.modules[target]

    def check(self, got: object) -> None:
        assert_close(got, self.want, rtol=TOL[self.name], atol=TOL[self.name])


@pytest.fixture(scope="module", params=NAMES)
def case(request: pytest.FixtureRequest) -> Case:
    return Case(request.param)


@pytest.mark.parametrize("target", ["interp", "cpu", "systolic", "ptxsim"])
def test_matches_onnxruntime(case: Case, target: str) -> None:
    case.check(case.module(target)(**case.feeds))


def test_ptx_assembles(case: Case, tmp_path: Path) -> None:
    ptxas = shutil.which("ptxas")
    if ptxas is None:
        pytest.skip("ptxas not found: the PTX is emitted but not assembled here")
    imp = case.imported
    (x_onnx, x_dsl), = imp.inputs
    shapes = {x_dsl: case.feeds[x_onnx].shape, **{k: w.shape for k, w in imp.weights.items()}}
    text, plan = emit_ptx(compile_to_ir(imp.source), imp.kernel, "sm_80", shapes)
    json.dumps(plan)  # the launch plan is JSON-able
    src = tmp_path / "model.ptx"
    src.write_text(text)
    done = subprocess.run([ptxas, "--gpu-name", "sm_80", str(src), "-o", str(tmp_path / "m.cubin")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_batch_is_symbolic() -> None:
    """One import serves every batch size: the batch dim is a kernel dim name."""
    built = models.mlp()
    mod = load_onnx(built.model)
    assert "input x: f32[batch, 64]" in mod.source
    assert "output logits: f32[batch, 10]" in mod.source
    for batch in (1, 5):
        feeds = built.make_inputs(batch)
        assert_close(mod(**feeds), ort_run(built.model, feeds)[0])


def test_uint8_qdq_matches_onnxruntime() -> None:
    """uint8 activations (held as int8 shifted by 128) on the interpreter and the CPU."""
    built = models.qdq_matmul(signed=False)
    feeds = built.make_inputs(3)
    want = ort_run(built.model, feeds)[0]
    for target in ("interp", "cpu"):
        assert_close(load_onnx(built.model, target=target)(**feeds), want, rtol=1e-6, atol=1e-6)


def test_qdq_matmul_is_an_integer_matmul() -> None:
    source = import_onnx(models.qdq_matmul().model).source
    assert "cast(" in source and ", i32) @ cast(w_q, i32)" in source


def test_encoder_with_decomposed_gelu() -> None:
    """The Div/Erf/Add/Mul form of gelu (opset 17 exports) imports as plain elementwise ops."""
    built = models.encoder(gelu="erf")
    feeds = built.make_inputs(2)
    assert_close(load_onnx(built.model)(**feeds), ort_run(built.model, feeds)[0],
                 rtol=2e-5, atol=2e-5)


def test_results_are_deterministic(case: Case) -> None:
    mod = case.module("cpu")
    first = np.array(mod(**case.feeds))
    assert np.array_equal(first, mod(**case.feeds))


def test_steady_calls_by_input_name_are_one_native_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """``mod(**feeds)`` (ONNX input names, as ``sess.run`` takes them) binds on its first
    calls only; later ones are the native call, and still follow new data and batches."""
    built = models.mlp()
    mod = load_onnx(built.model, target="cpu")
    feeds = built.make_inputs(3)
    mod(**feeds)
    mod(**feeds)
    import wiadsl.onnx.module as onnx_module

    def no_binding(*args: object, **kwargs: object) -> None:
        raise AssertionError("a steady call by input name bound its arguments again")
    real = onnx_module.bind_call
    monkeypatch.setattr(onnx_module, "bind_call", no_binding)
    for scale in (1.0, -2.0):
        new = {k: v * np.float32(scale) for k, v in feeds.items()}
        assert_close(mod(**new), ort_run(built.model, new)[0])
    monkeypatch.setattr(onnx_module, "bind_call", real)
    other = built.make_inputs(5)  # a new batch goes the checking way, then is planned too
    assert_close(mod(**other), ort_run(built.model, other)[0])
    with pytest.raises(Exception, match="unknown argument"):
        mod(**feeds, extra=feeds["x"])


def test_profile_takes_the_graph_inputs_of_an_imported_model() -> None:
    """``wiadsl.profile(mod.kernel, x)`` binds the weights itself, as a call does."""
    import wiadsl
    built = models.mlp()
    mod = load_onnx(built.model, target="cpu")
    feeds = built.make_inputs(4)
    report = wiadsl.profile(mod.kernel, *feeds.values(), runs=2)
    assert report.stats and "matmul" in report.report()
    with pytest.raises(wiadsl.WiaCallError):
        wiadsl.profile(mod.kernel, *feeds.values(), feeds["x"], runs=0)


def test_resnet18_structure_matches_onnxruntime() -> None:
    """The ResNet-18 of benchmarks/first_result.py (strided blocks with 1x1 shortcuts,
    the 7x7 stem, padded max pooling), at a small width and size, on the CPU."""
    built = models.resnet18(size=40, classes=10, width=8)
    feeds = built.make_inputs(1)
    got = load_onnx(built.model, target="cpu")(**feeds)
    assert_close(got, ort_run(built.model, feeds)[0], rtol=1e-4, atol=1e-4)
