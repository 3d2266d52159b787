"""The ``depthwise`` pass: a sum of per-channel-weighted windows of one zero-padded input
becomes ``tensor.depthwise_conv2d`` (IR text), the function's values are kept
(interpreter, before vs after), and near misses are left alone."""

from __future__ import annotations

import numpy as np
import pytest

from wiadsl.frontend.compile import compile_to_ir
from wiadsl.ir import print_module, run_func, verify
from wiadsl.ir.ops_depthwise import depthwise_numpy
from wiadsl.passes import Remark, optimize
from wiadsl.testing.filecheck import filecheck

PRE = "inline,canonicalize,sccp,simplify-cfg,cse,licm,canonicalize,dce"


def window_sum(c: int, h: int, w: int, k: int, s: int, d: int, pads: tuple[int, int, int, int],
               dtype: str = "f32", fill: str = "0.0", skip: int = -1, extra: str = "") -> str:
    """A depthwise convolution written as the ONNX importer writes it (pads: top,
    left, bottom, right); ``skip`` leaves one tap out, ``extra`` adds a term."""
    pt, pl, pb, pr = pads
    hp, wp = h + pt + pb, w + pl + pr
    ho, wo = (hp - d * (k - 1) - 1) // s + 1, (wp - d * (k - 1) - 1) // s + 1
    terms = []
    for i in range(k):
        for j in range(k):
            if i * k + j == skip:
                continue
            a, b = i * d, j * d
            rows = f"{a}:{a + s * (ho - 1) + 1}" + (f":{s}" if s > 1 else "")
            cols = f"{b}:{b + s * (wo - 1) + 1}" + (f":{s}" if s > 1 else "")
            terms.append(f"p[:, :, {rows}, {cols}] * t[{i * k + j}]")
    return f"""kernel dw(input x: {dtype}[N, {c}, {h}, {w}], input t: {dtype}[{k * k}, {c}, 1, 1],
                    input b: {dtype}[{c}, 1, 1], output y: {dtype}[N, {c}, {ho}, {wo}]) {{
    p = full([N, {c}, {hp}, {wp}], {fill}, {dtype});
    p[:, :, {pt}:{pt + h}, {pl}:{pl + w}] = x;
    y = min(max({" + ".join(terms)}{extra} + b, 0.0), 6.0);
}}"""


def _inputs(text: str, n: int = 2, seed: int = 0) -> list[np.ndarray]:
    module = compile_to_ir(text)
    rng = np.random.default_rng(seed)
    args = []
    for a in module.funcs[0].args:
        shape = tuple(n if d is None else d for d in a.type.shape)
        args.append(rng.standard_normal(shape).astype(a.type.dtype.numpy))
    return args


def _run_both(text: str, n: int = 2) -> tuple[str, np.ndarray, np.ndarray, list[Remark]]:
    args = _inputs(text, n)
    before = compile_to_ir(text)
    want = run_func(before, "dw", args)[0]
    after = compile_to_ir(text)
    remarks: list[Remark] = []
    optimize(after, pipeline=PRE + ",depthwise,fuse,dce", remarks=remarks)
    verify(after)
    return print_module(after), want, run_func(after, "dw", args)[0], remarks


