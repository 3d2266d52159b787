"""The fused ops: text round trip, verifier errors, and NumPy semantics."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

from wiadsl.diagnostics import WiaIRError
from wiadsl.ir import parse_module, print_module, run_func, verify

CORPUS = (pathlib.Path(__file__).parent / "fused_corpus.ir").read_text()
RNG = np.random.default_rng(0)


def test_roundtrip_every_fused_op() -> None:
    module = parse_module(CORPUS)
    verify(module)
    printed = print_module(module)
    assert printed.strip() == CORPUS.strip()
    assert print_module(parse_module(printed)) == printed
    names = {op.name for f in module for op in f.walk()}
    assert {"tensor.fused_elementwise", "tensor.fused_reduce", "tensor.fused_matmul",
            "tensor.fused_conv2d", "tensor.fused_depthwise_conv2d"} <= names


def test_elementwise_semantics_broadcast() -> None:
    m = parse_module(CORPUS)
    a = RNG.standard_normal((3, 5)).astype(np.float32)
    b = RNG.standard_normal(5).astype(np.float32)
    (r,) = run_func(m, "f", [a, b, np.float32(2)])
    np.testing.assert_allclose(r, np.maximum((a + b) * 2, 0), rtol=1e-6)


def test_reduce_with_epilogue_is_softmax() -> None:
    m = parse_module(CORPUS)
    a = RNG.standard_normal((3, 5)).astype(np.float32)
    s, y = run_func(m, "g", [a])
    e = np.exp(a - a.max(1, keepdims=True))
    np.testing.assert_allclose(s, e.sum(1, keepdims=True), rtol=1e-6)
    np.testing.assert_allclose(y, e / e.sum(1, keepdims=True), rtol=1e-6)


def test_matmul_requantize_epilogue_changes_dtype() -> None:
    m = parse_module(CORPUS)
    a = (RNG.standard_normal((2, 3)) * 10).astype(np.float32)
    b = RNG.standard_normal((3, 4)).astype(np.float32)
    bias = RNG.standard_normal(4).astype(np.float32)
    (c,) = run_func(m, "h", [a, b, bias])
    assert c.dtype == np.int8
    np.testing.assert_array_equal(c, (a @ b + bias).astype(np.int8))


def test_depthwise_bias_relu() -> None:
    m = parse_module(CORPUS)
    x = RNG.standard_normal((3, 2, 5, 5)).astype(np.float32)
    w = RNG.standard_normal((3, 3, 2)).astype(np.float32)
    bias = RNG.standard_normal((2, 1, 1)).astype(np.float32)
    (y,) = run_func(m, "dw", [x, w, bias])
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = sum(xp[:, :, i:i + 5:2, j:j + 5:2] * w[i, j].reshape(-1, 1, 1)
               for i in range(3) for j in range(3))
    np.testing.assert_allclose(y, np.maximum(want + bias, 0), rtol=1e-5, atol=1e-6)


def test_conv_bias_relu() -> None:
    m = parse_module(CORPUS)
    x = RNG.standard_normal((1, 2, 5, 5)).astype(np.float32)
    w = RNG.standard_normal((3, 2, 3, 3)).astype(np.float32)
    bias = RNG.standard_normal((3, 1, 1)).astype(np.float32)
    (y,) = run_func(m, "k", [x, w, bias])
    ref = parse_module("""func @c(%x: tensor<1x2x5x5xf32>, %w: tensor<3x2x3x3xf32>) -> tensor<1x3x5x5xf32> {
^entry:
  %y = tensor.conv2d %x, %w {stride = [1, 1], padding = [1, 1]} : (tensor<1x2x5x5xf32>, tensor<3x2x3x3xf32>) -> tensor<1x3x5x5xf32>
  return %y : tensor<1x3x5x5xf32>
}""")
    (c,) = run_func(ref, "c", [x, w])
    np.testing.assert_allclose(y, np.maximum(c + bias, 0), rtol=1e-5, atol=1e-6)


BAD = {
    "not isolated": ("""func @f(%a: tensor<4xf32>, %s: f32) -> tensor<4xf32> {
^entry:
  %r = tensor.fused_elementwise %a : tensor<4xf32> {
  ^bb0(%x: f32):
    %0 = arith.add %x, %s : f32
    yield %0 : f32
  }
  return %r : tensor<4xf32>
}""", "isolated from above"),
    "wrong body args": ("""func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
^entry:
  %r = tensor.fused_elementwise %a : tensor<4xf32> {
  ^bb0(%x: f64):
    yield %x : f64
  }
  return %r : tensor<4xf32>
}""", r"expects \(f32\)"),
    "tensor op in body": ("""func @f(%a: tensor<4xf32>, %t: tensor<4xf32>) -> tensor<4xf32> {
^entry:
  %r = tensor.fused_elementwise %a : tensor<4xf32> {
  ^bb0(%x: f32):
    %0 = arith.constant 1.0 : f32
    %1 = tensor.dim %x {axis = 0} : f32 -> index
    yield %0 : f32
  }
  return %r : tensor<4xf32>
}""", "scalar arith ops"),
    "yield outside": ("""func @f(%a: f32) -> f32 {
^entry:
  yield %a : f32
}""", "must end the body of a fused op"),
    "bad kind": ("""func @f(%a: tensor<4xf32>) -> f32 {
^entry:
  %r = tensor.fused_reduce %a {kind = "avg", axes = [0]} : tensor<4xf32> -> f32 {
  ^bb0(%x: f32):
    yield %x : f32
  }
  return %r : f32
}""", "reduction kind"),
    "epilogue grows": ("""func @f(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>, %e: tensor<5x2x4xf32>) -> tensor<2x4xf32> {
^entry:
  %c = tensor.fused_matmul %a, %b, %e : (tensor<2x3xf32>, tensor<3x4xf32>, tensor<5x2x4xf32>) -> tensor<2x4xf32> {
  ^bb0(%acc: f32, %x: f32):
    yield %acc : f32
  }
  return %c : tensor<2x4xf32>
}""", "broadcast into the product shape"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_verifier_rejects(case: str) -> None:
    text, message = BAD[case]
    with pytest.raises(WiaIRError, match=message):
        verify(parse_module(text))
