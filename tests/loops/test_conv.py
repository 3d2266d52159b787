"""Float conv2d lowers to a zero-padded copy plus ``loop.conv2d`` (implicit GEMM):
IR text, and the loop IR run by the interpreter against the tensor IR."""

from __future__ import annotations

import numpy as np
import pytest

from wiadsl.ir import parse_module, print_module, run_func, verify
from wiadsl.loops import lower_module
from wiadsl.testing.filecheck import filecheck

CONV = """
func @f(%x: tensor<?x?x?x?x{dt}>, %w: tensor<?x?x?x?x{dt}>) -> tensor<?x?x?x?x{dt}> attributes {{kernel, outputs = ["y"]}} {{
^entry:
  %y = tensor.conv2d %x, %w {{stride = [{sh}, {sw}], padding = [{ph}, {pw}]}} : (tensor<?x?x?x?x{dt}>, tensor<?x?x?x?x{dt}>) -> tensor<?x?x?x?x{dt}>
  return %y : tensor<?x?x?x?x{dt}>
}}
"""


def conv(dt="f32", sh=1, sw=1, ph=1, pw=1) -> str:
    return CONV.format(dt=dt, sh=sh, sw=sw, ph=ph, pw=pw)


def test_padded_copy_then_implicit_gemm():
    module = lower_module(parse_module(conv()), {"f": [(2, 3, 5, 6), (4, 3, 3, 3)]})
    verify(module)
    out = print_module(module)
    filecheck(out, """
    CHECK: loop.alloc : tensor<2x4x5x6xf32>
    CHECK: loop.alloc : tensor<2x3x7x8xf32>
    CHECK: loop.store
    CHECK: loop.load %x,
    CHECK: loop.conv2d {{%[0-9]+}}, %w, {{%[0-9]+}}, {{.*}} {stride = [1, 1]} : (tensor<2x3x7x8xf32>, tensor<?x?x?x?xf32>, tensor<2x4x5x6xf32>, index
    """)
    assert "loop.gemm" not in out and out.count("loop.conv2d") == 1


def test_no_padding_reads_the_input_directly():
    out = print_module(lower_module(parse_module(conv(ph=0, pw=0)), {"f": [(1, 2, 5, 5), (3, 2, 2, 2)]}))
    filecheck(out, "CHECK: loop.conv2d %x, %w,")
    assert "loop.copy" not in out


