"""A micro-kernel of more than 8 rows (``GemmConfig.mr`` 9..16, allowed by its check;
the tuner's space has mr = 12): the rows left below a multiple of ``mr`` were computed
with 4-, 2- and 1-row kernels only, so a tail of 8 or more rows left up to 8 rows of C
unwritten. Found measuring conv tiles: matmul and conv2d with mr = 14 differed from
NumPy on 1.5-12 % of their elements; a tuned mr = 12 was wrong for M = 8..11 mod 12.
Every tail from 1 to mr - 1 rows is now covered (8, 4, 2, 1)."""

from __future__ import annotations

import numpy as np
import pytest

import wiadsl
from wiadsl.backends.llvm.gemm_config import GemmConfig
from wiadsl.backends.llvm.target import host

SRC = """
kernel mm(input A: f32[M, K], input B: f32[K, N], output C: f32[M, N]) { C = A @ B; }
kernel conv(input x: f32[1, C, H, W], input w: f32[O, C, 3, 3], output y: f32[1, O, H, W]) {
    y = conv2d(x, w, stride=1, padding=1);
}
"""


def reference_conv(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))
    return np.einsum("nchwij,ocij->nohw", win, w)


@pytest.mark.parametrize("mr", [10, 12, 14, 16])
def test_every_row_tail_of_a_tall_micro_kernel_is_computed(mr):
    config = GemmConfig(mr=mr, nv=2, vector_bits=host().vector_bits, mc=96)
    mod = wiadsl.jit(SRC, target="cpu", gemm_config=config)
    rng = np.random.default_rng(mr)
    for m in (1, mr - 1, mr + 8, 2 * mr + 9, 96 + mr - 1):  # tails of 1 .. mr - 1 rows
        a = rng.standard_normal((m, 33)).astype(np.float32)
        b = rng.standard_normal((33, 40)).astype(np.float32)
        np.testing.assert_allclose(mod.mm(a, b), a @ b, rtol=1e-4, atol=1e-4)
    for o in (mr - 1, mr + 9, 100):
        x = rng.standard_normal((1, 5, 7, 9)).astype(np.float32)
        w = rng.standard_normal((o, 5, 3, 3)).astype(np.float32)
        np.testing.assert_allclose(mod.conv(x, w), reference_conv(x, w), rtol=1e-4, atol=1e-4)
