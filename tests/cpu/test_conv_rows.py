"""Small output planes of a frozen weight as the rows of a GEMM (loops/conv.py's ``rows``,
backends/llvm/conv_rows.py): the weight packed once into W^T's panels (the entry's
state, reached from the pool's workers and from functions merged across layers), each
call's patches packed a kernel row of taps at a time, channel counts that end inside a
panel, strides, 1x1, 5x5 and 17x17 kernels, planes of 36 to 256 pixels, with and
without a fused epilogue, at one and two threads, against NumPy; which convolutions
take the layout; and the lowering as IR text. Winograd (F(2x2, 3x3), F(4x4, 3x3)), which takes
most 3x3 stride-1 layers of this layout, is off here (``no_winograd``); it has
tests of its own (test_conv_winograd.py)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import wiadsl
from wiadsl.backends.llvm.compile import lower_kernel
from wiadsl.cache import entries as cache
from wiadsl.ir import parse_module, print_module
from wiadsl.loops import conv
from wiadsl.loops.conv import rows_pays

BIASED = """
kernel c(input x: f32[N, C, H, W], input w: f32[O, C, KH, KW], input b: f32[O, 1, 1],
         output y: f32[N, O, P, Q]) {{
    y = relu(conv2d(x, w, stride={s}, padding={p}) + b);
}}
"""
PLAIN = """
kernel c(input x: f32[N, C, H, W], input w: f32[O, C, KH, KW], output y: f32[N, O, P, Q]) {{
    y = conv2d(x, w, stride={s}, padding={p});
}}
"""


@pytest.fixture
def no_winograd(monkeypatch):
    """The lowering without Winograd, and no cached kernel of another lowering (the
    rule's constants are not the cache key's)."""
    monkeypatch.setattr(conv, "WINO_CHANNELS", 1 << 30)
    monkeypatch.setenv("WIADSL_CACHE", "0")
    cache.clear_memory()
    yield
    cache.clear_memory()


def reference(x: np.ndarray, w: np.ndarray, s: int, p: int) -> np.ndarray:
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (p, p), (p, p)))
    win = np.lib.stride_tricks.sliding_window_view(xp, w.shape[2:], axis=(2, 3))[:, :, ::s, ::s]
    return np.einsum("nchwij,ocij->nohw", win, w.astype(np.float64))


# (images, channels in, plane, channels out, kernel, stride, padding), each above
# rows_pays's multiply-adds: ResNet-18's 7x7 stage, channels that end inside a panel,
# stride-2 planes, 1x1 kernels, a 16x16 plane (ROWS_PIXELS), a 5x5 kernel on 2 images,
# a 17x17 kernel (rows of taps wider than a vector), a 4x4 plane (too few pixels to
# split over two threads: split by output channels, the last panel part full)
CASES = [(1, 80, 7, 512, 3, 1, 1), (1, 75, 7, 520, 3, 1, 1), (4, 300, 14, 129, 3, 2, 1),
         (1, 700, 7, 512, 1, 1, 0), (4, 64, 16, 128, 3, 1, 1), (2, 75, 6, 260, 5, 1, 2),
         (1, 700, 13, 512, 1, 2, 0), (1, 10, 7, 128, 17, 1, 8), (1, 300, 4, 520, 3, 1, 1)]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("source", [BIASED, PLAIN], ids=["epilogue", "plain"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c)))
def test_small_planes_of_frozen_weights_match_numpy(case, source: str, threads: int,
                                                     no_winograd) -> None:
    n, c, h, o, k, s, p = case
    rng = np.random.default_rng(sum(case))
    x = rng.standard_normal((n, c, h, h)).astype(np.float32)
    w = rng.standard_normal((o, c, k, k)).astype(np.float32)
    b = rng.standard_normal((o, 1, 1)).astype(np.float32)
    want = reference(x, w, s, p)
    if source is BIASED:
        want = np.maximum(want + b, 0)
    before = wiadsl.get_num_threads()
    wiadsl.set_num_threads(threads)
    try:
        f = wiadsl.jit(source.format(s=s, p=p), "c", frozen=(1,), shapes="static")
        args = (x, w, b) if source is BIASED else (x, w)
        for _ in range(2):  # the first call packs the weight, the second reads it packed
            np.testing.assert_allclose(f(*args), want, rtol=2e-4, atol=2e-4)
    finally:
        wiadsl.set_num_threads(before)


TENSOR_CONV = """
func @c(%x: tensor<1x80x7x7xf32>, %w: tensor<512x80x3x3xf32>) -> tensor<1x512x7x7xf32> attributes {{kernel, outputs = ["y"]}} {{
^entry:
  %y = tensor.conv2d %x, %w {{stride = [1, 1], padding = [1, 1]}} : (tensor<1x80x7x7xf32>, tensor<512x80x3x3xf32>) -> tensor<1x512x7x7xf32>
  return %y : tensor<1x512x7x7xf32>
}}
"""


@pytest.mark.parametrize(("frozen", "rows"), [(frozenset(), False), (frozenset({0}), False),
                                              (frozenset({1}), True)])
def test_only_a_frozen_weight_takes_the_rows_kernel(frozen: frozenset[int], rows: bool,
                                                     no_winograd) -> None:
    lowered = lower_kernel(parse_module(TENSOR_CONV.format()), "c", [[1, 80, 7, 7], [512, 80, 3, 3]],
                           frozen=frozen)
    loops = print_module(lowered.loop_ir)
    # CHECK (frozen w): one loop.conv2d per image with the hint, no pixel chunks
    assert ("{stride = [1, 1], rows}" in loops) == rows
    assert ("chunk = " in loops) != rows
    assert print_module(parse_module(loops)) == loops  # the hint parses back
    text = lowered.llvm_ir
    # CHECK (frozen w): W^T packed once behind a compare-and-swap, then the rows kernel
    # CHECK-NOT: the pixel-panel kernel
    assert ("@\"wia.lib.conv_rows_prepack.f32." in text and "cmpxchg" in text) == rows
    assert ("@\"wia.lib.conv_rows.f32." in text) == rows
    assert ("@\"wia.lib.conv_range.f32." in text) != rows
    assert lowered.state_cells == int(rows)


TWO_LAYERS = """
func layer(a, w) {
    return relu(conv2d(a, w, stride=1, padding=1));
}

