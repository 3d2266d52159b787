"""Elementwise max/min against a constant (relu, a clip's bounds) on the CPU: NumPy's
``maximum`` / ``minimum`` bit for bit, NaN and the sign of zero included (NumPy gives
the second operand where they compare equal: ``maximum(0.0, -0.0)`` is -0.0)
(backends/llvm/scalars.py ``_extreme``: one compare and select, a single vmaxps or
vminps on x86), through the vector loop and its scalar remainder."""

import numpy as np
import pytest

import wiadsl

SRC = """
kernel k(input x: f32[N], output relu_x: f32[N], output max_xc: f32[N], output max_cx: f32[N],
         output min_xc: f32[N], output min_cx: f32[N], output clip: f32[N],
         output max_x0: f32[N], output min_0x: f32[N], output max_0x: f32[N],
         output min_x0: f32[N]) {
    relu_x = relu(x);
    max_xc = max(x, 1.5);
    max_cx = max(1.5, x);
    min_xc = min(x, -2.0);
    min_cx = min(-2.0, x);
    clip = min(max(x, 0.0), 6.0);
    max_x0 = max(x, 0.0);
    min_0x = min(0.0, x);
    max_0x = max(0.0, x);
    min_x0 = min(x, 0.0);
}
"""

SPECIAL = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5, -2.0, 6.0, 7.0, -1e-45, 1e-45,
           3.4e38, -3.4e38]


def numpy_results(x: np.ndarray) -> list[np.ndarray]:
    c = np.float32
    return [np.maximum(x, c(0)), np.maximum(x, c(1.5)), np.maximum(c(1.5), x),
            np.minimum(x, c(-2.0)), np.minimum(c(-2.0), x),
            np.minimum(np.maximum(x, c(0)), c(6)), np.maximum(x, c(0)), np.minimum(c(0), x),
            np.maximum(c(0), x), np.minimum(x, c(0))]


@pytest.mark.parametrize("n", [1, 7, 14, 33, 129])
def test_max_and_min_with_a_constant_are_numpys_bit_for_bit(n: int) -> None:
    mod = wiadsl.jit(SRC, kernel="k", target="cpu")
    rng = np.random.default_rng(n)
    x = rng.choice(np.array(SPECIAL, np.float32), n).astype(np.float32)
    x[::3] = rng.standard_normal(len(x[::3])).astype(np.float32)
    got = mod(x)
    for name, g, want in zip(("relu", "max(x, 1.5)", "max(1.5, x)", "min(x, -2)", "min(-2, x)",
                              "clip", "max(x, 0)", "min(0, x)", "max(0, x)", "min(x, 0)"), got, numpy_results(x), strict=True):
        # bit for bit: NaN where NumPy has NaN, -0.0 where NumPy keeps -0.0
        np.testing.assert_array_equal(np.isnan(g), np.isnan(want), err_msg=name)
        finite = ~np.isnan(want)
        np.testing.assert_array_equal(g[finite].view(np.int32), want[finite].view(np.int32),
                                      err_msg=f"{name} on {x[finite]}")