@pytest.mark.parametrize("dt,sh,sw,ph,pw", [("f32", 1, 1, 1, 1), ("f64", 2, 1, 0, 2), ("f32", 2, 3, 1, 0)])
@pytest.mark.parametrize("static", [True, False])
def test_loop_ir_runs_like_the_tensor_ir(dt, sh, sw, ph, pw, static):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 7, 9)).astype(dt.replace("f", "float"))
    w = rng.standard_normal((5, 3, 3, 2)).astype(x.dtype)
    tensor = parse_module(conv(dt, sh, sw, ph, pw))
    shapes = {"f": [x.shape, w.shape]} if static else None
    want = run_func(tensor, "f", [x, w])[0]
    got = run_func(lower_module(tensor, shapes), "f", [x, w])[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_batch_splits_over_threads_image_by_image():
    """The image loop is parallel and its cost is the convolution's multiply-adds
    (o * c * kh * kw * ho * wo = 4 * 3 * 9 * 30), so ``parallelize`` outlines it; one
    image is left to the convolution's own split over pixels."""
    from wiadsl.loops.passes import run_loop_passes
    module = lower_module(parse_module(conv()), {"f": [(2, 3, 5, 6), (4, 3, 3, 3)]})
    run_loop_passes(module, "parallelize{min_cost=0}", verify_each=True)
    filecheck(print_module(module), """
    CHECK: func @f(
    CHECK: func.call @f.par{{[0-9]+}}({{.*}}) {parallel = 32{{[0-9][0-9]}}}
    CHECK: func @f.par{{[0-9]+}}(
    CHECK: loop.conv2d
    """)
    one = lower_module(parse_module(conv()), {"f": [(1, 3, 5, 6), (4, 3, 3, 3)]})
    run_loop_passes(one, "parallelize{min_cost=0}", verify_each=True)
    text = print_module(one)
    body = text[text.index("func @f("):]
    assert "loop.conv2d" in body.split("\n}\n")[0]  # still in @f: nothing to split


@pytest.mark.parametrize("batch", [1, None])
@pytest.mark.parametrize("channels,blocks", [(128, 2), (200, 3), (512, 4), (100, 1)])
def test_an_image_of_few_pixels_splits_over_its_output_channels(batch, channels, blocks):
    """25 output pixels are one chunk: the pieces of the parallel loop are blocks of
    output channels (at least 64 each, up to 4 pieces), a dynamic batch counting as
    one image; each piece's ``loop.conv2d`` takes its channel range."""
    from wiadsl.loops.conv import MIN_BLOCK_CHANNELS
    module = lower_module(parse_module(conv()), {"f": [(batch, 8, 5, 5), (channels, 8, 3, 3)]})
    verify(module)
    out = print_module(module)
    if blocks == 1:
        assert "channels =" not in out
        return
    per = -(-channels // blocks)
    assert per >= MIN_BLOCK_CHANNELS
    filecheck(out, f"""
    CHECK: loop.conv2d {{{{.*}}}}, {{{{%[0-9]+}}}}, {{{{%[0-9]+}}}} {{stride = [1, 1], chunk = 256, channels = {per}}}
    """)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 8, 5, 5)).astype(np.float32)
    w = rng.standard_normal((channels, 8, 3, 3)).astype(np.float32)
    want = run_func(parse_module(conv()), "f", [x, w])[0]
    np.testing.assert_allclose(run_func(module, "f", [x, w])[0], want, rtol=1e-5, atol=1e-5)


def test_a_stride_two_stem_runs_on_its_input_phases():
    """A stride-2 convolution of an image's few channels (loops/conv.py
    ``phase_split_pays``) lowers to the four phase planes of each input channel and the
    weight's taps regrouped for them, then a stride-1 ``loop.conv2d`` of 4x the channels
    and a ceil(k/2) window on the phases: 3 channels 7x7 at 64x64 (pad 3) -> 12
    channels 4x4 on 35x35 planes, 32x32 outputs."""
    module = lower_module(parse_module(conv(sh=2, sw=2, ph=3, pw=3)), {"f": [(1, 3, 64, 64), (8, 3, 7, 7)]})
    verify(module)
    out = print_module(module)
    filecheck(out, """
    CHECK: loop.alloc : tensor<1x8x32x32xf32>
    CHECK: loop.alloc : tensor<1x12x35x35xf32>
    CHECK: loop.alloc : tensor<8x12x4x4xf32>
    CHECK: loop.conv2d {{%[0-9]+}}, {{%[0-9]+}}, {{%[0-9]+}}, {{.*}} {stride = [1, 1]} : (tensor<1x12x35x35xf32>, tensor<8x12x4x4xf32>, tensor<1x8x32x32xf32>
    """)


@pytest.mark.parametrize("x_shape,w_shape,pad", [
    ((1, 3, 64, 64), (32, 3, 7, 7), 3),    # 32 * 15 extra taps a pixel: over PHASE_EXTRA * 49
    ((1, 3, 64, 64), (16, 3, 3, 3), 1),    # 16 * 7 extra taps: over PHASE_EXTRA * 9
    ((1, 4, 64, 64), (300, 4, 4, 4), 1),   # no extra taps, but 300 * 16 * 2 * 2: over DIRECT_WEIGHTS
    ((1, 5, 64, 64), (8, 5, 3, 3), 1),     # more than an image's channels
    ((1, 3, 64, 60), (8, 3, 3, 3), 1),     # 30-pixel output rows: no whole tiles
    ((1, 3, 64, 64), (8, 3, 9, 9), 4),     # a window over 7x7
    ((1, 3, 64, 64), (8, 3, 2, 2), 0),     # one tap a phase: nothing to regroup
])
def test_other_stride_two_convolutions_pack_their_patches(x_shape, w_shape, pad):
    out = print_module(lower_module(parse_module(conv(sh=2, sw=2, ph=pad, pw=pad)), {"f": [x_shape, w_shape]}))
    filecheck(out, "CHECK: loop.conv2d {{.*}} {stride = [2, 2]}")


