"""Padded float convolutions (loops/conv.py: a zero-padded copy, then the implicit
GEMM of backends/llvm/conv.py) against NumPy on the zero-padded input: every case
of the packing (a vector inside one output row, one across two rows, per-lane
loads; strides 1, 2 and 3) with taps at each border, padding wider than the kernel
reach (outputs of zeros only), rows and columns padded differently, f32 and f64, a
batch, pixel chunks over the pool, and the fused epilogue's chunks."""

from __future__ import annotations

import numpy as np
import pytest

import wiadsl
from wiadsl.backends.llvm.backend import CpuKernel
from wiadsl.ir import parse_module

TENSOR_IR = """
func @f(%x: tensor<?x?x?x?x{dt}>, %w: tensor<?x?x?x?x{dt}>) -> tensor<?x?x?x?x{dt}> attributes {{kernel, outputs = ["y"]}} {{
^entry:
  %y = tensor.conv2d %x, %w {{stride = [{sh}, {sw}], padding = [{ph}, {pw}]}} : (tensor<?x?x?x?x{dt}>, tensor<?x?x?x?x{dt}>) -> tensor<?x?x?x?x{dt}>
  return %y : tensor<?x?x?x?x{dt}>
}}
"""

FUSED = """
kernel block(input x: f32[N, C, H, W], input w: f32[O, C, 3, 3], input b: f32[O, 1, 1],
             output y: f32[N, O, H, W]) {
    y = relu(conv2d(x, w, stride=1, padding=1) + b);
}
"""


def ref(x: np.ndarray, w: np.ndarray, stride: tuple[int, int], pad: tuple[int, int]) -> np.ndarray:
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    win = np.lib.stride_tricks.sliding_window_view(xp, w.shape[2:], axis=(2, 3))
    return np.einsum("nchwij,ocij->nohw", win[:, :, ::stride[0], ::stride[1]], w)


def run(x: np.ndarray, w: np.ndarray, stride: tuple[int, int], pad: tuple[int, int]) -> np.ndarray:
    dt = "f32" if x.dtype == np.float32 else "f64"
    text = TENSOR_IR.format(dt=dt, sh=stride[0], sw=stride[1], ph=pad[0], pw=pad[1])
    return CpuKernel(parse_module(text), "f").run([x, w])[0]


def check(got: np.ndarray, want: np.ndarray) -> None:
    tol = 1e-10 if got.dtype == np.float64 else 2e-4
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1.0, float(np.abs(want).max(initial=0))))


rng = np.random.default_rng(11)


@pytest.mark.parametrize("width", [1, 2, 5, 8, 15, 16, 17, 33])
@pytest.mark.parametrize("stride", [(1, 1), (2, 2), (1, 2), (3, 3)])
@pytest.mark.parametrize("pad", [(1, 1), (0, 2), (3, 1)])
def test_widths_strides_paddings(width, stride, pad):
    """16-lane vectors on AVX-512 (8 on AVX2): widths below, at and above one vector
    put vectors inside a row, across two rows and across many."""
    x = rng.standard_normal((2, 3, 7, width)).astype(np.float32)
    w = rng.standard_normal((5, 3, 3, 3)).astype(np.float32)
    check(run(x, w, stride, pad), ref(x, w, stride, pad))


@pytest.mark.parametrize("kernel", [(1, 1), (5, 3), (7, 7)])
@pytest.mark.parametrize("pad", [(2, 2), (4, 4)])
def test_padding_wider_than_the_kernel_reach(kernel, pad):
    """Border outputs whose every tap is in the padding come out zero; a 7x7 kernel
    with padding 4 on a 3-pixel image reads each pixel from many taps."""
    x = rng.standard_normal((1, 4, 3, 9)).astype(np.float32)
    w = rng.standard_normal((6, 4, *kernel)).astype(np.float32)
    check(run(x, w, (1, 1), pad), ref(x, w, (1, 1), pad))


@pytest.mark.parametrize("hw", [1, 7, 33])
@pytest.mark.parametrize("stride", [(1, 1), (2, 2)])
def test_f64(hw, stride):
    x = rng.standard_normal((2, 3, hw, hw))
    w = rng.standard_normal((4, 3, 3, 3))
    check(run(x, w, stride, (1, 1)), ref(x, w, stride, (1, 1)))


@pytest.mark.parametrize("c,o,hw", [(16, 33, 32), (64, 8, 16), (3, 16, 129), (1, 1, 1)])
def test_many_channels_and_pixel_chunks(c, o, hw):
    """K blocks of many taps; images that split into pixel chunks over the pool."""
    x = rng.standard_normal((1, c, hw, hw)).astype(np.float32)
    w = rng.standard_normal((o, c, 3, 3)).astype(np.float32)
    check(run(x, w, (1, 1), (1, 1)), ref(x, w, (1, 1), (1, 1)))


@pytest.mark.parametrize("n,c,o,hw", [(1, 3, 8, 1), (2, 5, 7, 9), (1, 16, 16, 33), (4, 8, 24, 16)])
def test_fused_epilogue_chunks(n, c, o, hw):
    x = rng.standard_normal((n, c, hw, hw)).astype(np.float32)
    w = rng.standard_normal((o, c, 3, 3)).astype(np.float32)
    b = rng.standard_normal((o, 1, 1)).astype(np.float32)
    got = wiadsl.jit(FUSED, kernel="block", target="cpu")(x, w, b)
    check(got, np.maximum(ref(x, w, (1, 1), (1, 1)) + b, 0))


def test_an_empty_image_with_padding_gives_zeros():
    """h = 0 with padding 1 and a 1-row kernel: every output tap is in the padding."""
    x = np.zeros((1, 2, 0, 4), np.float32)
    w = rng.standard_normal((3, 2, 1, 3)).astype(np.float32)
    check(run(x, w, (1, 1), (1, 1)), ref(x, w, (1, 1), (1, 1)))