kernel two(input x: f32[N, C, H, W], input w1: f32[C, C, 3, 3], input w2: f32[C, C, 3, 3],
           output y: f32[N, C, H, W]) {
    y = layer(layer(x, w1), w2);
}
"""


@pytest.mark.parametrize("winograd", [True, False], ids=["winograd", "rows"])
@pytest.mark.parametrize("threads", [1, 2])
def test_layers_of_one_shape_keep_their_own_packed_weights(threads: int, winograd: bool,
                                                           monkeypatch) -> None:
    """The two convolutions' outlined loops are the same code and merge into one
    function (loops/merge_functions.py) called with each layer's weight: each call
    site packs into state cells of its own (codegen.py ``callee_arena``); with one
    cell per function, the second layer ran on the first one's weight. Both packings:
    W^T's panels (conv_rows.py) and the Winograd transform's (conv_winograd.py)."""
    if not winograd:
        monkeypatch.setattr(conv, "WINO_CHANNELS", 1 << 30)
    monkeypatch.setenv("WIADSL_CACHE", "0")
    cache.clear_memory()
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 256, 7, 7)).astype(np.float32)  # 2 images: outlined loops
    w1, w2 = (rng.standard_normal((256, 256, 3, 3)).astype(np.float32) * 0.05 for _ in range(2))
    want = np.maximum(reference(np.maximum(reference(x, w1, 1, 1), 0).astype(np.float32), w2, 1, 1), 0)
    before = wiadsl.get_num_threads()
    wiadsl.set_num_threads(threads)
    try:
        f = wiadsl.jit(TWO_LAYERS, "two", frozen=(1, 2), shapes="static")
        for _ in range(2):
            np.testing.assert_allclose(f(x, w1, w2), want, rtol=2e-4, atol=2e-4)
    finally:
        wiadsl.set_num_threads(before)
        cache.clear_memory()


@pytest.mark.parametrize(("extents", "pays"), [
    ((256, 256, 3, 3, 14, 14), True), ((512, 512, 3, 3, 7, 7), True),
    ((128, 256, 1, 1, 14, 14), False),   # ResNet-18's downsample: few multiply-adds
    ((64, 64, 1, 1, 14, 14), False),     # MobileNetV2: few channels
    ((1024, 64, 3, 3, 7, 7), False),     # too few channels for the threads to share
    ((256, 256, 3, 3, 28, 28), False)])  # a plane of more than ROWS_PIXELS
def test_which_convolutions_take_the_rows_layout(extents, pays) -> None:
    assert rows_pays(*extents) == pays


@pytest.mark.parametrize(("extents", "lanes", "pays"), [
    ((32, 32, 3, 3, 4, 4), 32, True), ((32, 32, 3, 3, 4, 4), 16, False),
    ((64, 64, 3, 3, 2, 2), 16, True), ((8, 8, 3, 3, 1, 1), 2, True), ((8, 8, 3, 3, 1, 1), 1, False),
    ((64, 64, 1, 1, 2, 2), 32, False), ((32, 32, 3, 3, 4, 4), 0, False),
    ((16, 16, 3, 1, 3, 5), 32, True)])  # a 3x1 kernel is larger than 1x1 too
def test_a_plane_of_at_most_half_the_lanes_takes_the_rows_layout(extents, lanes, pays) -> None:
    assert rows_pays(*extents, lanes) == pays


# (images, channels in, plane, channels out, kernel, stride, padding): output planes of
# 1 to 16 pixels (rows on the hosts whose direct kernel has twice their pixels in
# lanes, the direct kernel elsewhere: the same results either way), channels that end
# inside a panel, strides, a kernel the size of its input; kernel rows of 3, 7 and 11
# taps (``pack``'s copies of 4, 8 and W lanes)
SMALL = [(1, 32, 4, 32, 3, 1, 1), (1, 64, 2, 64, 3, 1, 1), (2, 33, 3, 7, 3, 1, 1),
         (1, 16, 8, 33, 3, 2, 1), (3, 5, 1, 9, 3, 1, 1), (1, 7, 7, 129, 7, 1, 0),
         (2, 8, 3, 16, 3, 2, 1), (1, 6, 4, 20, 11, 1, 5)]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("source", [BIASED, PLAIN], ids=["epilogue", "plain"])
@pytest.mark.parametrize("case", SMALL, ids=lambda c: "x".join(map(str, c)))
def test_planes_of_a_few_pixels_match_numpy(case, source: str, threads: int, no_winograd) -> None:
    test_small_planes_of_frozen_weights_match_numpy(case, source, threads, no_winograd)


def test_few_rows_split_by_output_channels() -> None:
    """The driver (as IR text) runs its part on every row and a range of whole panels
    of output channels when the rows are few, on a range of rows and every channel
    otherwise, and on everything without threads."""
    from llvmlite import ir

    from wiadsl.backends.llvm.conv_rows import ConvRowsBuilder
    from wiadsl.dtypes import DType

    module = ir.Module("conv")
    builder = ConvRowsBuilder(module, DType.F32, (1, 1))
    builder.driver()
    part = re.escape('call i32 @"wia.conv.rows.pixels.f32.s1x1"(')
    worker = {kind: str(module.get_global(f"wia.conv.rows.pixels.f32.s1x1.{kind}"))
              for kind in ("rows", "columns")}
    # (ctx, row lo, row hi, column lo, column hi); the worker's (ctx, lo, hi) are %.1-%.3
    assert re.search(part + r'ptr %"\.1", i64 %"\.2", i64 %"\.3", i64 0, i64 %"\.\d+"\)',
                     worker["rows"])
    assert re.search(part + r'ptr %"\.1", i64 0, i64 %"\.\d+", i64 %"\.2", i64 %"\.\d+"\)',
                     worker["columns"])
    driver = str(module.get_global("wia.conv.rows.f32.s1x1"))
    # the pool splits the columns in whole panels, the rows in whole micro-kernel rows
    # (with 8-row kernels, 7 or 8: a value)
    assert re.search(r'pixels\.f32\.s1x1\.columns", i64\* %"\.\d+", i64 0, i64 %"\.\d+", '
                     rf"i64 {builder.nr}, ", driver)
    assert re.search(r'pixels\.f32\.s1x1\.rows", i64\* %"\.\d+", i64 0, i64 %"\.\d+", '
                     rf'i64 ({builder.mr}|%"\.\d+"), ', driver)
    assert re.search(part + r'i64\* %"\.\d+", i64 0, i64 %"\.\d+", i64 0, i64 %"\.7"\)', driver)
    assert str(module).count('define internal i32 @"wia.conv.rows.pixels.f32.s1x1"(') == 1


@pytest.mark.parametrize("threads", [1, 2])
def test_the_rows_kernel_takes_any_plane(monkeypatch, threads: int, no_winograd,
                                         restore_thread_count) -> None:
    """The lowering takes planes of up to ROWS_PIXELS; the kernel itself is right for
    any (a 28x28 plane, the limit raised): its per-pixel offsets live in scratch
    memory sized by the plane. (They were a 256-entry stack array; what writing past
    it did was not visible in this test's result.)"""
    monkeypatch.setattr(conv, "ROWS_PIXELS", 4096)
    rng = np.random.default_rng(28)
    x = rng.standard_normal((1, 64, 28, 28)).astype(np.float32)
    w = rng.standard_normal((128, 64, 3, 3)).astype(np.float32)
    b = rng.standard_normal((128, 1, 1)).astype(np.float32)
    wiadsl.set_num_threads(threads)
    f = wiadsl.jit(BIASED.format(s=1, p=1), "c", frozen=(1,), shapes="static")
    np.testing.assert_allclose(f(x, w, b), np.maximum(reference(x, w, 1, 1) + b, 0),
                               rtol=2e-4, atol=2e-4)
