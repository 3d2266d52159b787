"""Fuzz seed 33000000145: ``in0 - fake_quant(in0, 0.05, 3)`` at ``in0 = 0.75`` is 0 in
NumPy (the dequantized 0.75000001 rounds to 0.75 in f32), but the CPU backend gave
-1.1e-08 at -O0, and ``t < t / 3.0`` on it came out true.

Cause: the dequantize product ``(q - zp) * scale`` carried LLVM's ``contract`` flag, as
every float add and mul does, so LLVM fused it with the subtraction that consumed it
into one FMA, skipping the product's rounding. Fixed where both lowerings expand
dequantize (loops/scalar.py, passes/fusion_body.py): the product is ``exact``, which
the CPU backend emits without ``contract`` (as the quantized GEMM's epilogue does).
"""

from __future__ import annotations

import numpy as np
import pytest

import wiadsl

SRC = """
kernel residual(input x: f32[N], output r: f32[N], output below: bool[N]) {
    r = x - fake_quant(x, 0.05, 3);
    below = r < r / 3.0;
}
"""


def reference(x: np.ndarray) -> np.ndarray:
    scale = np.float32(0.05)
    q = np.clip(np.rint(x / scale) + np.float32(3), -128, 127).astype(np.int8)
    return x - (q.astype(np.float32) - np.float32(3)) * scale


@pytest.mark.parametrize("target,level", [("interp", None), ("cpu", 0), ("cpu", 3)])
def test_the_residual_of_fake_quant_rounds_as_numpy(target: str, level: int | None) -> None:
    options = {} if level is None else {"opt_level": level}
    k = wiadsl.jit(SRC, "residual", target=target, **options)
    x = np.concatenate([[0.75], np.linspace(-6, 6, 4001)]).astype(np.float32)
    r, below = k(x)
    want = reference(x)
    np.testing.assert_array_equal(r, want)  # bit for bit: no FMA anywhere
    np.testing.assert_array_equal(below, want < want / np.float32(3))
    assert r[0] == 0.0 and not below[0]
