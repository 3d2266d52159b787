"""conv2d's implicit GEMM on flat pixel panels (backends/llvm/conv.py): panels that
cross output rows (one masked load per row part), rows narrower than a vector
(per-lane loads), strides (per-lane loads), f64 (4-lane vectors), ragged last panels, pixel chunks split
over the pool, equal K blocks, channel counts that leave 4/2/1-row tails, and 1x1
kernels at stride 1 whose patch panels are the input planes, read in place (a ragged
last panel packed), or copied a panel at a time (packed, with many channels) when their
rows would crowd one L1 set."""

from __future__ import annotations

import numpy as np
import pytest

import wiadsl

SRC = """
kernel c11(input x: f32[N, C, H, W], input w: f32[O, C, KH, KW], output y: f32[N, O, P, Q]) {
    y = conv2d(x, w, stride=1, padding=1);
}
kernel c10(input x: f32[N, C, H, W], input w: f32[O, C, KH, KW], output y: f32[N, O, P, Q]) {
    y = conv2d(x, w, stride=1, padding=0);
}
kernel c21(input x: f32[N, C, H, W], input w: f32[O, C, KH, KW], output y: f32[N, O, P, Q]) {
    y = conv2d(x, w, stride=2, padding=1);
}
kernel d12(input x: f64[N, C, H, W], input w: f64[O, C, KH, KW], output y: f64[N, O, P, Q]) {
    y = conv2d(x, w, stride=1, padding=2);
}
kernel d10(input x: f64[N, C, H, W], input w: f64[O, C, KH, KW], output y: f64[N, O, P, Q]) {
    y = conv2d(x, w, stride=1, padding=0);
}
kernel d3(input x: f64[N, C, H, W], input w: f64[O, C, KH, KW], output y: f64[N, O, P, Q]) {
    y = conv2d(x, w, stride=3, padding=0);
}
"""

rng = np.random.default_rng(7)


@pytest.fixture(scope="module")
def mod():
    return wiadsl.jit(SRC, target="cpu")


def ref(x: np.ndarray, w: np.ndarray, s: tuple[int, int], p: int) -> np.ndarray:
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
    win = np.lib.stride_tricks.sliding_window_view(xp, w.shape[2:], axis=(2, 3))[:, :, ::s[0], ::s[1]]
    return np.einsum("nchwij,ocij->nohw", win, w)


def check(got: np.ndarray, want: np.ndarray) -> None:
    tol = 1e-10 if got.dtype == np.float64 else 2e-4
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1.0, float(np.abs(want).max())))


@pytest.mark.parametrize("hw", [1, 7, 33, 129])
@pytest.mark.parametrize("co", [(3, 5), (16, 33)])
def test_odd_sizes_pad1(mod, hw, co):
    c, o = co
    x = rng.standard_normal((1, c, hw, hw)).astype(np.float32)
    w = rng.standard_normal((o, c, 3, 3)).astype(np.float32)
    check(mod.c11(x, w), ref(x, w, (1, 1), 1))


@pytest.mark.parametrize("shape", [(2, 8, 7, 33), (1, 4, 33, 7), (3, 5, 9, 129), (1, 1, 129, 1),
                                   (1, 6, 56, 56), (2, 3, 28, 28), (1, 2, 9, 19), (1, 3, 16, 15)])
def test_odd_sizes_stride2(mod, shape):
    # output rows of 28, 14, 10 and 8 pixels: vectors that cross into the next output
    # row (two masked loads per row part), and into the one after (lane by lane)
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((7, shape[1], 3, 3)).astype(np.float32)
    check(mod.c21(x, w), ref(x, w, (2, 2), 1))


@pytest.mark.parametrize("shape,k", [((1, 64, 56, 56), 3), ((2, 3, 20, 17), 1), ((1, 9, 12, 40), 5),
                                     ((1, 300, 10, 10), 1)])
def test_no_padding_and_kernel_sizes(mod, shape, k):
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((33, shape[1], k, k)).astype(np.float32)
    check(mod.c10(x, w), ref(x, w, (1, 1), 0))


@pytest.mark.parametrize("shape", [(1, 3, 1, 1), (2, 6, 13, 9), (1, 17, 31, 70)])
def test_f64_rectangular_kernel(mod, shape):
    x = rng.standard_normal(shape)
    w = rng.standard_normal((5, shape[1], 3, 5))
    check(mod.d12(x, w), ref(x, w, (1, 1), 2))


@pytest.mark.parametrize("shape", [(1, 2, 7, 7), (2, 5, 33, 34), (1, 8, 129, 40)])
def test_f64_stride3(mod, shape):
    x = rng.standard_normal(shape)
    w = rng.standard_normal((9, shape[1], 4, 2))
    check(mod.d3(x, w), ref(x, w, (3, 3), 0))


def test_panels_crossing_rows_every_offset(mod):
    # wo = 56 + 1: the 8-lane vectors start at every offset of an output row, and the
    # pixel count (57 * 57) is not a multiple of 16 (a ragged last panel), threaded
    x = rng.standard_normal((1, 32, 57, 57)).astype(np.float32)
    w = rng.standard_normal((70, 32, 3, 3)).astype(np.float32)
    check(mod.c11(x, w), ref(x, w, (1, 1), 1))


