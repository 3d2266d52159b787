"""The CPU's direct convolution paths against ONNX Runtime: depthwise convolutions
(passes/depthwise.py, backends/llvm/depthwise.py: the row and the flat structures,
strides 1, 2 and 3, dilation, asymmetric padding), max pools (loop.maxpool2d) and
convolutions whose bias / activation / residual run per chunk of pixels, on odd
geometries at 1 and 2 threads, and again under ``WIADSL_ISA=avx2`` in a child
process; plus the check that a MobileNet's depthwise layers take the direct kernel."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.onnx.helpers import assert_close, ort_run, require_onnx

require_onnx()

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import wiadsl  # noqa: E402
from wiadsl.backends.llvm.host import host  # noqa: E402
from wiadsl.onnx.importer import load_onnx  # noqa: E402

F = TensorProto.FLOAT


def _model(nodes: list, inits: dict[str, np.ndarray], x_shape: tuple[int, ...],
           extra: tuple[int, ...] | None = None):
    inputs = [helper.make_tensor_value_info("x", F, ["N", *x_shape[1:]])]
    if extra:  # the residual input "r"
        inputs.append(helper.make_tensor_value_info("r", F, ["N", *extra[1:]]))
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", F, None)],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def depthwise_model(x_shape: tuple[int, ...], k: int, stride: int, dilation: int,
                    pads: list[int]):
    """Depthwise conv + bias, then Clip(0, 6) (the epilogue that runs per plane)."""
    c = x_shape[1]
    rng = np.random.default_rng(sum(x_shape) + k + stride)
    inits = {"w": rng.standard_normal((c, 1, k, k)).astype(np.float32),
             "b": rng.standard_normal(c).astype(np.float32),
             "lo": np.array(0, np.float32), "hi": np.array(6, np.float32)}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["h"], group=c, strides=[stride] * 2,
                              dilations=[dilation] * 2, pads=pads),
             helper.make_node("Clip", ["h", "lo", "hi"], ["y"])]
    return _model(nodes, inits, x_shape), rng.standard_normal(x_shape).astype(np.float32)


#: (x shape, kernel, stride, dilation, pads): rows (wide), flat (narrow, stride 1, same
#: width), strided (two loads and a shuffle), stride 3 (lane by lane), 1x1 planes; the
#: rows structure's blocks of 4 output rows then single rows: 6 = 4 + 1 + 1 rows, and
#: 7 = 4 + 3 with dilation 2 (taps of a block's rows that skip input rows)
DEPTHWISE = {
    "c3_6x19_s1_row_blocks": ((2, 3, 6, 19), 3, 1, 1, [1, 1, 1, 1]),
    "c5_13x21_s2_dil2_row_blocks": ((1, 5, 13, 21), 3, 2, 2, [2, 2, 2, 2]),
    "c7_33x33_s1": ((3, 7, 33, 33), 3, 1, 1, [1, 1, 1, 1]),
    "c33_7x7_s1_flat": ((1, 33, 7, 7), 3, 1, 1, [1, 1, 1, 1]),
    "c1_1x1_s1": ((3, 1, 1, 1), 3, 1, 1, [1, 1, 1, 1]),
    "c33_7x33_s2": ((1, 33, 7, 33), 3, 2, 1, [1, 1, 1, 1]),
    "c7_33x7_asym_s2": ((3, 7, 33, 7), 3, 2, 1, [0, 1, 1, 0]),
    # stride 2: taps 2i and 2i + 1 share a pair of loads (five taps: three pairs, the last
    # one's odd lanes unused; four taps: two pairs), ragged segments at both edges
    "c5_17x19_k5_s2": ((2, 5, 17, 19), 5, 2, 1, [2, 2, 2, 2]),
    "c3_16x16_k4_s2_asym": ((1, 3, 16, 16), 4, 2, 1, [1, 1, 2, 2]),
    "c7_13x11_s3_dil2": ((1, 7, 13, 11), 3, 3, 2, [2, 1, 0, 1]),
    "c7_9x9_5x5_flat_dil": ((1, 7, 9, 9), 5, 1, 2, [4, 4, 4, 4]),
    "c33_2x2_s1_flat": ((1, 33, 2, 2), 3, 1, 1, [1, 1, 1, 1]),
}


def pool_model(x_shape: tuple[int, ...], k: int, stride: int, pads: list[int]):
    nodes = [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[k, k], strides=[stride] * 2,
                              pads=pads)]
    x = np.random.default_rng(sum(x_shape)).standard_normal(x_shape).astype(np.float32)
    return _model(nodes, {}, x_shape), x


def conv_model(x_shape: tuple[int, ...], o: int, k: int, stride: int):
    """Conv + bias, + a residual input, Relu: the epilogue a chunk of pixels runs."""
    c = x_shape[1]
    rng = np.random.default_rng(sum(x_shape) + o)
    inits = {"w": rng.standard_normal((o, c, k, k)).astype(np.float32),
             "b": rng.standard_normal(o).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["h"], strides=[stride] * 2,
                              pads=[k // 2] * 4),
             helper.make_node("Add", ["h", "r"], ["s"]), helper.make_node("Relu", ["s"], ["y"])]
    x = rng.standard_normal(x_shape).astype(np.float32)
    ho = (x_shape[2] + 2 * (k // 2) - k) // stride + 1
    wo = (x_shape[3] + 2 * (k // 2) - k) // stride + 1
    r = rng.standard_normal((x_shape[0], o, ho, wo)).astype(np.float32)
    return _model(nodes, inits, x_shape, extra=r.shape), x, r


def _check_at_threads(model, feeds: dict[str, np.ndarray]) -> None:
    (want,) = ort_run(model, feeds)
    mod = load_onnx(model, target="cpu")
    before = wiadsl.get_num_threads()
    try:
        for threads in (1, 2):
            wiadsl.set_num_threads(threads)
            assert_close(mod(**feeds), want, rtol=1e-4, atol=1e-4)
    finally:
        wiadsl.set_num_threads(before)


@pytest.mark.parametrize("case", sorted(DEPTHWISE))
def test_depthwise_matches_onnxruntime(case: str) -> None:
    model, x = depthwise_model(*DEPTHWISE[case])
    _check_at_threads(model, {"x": x})


@pytest.mark.parametrize("x_shape,k,stride,pads", [((3, 7, 33, 33), 3, 2, [1, 1, 1, 1]),
                                                   ((1, 33, 7, 7), 2, 2, [0, 0, 0, 0]),
                                                   ((1, 1, 1, 1), 1, 1, [0, 0, 0, 0])])
def test_max_pool_matches_onnxruntime(x_shape, k, stride, pads) -> None:
    model, x = pool_model(x_shape, k, stride, pads)
    _check_at_threads(model, {"x": x})


@pytest.mark.parametrize("x_shape,o,k,stride", [((3, 7, 33, 33), 33, 1, 1), ((1, 33, 7, 7), 7, 3, 1),
                                                ((3, 1, 9, 33), 7, 3, 2), ((1, 7, 1, 1), 1, 1, 1)])
def test_conv_epilogue_per_chunk_matches_onnxruntime(x_shape, o, k, stride) -> None:
    model, x, r = conv_model(x_shape, o, k, stride)
    _check_at_threads(model, {"x": x, "r": r})


def test_mobilenet_depthwise_layers_take_the_direct_kernel() -> None:
    """Every depthwise layer of torchvision's MobileNetV2 export (17, strides 1 and 2)
    becomes a fused depthwise convolution on the CPU pipeline, read in place (no
    zero-padded tensor left), and lowers to loop.depthwise2d."""
    from tests.onnx.test_exports import model_bytes
    from wiadsl.backends.llvm.compile import cpu_pipeline
    from wiadsl.frontend.compile import compile_to_ir
    from wiadsl.ir import print_module
    from wiadsl.loops import lower_module
    from wiadsl.onnx.importer import import_onnx
    from wiadsl.passes import optimize
    from wiadsl.testing.filecheck import filecheck

    imported = import_onnx(model_bytes("mobilenet_v2_torchscript.onnx.gz"))
    module = compile_to_ir(imported.source)
    optimize(module, pipeline=cpu_pipeline(2))
    text = print_module(module)
    assert text.count("tensor.fused_depthwise_conv2d") == 17
    assert "tensor.full" not in text and "tensor.depthwise_conv2d " not in text
    filecheck(text, """
    CHECK: tensor.fused_depthwise_conv2d {{.*}} {stride = [1, 1], dilation = [1, 1], padding = [1, 1], kernel = "dwconv_bias_max_min_fused"}
    CHECK: tensor.fused_depthwise_conv2d {{.*}} {stride = [2, 2], dilation = [1, 1], padding = [1, 1], kernel = "dwconv_bias_max_min_fused"}
    """)
    loops = print_module(lower_module(module))
    assert loops.count("loop.depthwise2d") == 17 and loops.count("loop.conv2d") > 17


CHILD = r"""
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from tests.onnx import test_depthwise_cpu as t
from tests.onnx.helpers import ort_run
from wiadsl.backends.llvm.host import host
from wiadsl.onnx.importer import load_onnx
worst = 0.0
cases = [t.depthwise_model(*t.DEPTHWISE[k]) for k in ("c7_33x33_s1", "c33_7x7_s1_flat", "c33_7x33_s2",
                                                       "c7_13x11_s3_dil2")]
cases += [t.pool_model((3, 7, 33, 33), 3, 2, [1, 1, 1, 1])]
for model, x in cases:
    (want,) = ort_run(model, {"x": x})
    worst = max(worst, float(np.max(np.abs(load_onnx(model, target="cpu")(x=x) - want))))
model, x, r = t.conv_model((3, 1, 9, 33), 7, 3, 2)
(want,) = ort_run(model, {"x": x, "r": r})
worst = max(worst, float(np.max(np.abs(load_onnx(model, target="cpu")(x=x, r=r) - want))))
print(json.dumps({"bits": host().vector_bits, "worst": worst}))
"""


@pytest.mark.skipif("+avx2" not in host().features.split(","), reason="needs an AVX2 host")
def test_the_avx2_paths_match_onnxruntime(tmp_path) -> None:
    """The same kernels built for AVX2 (8 lanes: other segment and mask widths)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "WIADSL_ISA": "avx2", "WIADSL_CACHE_DIR": str(tmp_path / "cache")}
    run = subprocess.run([sys.executable, "-c", CHILD, root], capture_output=True, text=True,
                         env=env, timeout=300, cwd=root)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["bits"] == 256 and out["worst"] < 1e-4, out
