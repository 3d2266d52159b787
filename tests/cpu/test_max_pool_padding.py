"""A padded max pool on the CPU (passes/pool_padding.py gives the pool its input's
-inf band, and the plane kernel reads the input in place, the band by masked loads:
backends/llvm/depthwise.py) against NumPy on awkward shapes, asymmetric padding, NaN
and signed infinities; f16 takes the scalar loops with the same padding."""

from __future__ import annotations

import numpy as np
import pytest

import wiadsl
from tests.passes.test_pool_padding import padded_pool
from wiadsl.backends.llvm.compile import cpu_pipeline


def reference(x: np.ndarray, k: int, s: int, pads: tuple[int, int, int, int]) -> np.ndarray:
    pt, pl, pb, pr = pads
    p = np.pad(x, [(0, 0), (0, 0), (pt, pb), (pl, pr)], constant_values=-np.inf)
    ho, wo = (p.shape[2] - k) // s + 1, (p.shape[3] - k) // s + 1
    windows = [p[:, :, i:i + s * (ho - 1) + 1:s, j:j + s * (wo - 1) + 1:s] for i in range(k) for j in range(k)]
    return np.max(np.stack(windows), axis=0)


def test_the_cpu_pipeline_folds_pool_padding() -> None:
    assert "fold-pool-padding" in cpu_pipeline(2).split(",")


@pytest.mark.parametrize("n,c,h,w,k,s,pads", [
    (1, 64, 33, 33, 3, 2, (1, 1, 1, 1)),   # ResNet's stem pool at an odd size
    (2, 3, 7, 129, 3, 2, (1, 1, 1, 1)),    # rows wider than several vectors
    (1, 1, 1, 1, 3, 1, (1, 1, 1, 1)),      # one pixel
    (3, 2, 9, 9, 3, 2, (0, 0, 1, 1)),      # end padding only (ceil_mode)
    (1, 5, 8, 17, 2, 2, (1, 0, 0, 1)),     # asymmetric, 2x2
    (1, 2, 6, 5, 3, 3, (2, 2, 2, 2)),      # stride 3
    (1, 4, 16, 16, 3, 1, (1, 1, 1, 1)),    # stride 1 (same extents)
])
@pytest.mark.parametrize("dtype", ["f32", "f64", "f16"])
def test_padded_max_pool_matches_numpy(n, c, h, w, k, s, pads, dtype) -> None:
    fn = wiadsl.jit(padded_pool(c, h, w, k, s, pads, dtype), kernel="pool", target="cpu")
    x = np.random.default_rng(h * w + c).standard_normal((n, c, h, w)).astype(dtype.replace("f", "float"))
    x.flat[::11] = np.nan
    x.flat[3::13] = -np.inf
    x.flat[5::17] = np.inf
    np.testing.assert_array_equal(fn(x), reference(x, k, s, pads))
