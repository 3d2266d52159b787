"""The form a convolution imports to by its shape (ops/conv.py), each against ONNX
Runtime on the interpreter and the CPU backend, and the source on both sides of
each threshold:
- a constant weight and at most FEW_PIXELS output pixels, of a 1x1, dilated or
  unevenly strided kernel: a matmul over channels x taps (``_few_pixels``), the
  patches of the (padded) input @ the weight transposed (a plain kernel larger than
  1x1 stays ``conv2d``, which the CPU runs with the pixels as a GEMM's rows);
- a strided depthwise convolution: strided windows of the padded input, whatever
  its width (the CPU backend runs them as one direct kernel, tests/cpu/test_depthwise.py)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.onnx.helpers import assert_close, ort_run, require_onnx

require_onnx()

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from wiadsl.onnx.importer import load_onnx, onnx_to_source  # noqa: E402
from wiadsl.onnx.ops.conv import FEW_PIXELS  # noqa: E402


def _conv(x_shape: tuple[int, ...], w_shape: tuple[int, ...], bias: bool = False,
          **attrs: object):
    rng = np.random.default_rng(sum(x_shape) + sum(w_shape))
    w = rng.standard_normal(w_shape).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w")]
    names = ["x", "w"]
    if bias:
        inits.append(numpy_helper.from_array(rng.standard_normal(w_shape[0]).astype(np.float32), "b"))
        names.append("b")
    node = helper.make_node("Conv", names, ["y"], **attrs)
    graph = helper.make_graph([node], "conv", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, ["N", *x_shape[1:]])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model, rng.standard_normal(x_shape).astype(np.float32)


#: id -> (input, weight, bias, attributes): every output has at most FEW_PIXELS pixels
CASES = {
    "1x1_2x2": ((1, 80, 2, 2), (129, 80, 1, 1), True, {}),
    "1x1_strided": ((3, 7, 4, 4), (33, 7, 1, 1), False, {"strides": [2, 2]}),
    "3x3_pad1_2x2": ((1, 33, 2, 2), (7, 33, 3, 3), True, {"pads": [1, 1, 1, 1]}),
    "3x3_stride2_to_2x2": ((2, 16, 4, 4), (19, 16, 3, 3), False,
                           {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    "global_7x7_to_1x1": ((2, 5, 7, 7), (3, 5, 7, 7), True, {}),
    "asymmetric_pads_strides": ((1, 4, 4, 2), (6, 4, 3, 2), False,
                                {"pads": [0, 1, 2, 0], "strides": [2, 1]}),
    "dilated": ((1, 3, 4, 4), (5, 3, 3, 3), False, {"dilations": [2, 2], "pads": [1, 1, 1, 1]}),
    "grouped": ((1, 8, 2, 2), (12, 2, 3, 3), True, {"group": 4, "pads": [1, 1, 1, 1]}),
    "one_channel_in_and_out": ((1, 1, 1, 1), (1, 1, 1, 1), False, {}),
    "1d_7_outputs": ((2, 3, 9), (4, 3, 3), True, {}),
}


@pytest.mark.parametrize("target", ["interp", "cpu"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_few_pixels_matches_onnxruntime(case: str, target: str) -> None:
    x_shape, w_shape, bias, attrs = CASES[case]
    model, x = _conv(x_shape, w_shape, bias, **attrs)
    (want,) = ort_run(model, {"x": x}, optimize=False)
    assert np.prod(want.shape[2:]) <= FEW_PIXELS
    assert_close(load_onnx(model, target=target)(x=x), want, rtol=1e-5, atol=1e-5)


def test_the_threshold_picks_the_form() -> None:
    """2x3 output pixels of a 1x1 kernel at stride 2, or of a dilated 3x3 one: a matmul
    on the weight transposed (a [C*kh*kw, O] constant); 3x3 = 9 pixels: conv2d, which
    vectorizes over the pixels; and a plain 3x3 kernel at any plane: conv2d, which the
    CPU runs as a GEMM over the pixels when the plane is small (loops/conv.py)."""
    strided = onnx_to_source(_conv((1, 4, 4, 6), (8, 4, 1, 1), strides=[2, 2])[0])
    assert "conv2d(" not in strided and "@" in strided and "f32[4, 8]" in strided
    dilated = onnx_to_source(_conv((1, 4, 4, 5), (8, 4, 3, 3), dilations=[2, 2], pads=[1, 1, 1, 1])[0])
    assert "conv2d(" not in dilated and "@" in dilated and "f32[36, 8]" in dilated
    many = onnx_to_source(_conv((1, 4, 6, 6), (8, 4, 1, 1), strides=[2, 2])[0])
    assert "conv2d(" in many and "@" not in many
    for h, wd in ((2, 3), (1, 1), (3, 3)):
        plain = onnx_to_source(_conv((1, 4, h, wd), (8, 4, 3, 3), pads=[1, 1, 1, 1])[0])
        assert "conv2d(" in plain and "@" not in plain


#: id -> (input, weight, attributes): depthwise (group = channels), strided
DEPTHWISE = {
    "s2_narrow": ((1, 48, 16, 16), (48, 1, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    "s2_wide": ((2, 5, 33, 40), (5, 1, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    "s2_narrow_odd": ((3, 7, 9, 7), (7, 1, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    "s3_dilated_asymmetric": ((1, 4, 13, 11), (4, 1, 3, 3),
                              {"strides": [3, 2], "dilations": [2, 1], "pads": [2, 1, 0, 1]}),
    "s2_5x5_narrow": ((1, 6, 12, 12), (6, 1, 5, 5), {"strides": [2, 2], "pads": [2, 2, 2, 2]}),
}


@pytest.mark.parametrize("target", ["interp", "cpu"])
@pytest.mark.parametrize("case", sorted(DEPTHWISE))
def test_strided_depthwise_matches_onnxruntime(case: str, target: str) -> None:
    x_shape, w_shape, attrs = DEPTHWISE[case]
    model, x = _conv(x_shape, w_shape, group=x_shape[1], **attrs)
    (want,) = ort_run(model, {"x": x}, optimize=False)
    assert_close(load_onnx(model, target=target)(x=x), want, rtol=1e-5, atol=1e-5)


def test_strided_depthwise_reads_strided_windows() -> None:
    """Narrow and wide rows alike: no stride-phase buffers, one padded input."""
    for size in (16, 34):
        src = onnx_to_source(_conv((1, 8, size, size), (8, 1, 3, 3), group=8, strides=[2, 2],
                                   pads=[1, 1, 1, 1])[0])
        assert "phase" not in src and ":2]" in src and src.count("full(") == 1
