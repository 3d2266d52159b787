"""A -O2 ``fused_matmul`` (``x @ w + b``) whose elementwise consumer becomes the tile
kernel's epilogue keeps its own body: the bias was dropped there (issue 22, found once
the ptxsim target ran the -O2 pipeline; examples/mlp.wia's mlp_gelu was off by 3.3)."""

from __future__ import annotations

import numpy as np
import pytest

from wiadsl.runtime.jit import jit

RNG = np.random.default_rng(5)
SRC = """kernel k(input x: f32[B, I], input w: f32[I, H], input b: f32[H], output y: f32[B, H]) {
    h = x @ w + b;
    y = h * h * 0.5 + tanh(h);
}
"""


@pytest.mark.parametrize("level", [0, 2, 3])
def test_bias_then_elementwise_epilogue(level: int) -> None:
    x = RNG.standard_normal((6, 7)).astype(np.float32)
    w = RNG.standard_normal((7, 9)).astype(np.float32)
    b = RNG.standard_normal(9).astype(np.float32) * 4  # large enough that dropping it shows
    fn = jit(SRC, "k", target="ptxsim", opt_level=level)
    h = x.astype(np.float64) @ w + b
    np.testing.assert_allclose(fn(x, w, b), h * h * 0.5 + np.tanh(h), rtol=2e-5, atol=2e-5)
    assert fn.stats["kernels"] == 1  # the whole chain is the matmul's epilogue


INT_SRC = """kernel k(input qa: i8[M, K], input qb: i8[K, N], input c: i32[N], input d: f32[N],
         output y: f32[M, N]) {
    y = cast(cast(qa, i32) @ cast(qb, i32) - c, f32) * 0.5 + d;
}
"""


@pytest.mark.parametrize("level", [0, 2, 3])
def test_integer_product_with_a_float_result(level: int) -> None:
    """-O2 makes this one fused_matmul whose result (f32) is not its product's type (i32):
    the tile kernel accumulates in i32 (it used f32, and read the accumulator as f32 in
    an i32 subtraction: ONNX qdq_matmul on ptxsim was off by 6.5), and the i8 operands
    are widened while loading (no copy kernel)."""
    qa = RNG.integers(-128, 128, (5, 40)).astype(np.int8)
    qb = RNG.integers(-128, 128, (40, 9)).astype(np.int8)
    c = RNG.integers(-1000, 1000, 9).astype(np.int32)
    d = RNG.standard_normal(9).astype(np.float32)
    fn = jit(INT_SRC, "k", target="ptxsim", opt_level=level)
    want = (qa.astype(np.int64) @ qb.astype(np.int64) - c).astype(np.float32) * np.float32(0.5) + d
    np.testing.assert_array_equal(fn(qa, qb, c, d), want)
    assert fn.stats["kernels"] == 1