def test_repeated_calls_are_stable(mod):
    x = rng.standard_normal((1, 24, 40, 40)).astype(np.float32)
    w = rng.standard_normal((24, 24, 3, 3)).astype(np.float32)
    want = ref(x, w, (1, 1), 1)
    for _ in range(20):
        check(mod.c11(x, w), want)


@pytest.mark.parametrize("shape,o", [
    ((2, 16, 7, 9), 33),     # in place, a ragged last panel (63 pixels), 4/2/1-row tails
    ((3, 5, 1, 1), 7),       # one pixel per image: only the packed tail
    ((1, 64, 32, 32), 40),   # planes 4 KiB apart, K 64 in one L1 set, 5+ row tiles: copied
    ((1, 8, 32, 32), 40),    # the same planes, K 8: in place
    ((1, 64, 32, 32), 100),  # more channels than one row block: the block's panels packed
    ((1, 600, 32, 32), 40),  # copied panels over two K blocks of 300 (the second accumulates)
    ((1, 600, 32, 32), 20),  # the same, three row tiles: copied, or in place on a 12-way L1
    ((1, 300, 16, 16), 33),  # two K blocks of 150 rows, 1 KiB planes: in place
    ((1, 64, 57, 57), 70),   # in place, split over the pool
])
def test_unit_kernels_read_their_input_in_place(mod, shape, o):
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((o, shape[1], 1, 1)).astype(np.float32)
    check(mod.c10(x, w), ref(x, w, (1, 1), 0))


@pytest.mark.parametrize("shape", [(2, 3, 7, 7), (1, 33, 16, 16), (1, 20, 33, 1), (2, 33, 16, 32)])
def test_f64_unit_kernels(mod, shape):  # 16x32 f64 planes are 4 KiB apart: copied panels
    x = rng.standard_normal(shape)
    w = rng.standard_normal((19, shape[1], 1, 1))
    check(mod.d10(x, w), ref(x, w, (1, 1), 0))


CHANNEL_BLOCKS = """
kernel plain(input x: f32[N, C, H, W], input w: f32[O, C, 3, 3], output y: f32[N, O, H, W]) {
    y = conv2d(x, w, stride=1, padding=1);
}
kernel fused(input x: f32[N, C, H, W], input w: f32[O, C, 3, 3], input b: f32[O, 1, 1],
             output y: f32[N, O, P, Q]) {
    y = relu(conv2d(x, w, stride=2, padding=1) + b);
}
kernel wide(input x: f64[N, C, H, W], input w: f64[O, C, 1, 1], output y: f64[N, O, H, W]) {
    y = conv2d(x, w);
}
"""


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape,o", [((1, 8, 7, 7), 512), ((2, 5, 3, 9), 200), ((1, 3, 1, 1), 130),
                                     ((3, 16, 5, 5), 129)])
def test_an_image_of_few_pixels_split_over_output_channels(shape, o, threads):
    """Few output pixels: the pieces are blocks of output channels (loops/conv.py
    ``channel_blocks``), each a ``loop.conv2d`` on its weight rows and output planes,
    with and without a fused epilogue, f32 and f64, at one and two threads."""
    mod = wiadsl.jit(CHANNEL_BLOCKS, target="cpu")
    before = wiadsl.get_num_threads()
    wiadsl.set_num_threads(threads)
    try:
        x = rng.standard_normal(shape).astype(np.float32)
        w = rng.standard_normal((o, shape[1], 3, 3)).astype(np.float32)
        b = rng.standard_normal((o, 1, 1)).astype(np.float32)
        check(mod.plain(x, w), ref(x, w, (1, 1), 1))
        check(mod.fused(x, w, b), np.maximum(ref(x, w, (2, 2), 1) + b, 0))
        xd = x.astype(np.float64)
        wd = rng.standard_normal((o, shape[1], 1, 1))
        check(mod.wide(xd, wd), ref(xd, wd, (1, 1), 0))
    finally:
        wiadsl.set_num_threads(before)


STATIC_FUSED = """
kernel fused(input x: f32[2, 6, {h}, {h}], input w: f32[24, 6, 3, 3], input b: f32[24, 1, 1],
             output y: f32[2, 24, {o}, {o}]) {{
    y = relu(conv2d(x, w, stride=2, padding=1) + b);
}}
"""


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("hw", [17, 23, 28, 56])
def test_pixel_chunks_of_equal_units_cover_the_image(hw, threads):
    """A fused convolution of static shapes runs its epilogue chunk by chunk; the
    pixel chunks start at multiples of 64 pixels and differ by at most 64 (289, 529,
    784 and 3136 output pixels): every pixel written once, at one and two threads."""
    mod = wiadsl.jit(STATIC_FUSED.format(h=2 * hw, o=hw), kernel="fused", target="cpu")
    before = wiadsl.get_num_threads()
    wiadsl.set_num_threads(threads)
    try:
        x = rng.standard_normal((2, 6, 2 * hw, 2 * hw)).astype(np.float32)
        w = rng.standard_normal((24, 6, 3, 3)).astype(np.float32)
        b = rng.standard_normal((24, 1, 1)).astype(np.float32)
        check(mod(x, w, b), np.maximum(ref(x, w, (2, 2), 1) + b, 0))
    finally:
        wiadsl.set_num_threads(before)