@pytest.mark.parametrize("dt", ["f32", "f64"])
@pytest.mark.parametrize("h,w,k,ph,pw", [(64, 64, 7, 3, 3), (31, 64, 3, 1, 1), (32, 33, 5, 0, 2), (33, 32, 3, 2, 1)])
def test_phase_split_loop_ir_runs_like_the_tensor_ir(dt, h, w, k, ph, pw):
    """Odd and even heights, paddings wider than a phase's border, every window side
    (the interpreter runs the loop IR, phase planes and regrouped weight included)."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, h, w)).astype(dt.replace("f", "float"))
    wt = rng.standard_normal((4, 3, k, k)).astype(x.dtype)
    tensor = parse_module(conv(dt, 2, 2, ph, pw))
    module = lower_module(tensor, {"f": [x.shape, wt.shape]})
    if (w + 2 * pw - k) // 2 + 1 == 32:
        assert "stride = [1, 1]" in print_module(module)
    np.testing.assert_allclose(run_func(module, "f", [x, wt])[0], run_func(tensor, "f", [x, wt])[0],
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("x", "w", "stride", "dt", "panel_bits", "rows"), [
    ((1, 32, 4, 4), (32, 32, 3, 3), 1, "f32", 1024, True),    # 16 pixels, 32 lanes (AVX-512)
    ((1, 32, 4, 4), (32, 32, 3, 3), 1, "f32", 512, False),    # 16 lanes (AVX2): the direct kernel's
    ((1, 64, 2, 2), (64, 64, 3, 3), 1, "f32", 512, True),     # 4 pixels, 16 lanes
    ((1, 64, 2, 2), (64, 64, 3, 3), 1, "f64", 512, True),     # 8 f64 lanes: 4 pixels
    ((1, 32, 4, 4), (32, 32, 3, 3), 1, "f64", 1024, False),   # 16 f64 lanes: 16 pixels fill them
    ((1, 32, 2, 4), (32, 32, 3, 3), 1, "f64", 1024, True),    # 8 pixels
    ((1, 16, 8, 8), (32, 16, 3, 3), 2, "f32", 1024, True),    # stride 2 to 4x4
    ((1, 64, 4, 4), (64, 64, 1, 1), 1, "f32", 1024, False),   # 1x1: a transposed copy for nothing
    ((1, 32, 4, 4), (32, 32, 3, 3), 1, "f32", 0, False)])     # lanes unknown
def test_a_small_plane_of_a_frozen_weight_takes_the_rows_layout(x, w, stride, dt, panel_bits, rows):
    """A kernel larger than 1x1 whose output plane fills at most half the direct kernel's
    pixel lanes (``panel_bits`` / the dtype's bits) takes ``loop.conv2d {rows}``."""
    pad = w[2] // 2
    module = lower_module(parse_module(conv(dt, stride, stride, pad, pad)), {"f": [x, w]},
                          {"f": frozenset({1})}, panel_bits)
    verify(module)
    out = print_module(module)
    # CHECK: loop.conv2d {{.*}} {stride = [s, s], rows}
    assert (f"{{stride = [{stride}, {stride}], rows}}" in out) == rows
    assert out.count("loop.conv2d") == 1
    # without a frozen weight, never (the rows layout packs the weight once)
    plain = print_module(lower_module(parse_module(conv(dt, stride, stride, pad, pad)), {"f": [x, w]},
                                      None, panel_bits))
    assert "rows}" not in plain
