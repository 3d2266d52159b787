"""Stride-2 stems as stride-1 convolutions of their input's phases (loops/conv.py
``phase_split``), compiled to native code, against NumPy: the 7x7 and 3x3 stems of
ResNet and MobileNet, every window side up to 7, paddings from none to wider than a
phase's border, heights odd and even, one to four input channels, every row count of
output channels, f32 and f64, a batch over the pool and the fused bias + ReLU."""

from __future__ import annotations

import numpy as np
import pytest

import wiadsl

from .test_conv_padding import check, ref, run

rng = np.random.default_rng(29)


def case(n: int, c: int, o: int, h: int, w: int, k: tuple[int, int], pad: tuple[int, int],
         dtype: type = np.float32) -> None:
    x = rng.standard_normal((n, c, h, w)).astype(dtype)
    weight = rng.standard_normal((o, c, *k)).astype(dtype)
    check(run(x, weight, (2, 2), pad), ref(x, weight, (2, 2), pad))


@pytest.mark.parametrize("k,pad", [((7, 7), (3, 3)), ((3, 3), (1, 1)), ((5, 5), (2, 2)), ((3, 3), (0, 0)),
                                   ((4, 4), (1, 1)), ((7, 3), (3, 1)), ((2, 3), (0, 1)), ((3, 3), (3, 3))])
def test_windows_and_paddings(k, pad):
    wo = 32
    case(1, 3, 8, 2 * wo + k[0] - 2 * pad[0] - 1, 2 * (wo - 1) + k[1] - 2 * pad[1] + 1, k, pad)


@pytest.mark.parametrize("h", [15, 16, 31, 64])
@pytest.mark.parametrize("c", [1, 2, 4])
def test_heights_and_channels(h, c):
    case(2, c, 5, h, 64, (3, 3), (1, 1))


@pytest.mark.parametrize("o", [1, 7, 8, 13, 16, 23, 26])  # 26: the most at 7x7 (PHASE_EXTRA)
def test_output_channel_counts(o):
    case(1, 3, o, 64, 64, (7, 7), (3, 3))


def test_f64_and_sixteen_pixel_rows():
    case(1, 3, 6, 64, 64, (7, 7), (3, 3), np.float64)
    case(2, 3, 9, 32, 32, (3, 3), (1, 1), np.float64)
    case(2, 3, 9, 32, 32, (3, 3), (1, 1))  # 16-pixel rows in pairs
    case(1, 3, 9, 30, 32, (3, 3), (1, 1))  # 15 rows: the last tile's pair is short


STEM = """
kernel stem(input x: f32[N, 3, H, W], input w: f32[O, 3, 7, 7], input b: f32[O, 1, 1],
            output y: f32[N, O, P, Q]) {
    y = relu(conv2d(x, w, stride=2, padding=3) + b);
}
"""


@pytest.mark.parametrize("threads", [1, 2])
def test_a_batch_over_the_pool_with_the_fused_epilogue(threads, restore_thread_count):
    mod = wiadsl.jit(STEM, target="cpu")
    x = rng.standard_normal((5, 3, 64, 64)).astype(np.float32)
    w = rng.standard_normal((16, 3, 7, 7)).astype(np.float32)
    b = rng.standard_normal((16, 1, 1)).astype(np.float32)
    wiadsl.set_num_threads(threads)
    check(mod.stem(x, w, b), np.maximum(ref(x, w, (2, 2), (3, 3)) + b, 0))
