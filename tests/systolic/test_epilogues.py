"""Fused epilogues on the vector unit: bias, relu, gelu, requantize; fused IR ops."""

from __future__ import annotations

import numpy as np
import pytest

from wiadsl.backends.systolic.config import ArrayConfig
from wiadsl.backends.systolic.kernel import SystolicKernel
from wiadsl.ir import parse_module, run_func

from .conftest import both

EPI = """
import nn;
kernel bias_relu(input x: f32[M, K], input w: f32[K, N], input b: f32[N], output y: f32[M, N]) {
    y = relu(x @ w + b);
}
kernel bias_gelu(input x: f32[M, K], input w: f32[K, N], input b: f32[N], output y: f32[M, N]) {
    y = nn.gelu(x @ w + b);
}
kernel requant(input qx: i8[M, K], input qw: i8[K, N], input s: f32, output q: i8[M, N]) {
    acc = cast(qx, i32) @ cast(qw, i32);
    q = quantize(cast(acc, f32) * s, 0.5, 3);
}
kernel rowscale(input x: f32[M, K], input w: f32[K, N], input r: f32[M, 1], output y: f32[M, N]) {
    y = (x @ w) * r - 1.0;
}
"""


@pytest.mark.parametrize("array", [(8, 8), (32, 32), (128, 128)])
@pytest.mark.parametrize("dataflow", ["ws", "os", "is"])
@pytest.mark.parametrize("mkn", [(7, 33, 129), (129, 7, 33)])
def test_float_epilogues(array, dataflow, mkn, rng):
    m, k, n = mkn
    x, w = rng.standard_normal((m, k), np.float32), rng.standard_normal((k, n), np.float32)
    b = rng.standard_normal(n, np.float32)
    for kernel in ("bias_relu", "bias_gelu"):
        out, ref, stats = both(EPI, kernel, x, w, b, array=array, dataflow=dataflow)
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
        assert stats["sections"] == {"array": 1}, kernel  # the epilogue fused, no host op
    r = rng.standard_normal((m, 1), np.float32)
    out, ref, stats = both(EPI, "rowscale", x, w, r, array=array, dataflow=dataflow)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    assert stats["sections"] == {"array": 1}


@pytest.mark.parametrize("dataflow", ["ws", "os", "is"])
def test_requantize_is_bit_exact(dataflow, rng):
    qx = rng.integers(-128, 128, (33, 129)).astype(np.int8)
    qw = rng.integers(-128, 128, (129, 7)).astype(np.int8)
    out, ref, stats = both(EPI, "requant", qx, qw, np.float32(0.003), array=(32, 32),
                           dataflow=dataflow)
    assert np.array_equal(out, ref) and out.dtype == np.int8
    assert stats["sections"] == {"array": 1}


FUSED_IR = """
func @k(%a: tensor<7x33xf32>, %b: tensor<33x129xf32>, %bias: tensor<129xf32>) -> tensor<7x129xf32> attributes {kernel, outputs = ["y"]} {
^entry:
  %y = tensor.fused_matmul %a, %b, %bias {kernel = "bias_relu"} : (tensor<7x33xf32>, tensor<33x129xf32>, tensor<129xf32>) -> tensor<7x129xf32> {
  ^bb0(%acc: f32, %c: f32):
    %s = arith.add %acc, %c : f32
    %z = arith.constant 0.5 : f32
    %m = arith.mul %s, %z : f32
    %r = arith.relu %m : f32
    yield %r : f32
  }
  return %y : tensor<7x129xf32>
}
"""


@pytest.mark.parametrize("dataflow", ["ws", "os", "is"])
def test_fused_matmul_op_runs_body_on_vector_unit(dataflow, rng):
    module = parse_module(FUSED_IR)
    args = [rng.standard_normal(s, np.float32) for s in ((7, 33), (33, 129), (129,))]
    kernel = SystolicKernel(module, "k", ArrayConfig(8, 8, dataflow, vec_lanes=8))
    out = kernel.run(args)[0]
    np.testing.assert_allclose(out, run_func(module, "k", args)[0], rtol=1e-4, atol=1e-4)
    assert kernel.stats["sections"] == {"array": 1}
    text = kernel.listing().text()
    assert "vec.relu" in text and "vec.mul" in text
