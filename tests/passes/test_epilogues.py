"""bn-fold with constant inputs (``const_args``) and quantize epilogues in fusion."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

from wiadsl.diagnostics import WiaUsageError
from wiadsl.frontend.compile import compile_to_ir
from wiadsl.ir import parse_module, print_module, run_func
from wiadsl.passes import Remark, optimize, specialize_shapes
from wiadsl.passes.bn_fold import mark_const_args
from wiadsl.testing.filecheck import filecheck

ROOT = pathlib.Path(__file__).resolve().parents[2]


def cnn_inputs(func, rng) -> list[np.ndarray]:
    out = []
    for a in func.args:
        v = rng.standard_normal(a.type.shape).astype(np.float32)
        out.append(np.abs(v) + 0.5 if "var" in a.name_hint else v)
    return out


def test_bn_fold_on_cnn_with_weights_marked_constant() -> None:
    path = ROOT / "examples" / "cnn.wia"
    module = compile_to_ir(path.read_text(), str(path))
    func = module["forward_pass"]
    args = cnn_inputs(func, np.random.default_rng(1))
    args[-1] = args[-1] * np.float32(0.05)  # tame logits, so the softmax is not one-hot
    before = run_func(module, "forward_pass", args)
    mark_const_args(func, [a.name_hint for a in func.args if a.name_hint != "x"])
    remarks: list[Remark] = []
    optimize(module, 3, remarks=remarks)
    folded = [r for r in remarks if r.kind == "folded" and "constant-input weights" in r.message]
    assert len(folded) == 2 and {r.loc.line for r in folded} == {27, 31}
    text = print_module(module)
    # the activations see one bias add + relu; batch norm moved onto the weights
    assert text.count('kernel = "conv_bias_relu_fused"') == 2 and "conv_bn" not in text
    filecheck(text, "CHECK: %w_folded = tensor.mul %w1\nCHECK: tensor.fused_conv2d %x, %w_folded")
    after = run_func(module, "forward_pass", args)
    np.testing.assert_allclose(after[0], before[0], rtol=1e-4, atol=1e-6)


def test_bn_fold_needs_constant_inputs() -> None:
    path = ROOT / "examples" / "cnn.wia"
    module = compile_to_ir(path.read_text(), str(path))
    mark_const_args(module["forward_pass"], ["w1"])  # the batch-norm vectors are not marked
    optimize(module, pipeline="inline,canonicalize,bn-fold")
    assert "w_folded" not in print_module(module)
    with pytest.raises(WiaUsageError, match="no parameter"):
        mark_const_args(module["forward_pass"], ["nope"])


CONV_BN = """kernel cbn(input x: f32[2, 3, 6, 6], input w: f32[4, 3, 3, 3], input mean: f32[4],
          input var: f32[4], input gamma: f32[4], input beta: f32[4], output y: f32[2, 4, 4, 4]) {
    y = nn.batch_norm(conv2d(x, w), mean, var, gamma, beta);
}
"""


def test_bn_fold_constant_inputs_via_shape_specialize_matches_unfolded() -> None:
    module = compile_to_ir("import nn;\n" + CONV_BN, "cbn.wia")
    rng = np.random.default_rng(2)
    args = cnn_inputs(module["cbn"], rng)
    before = run_func(module, "cbn", args)
    specialize_shapes(module, "cbn", [None] * 6, const_args=["w", "mean", "var", "gamma", "beta"])
    optimize(module, pipeline="inline,canonicalize,bn-fold,canonicalize,dce")
    text = print_module(module)
    assert "tensor.sub" not in text.split("tensor.conv2d")[1]  # no affine chain after the conv
    np.testing.assert_allclose(run_func(module, "cbn", args)[0], before[0], rtol=1e-4, atol=1e-5)


QUANT_MM = """func @q(%a: tensor<4x6xf32>, %w: tensor<6x5xf32>, %b: tensor<5xf32>, %s: f32, %zp: i64) -> (tensor<4x5xi8>, tensor<4x5xf32>) {
^entry:
  %h = tensor.matmul %a, %w : (tensor<4x6xf32>, tensor<6x5xf32>) -> tensor<4x5xf32>
  %hb = tensor.add %h, %b : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  %r = tensor.relu %hb : tensor<4x5xf32>
  %q = tensor.quantize %r, %s, %zp : (tensor<4x5xf32>, f32, i64) -> tensor<4x5xi8>
  %g = tensor.mul %a, %a : tensor<4x6xf32>
  %u = tensor.reduce_sum %g {axes = [1], keepdims} : tensor<4x6xf32> -> tensor<4x1xf32>
  %f = tensor.fake_quant %u, %s, %zp : (tensor<4x1xf32>, f32, i64) -> tensor<4x1xf32>
  %o = tensor.add %f, %h : (tensor<4x1xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  return %q, %o : tensor<4x5xi8>, tensor<4x5xf32>
}"""


def test_quantize_epilogue_fuses_into_matmul_bit_exactly() -> None:
    module = parse_module(QUANT_MM.replace("%o = tensor.add %f, %h", "%o = tensor.add %f, %f2").replace(
        "  %g = tensor.mul", "  %f2 = tensor.exp %a : tensor<4x6xf32>\n  %g = tensor.mul").replace(
        "(tensor<4x1xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>", "(tensor<4x1xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>").replace(
        "tensor<4x5xi8>, tensor<4x5xf32>", "tensor<4x5xi8>, tensor<4x6xf32>"))
    rng = np.random.default_rng(3)
    # values on .5 boundaries check round-half-to-even; large ones check the clamp
    a = (rng.integers(-8, 12, (4, 6)) / 4).astype(np.float32)
    w = (rng.integers(-3, 12, (6, 5))).astype(np.float32)
    args = [a, w, (rng.integers(-4, 4, 5) / 4).astype(np.float32), np.float32(0.5), np.int64(100)]
    before = run_func(module, "q", args)
    optimize(module, pipeline="fuse")
    text = print_module(module)
    filecheck(text, """
CHECK: %q = tensor.fused_matmul %a, %w, %b, %s, %zp {kernel = "matmul_bias_relu_quantize_fused"}
CHECK: arith.rint
CHECK: arith.cast {{.*}} : f32 -> i8
CHECK: yield {{.*}} : i8
CHECK: tensor.fused_reduce""")
    assert "tensor.quantize" not in text and "tensor.fake_quant" not in text
    after = run_func(module, "q", args)
    for x, y in zip(before, after, strict=True):
        assert x.dtype == y.dtype
        np.testing.assert_array_equal(y, x)
    r = np.maximum(a @ w + args[2], 0)
    assert (r / 0.5 % 1 == 0.5).any() and (r / 0.5 + 100 > 127).any()  # ties and the clamp were exercised


def test_requantize_int_matmul_epilogue() -> None:
    ir = """func @rq(%a: tensor<3x4xi32>, %w: tensor<4x2xi32>, %s: f32, %zp: i64) -> tensor<3x2xi8> {
^entry:
  %acc = tensor.matmul %a, %w : (tensor<3x4xi32>, tensor<4x2xi32>) -> tensor<3x2xi32>
  %f = tensor.cast %acc : tensor<3x2xi32> -> tensor<3x2xf32>
  %q = tensor.quantize %f, %s, %zp : (tensor<3x2xf32>, f32, i64) -> tensor<3x2xi8>
  return %q : tensor<3x2xi8>
}"""
    module = parse_module(ir)
    rng = np.random.default_rng(4)
    args = [rng.integers(-20, 20, (3, 4)).astype(np.int32), rng.integers(-20, 20, (4, 2)).astype(np.int32),
            np.float32(4.0), np.int64(-1)]
    before = run_func(module, "rq", args)
    optimize(module, pipeline="fuse")
    text = print_module(module)
    assert 'tensor.fused_matmul %a, %w, %s, %zp {kernel = "matmul_cast_quantize_fused"}' in text
    np.testing.assert_array_equal(run_func(module, "rq", args)[0], before[0])
