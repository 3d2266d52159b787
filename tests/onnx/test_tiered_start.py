"""``load_onnx(model, tiered=True)`` (backends/llvm/tiered.py): on an empty cache the
first calls run on the interpreter while the model compiles; every call matches ONNX
Runtime, the interpreted ones and the native ones after ``wait_compiled``."""

from __future__ import annotations

import pytest

from tests.onnx.helpers import assert_close, ort_run, require_onnx

require_onnx()

from tests.onnx import models  # noqa: E402
from wiadsl.onnx.importer import load_onnx  # noqa: E402


@pytest.mark.parametrize("build", [models.cnn, models.mobilenet_v2, models.encoder, models.qdq_matmul],
                         ids=["cnn", "mobilenet_v2", "encoder", "qdq_matmul"])
def test_interpreted_then_native_calls_match_onnx_runtime(fresh_cache, build) -> None:
    built = build()
    module = load_onnx(built.model, tiered=True)
    feeds = built.make_inputs(2)
    want = ort_run(built.model, feeds)[0]
    assert_close(module(**feeds), want, rtol=1e-4, atol=1e-4)
    assert module.kernel.stats == {"tier": "interpreter"}
    module.wait_compiled()
    assert_close(module(**feeds), want, rtol=1e-4, atol=1e-4)
    assert module.kernel.stats["cache"] == "compiled"


@pytest.mark.parametrize("file", ["bert_torchscript.onnx.gz", "mobilenet_v2_dynamo.onnx.gz"])
def test_exported_models_give_their_first_result_on_the_interpreter(fresh_cache, file) -> None:
    from tests.onnx.test_exports import ATOL, RTOL, feeds_for, model_bytes, onnxruntime

    data = model_bytes(file)
    feeds = feeds_for(file, 1, 5)
    want = onnxruntime(data, feeds)
    module = load_onnx(data, tiered=True)
    assert_close(module(**feeds), want, rtol=RTOL, atol=ATOL)
    assert module.kernel.stats == {"tier": "interpreter"}
    module.wait_compiled()
    assert_close(module(**feeds), want, rtol=RTOL, atol=ATOL)
    assert module.kernel.stats["cache"] == "compiled"