@pytest.mark.parametrize("c,h,w,k,s,d,pads", [
    (7, 9, 33, 3, 1, 1, (1, 1, 1, 1)),    # the MobileNet layer
    (33, 7, 7, 3, 2, 1, (1, 1, 1, 1)),    # strided
    (1, 1, 1, 3, 1, 1, (1, 1, 1, 1)),     # one channel, one pixel
    (5, 13, 11, 3, 3, 2, (2, 1, 0, 1)),   # stride 3, dilation 2, asymmetric pads
    (3, 8, 8, 5, 1, 1, (2, 2, 2, 2)),     # 5x5
    (4, 6, 6, 3, 1, 1, (0, 0, 0, 0)),     # no padding: the windows of x itself
])
def test_window_sums_become_a_depthwise_convolution(c, h, w, k, s, d, pads) -> None:
    text, want, got, remarks = _run_both(window_sum(c, h, w, k, s, d, pads))
    filecheck(text, f"""
    CHECK: tensor.reshape %t : tensor<{k * k}x{c}x1x1xf32> -> tensor<{k}x{k}x{c}xf32>
    CHECK: tensor.fused_depthwise_conv2d %x, {{{{%[0-9a-z_]+}}}}, %b {{stride = [{s}, {s}], dilation = [{d}, {d}], padding = [{pads[0]}, {pads[1]}], kernel = "dwconv_bias_max_min_fused"}}
    CHECK-NOT: tensor.full
    CHECK-NOT: tensor.extract_slice
    """)
    assert any("depthwise_conv2d" in r.message for r in remarks)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_f64_and_an_extra_term_kept_beside_the_convolution() -> None:
    text, want, got, _ = _run_both(window_sum(3, 5, 6, 3, 1, 1, (1, 1, 1, 1), "f64",
                                              extra=" + x"))
    filecheck(text, """
    CHECK: tensor.fused_depthwise_conv2d %x, {{%[0-9a-z_]+}}, %x, %b
    CHECK-SAME: f64
    """)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_depthwise_numpy_matches_a_padded_reference() -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 7, 6)).astype(np.float32)
    w = rng.standard_normal((3, 3, 3)).astype(np.float32)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 2), (2, 1)))
    want = sum(xp[:, :, i:i + 7:2, j:j + 6:2] * w[i, j].reshape(-1, 1, 1)
               for i in range(3) for j in range(3))
    got = depthwise_numpy(x, w, [2, 2], [1, 1], [1, 2], (4, 3))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", ["missing_tap", "minus_inf_fill", "int_dtype"])
def test_near_misses_stay_window_sums(case: str) -> None:
    if case == "missing_tap":
        text = window_sum(4, 6, 6, 3, 1, 1, (1, 1, 1, 1), skip=4)
    elif case == "minus_inf_fill":  # not a zero padding: the padded values are read
        text = window_sum(4, 6, 6, 3, 1, 1, (1, 1, 1, 1), fill="-1.0")
    else:
        text = window_sum(4, 6, 6, 3, 1, 1, (1, 1, 1, 1), "i32", fill="0").replace("0.0", "0") \
            .replace("6.0", "6")
    out, want, got, remarks = _run_both(text)
    if case == "minus_inf_fill":  # the windows of the padded tensor itself: padding 0
        assert "padding = [0, 0]" in out and "tensor.full" in out
    else:
        assert "depthwise_conv2d" not in out
        assert all("depthwise" not in r.message for r in remarks)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("x,w,result,attrs,message", [
    ("tensor<1x3x8x8xf32>", "tensor<3x3x4xf32>", "tensor<1x3x8x8xf32>",
     "stride = [1, 1], dilation = [1, 1], padding = [1, 1]", "input has 3 channels, weight 4"),
    ("tensor<1x3x8x8xi32>", "tensor<3x3x3xi32>", "tensor<1x3x8x8xi32>",
     "stride = [1, 1], dilation = [1, 1], padding = [1, 1]", "takes f32 or f64"),
    ("tensor<1x3x8x8xf32>", "tensor<3x3x3xf32>", "tensor<1x3x?x8xf32>",
     "stride = [1, 1], dilation = [1, 1], padding = [1, 1]", "static output extents"),
    ("tensor<1x3x8x8xf32>", "tensor<3x3x3xf32>", "tensor<1x3x8x8xf32>",
     "stride = [1, 1], dilation = [0, 1], padding = [1, 1]", "dilation >= 1"),
])
def test_the_op_rejects_bad_types_and_attributes(x, w, result, attrs, message) -> None:
    from wiadsl.diagnostics import WiaIRError
    from wiadsl.ir import parse_module
    src = f"""func @f(%x: {x}, %w: {w}) -> {result} {{
^entry:
  %y = tensor.depthwise_conv2d %x, %w {{{attrs}}} : ({x}, {w}) -> {result}
  return %y : {result}
}}"""
    with pytest.raises(WiaIRError, match=message):
        verify(parse_module(src))
