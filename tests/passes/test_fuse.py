"""IR-text tests for ``fuse``, ``bn-fold``, ``patterns``, ``plan-memory`` and
``shape-specialize``, plus the seed's done-when programs."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

from wiadsl.diagnostics import WiaUsageError
from wiadsl.frontend.compile import compile_to_ir
from wiadsl.ir import parse_module, print_module, run_func, verify
from wiadsl.passes import Remark, optimize, specialize_shapes
from wiadsl.rewrite.declarative import load_patterns
from wiadsl.testing.filecheck import filecheck

from .helpers import check, run_pipeline

ROOT = pathlib.Path(__file__).resolve().parents[2]

MLP = """func @f(%x: tensor<?x?xf32>, %w: tensor<?x?xf32>, %b: tensor<?xf32>) -> tensor<?x?xf32> attributes {kernel, arg_dims = [["M", "K"], ["K", "N"], ["N"]]} {
^entry:
  %h = tensor.matmul %x, %w : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
  %hb = tensor.add %h, %b : (tensor<?x?xf32>, tensor<?xf32>) -> tensor<?x?xf32>
  %r = tensor.relu %hb : tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}"""


def test_matmul_epilogue() -> None:
    check(MLP, "fuse", """
CHECK: %r = tensor.fused_matmul %x, %w, %b {kernel = "matmul_bias_relu_fused"}
CHECK-NEXT: ^bb0(%{{\\w+}}: f32, %{{\\w+}}: f32):
CHECK: arith.add
CHECK-NEXT: arith.relu
CHECK-NEXT: yield
CHECK-NOT: tensor.matmul""")


def test_not_fused_with_two_consumers_gives_remark() -> None:
    ir = MLP.replace("return %r : tensor<?x?xf32>", "%s = tensor.add %r, %hb : tensor<?x?xf32>\n  return %s : tensor<?x?xf32>")
    remarks: list[Remark] = []
    m = parse_module(ir)
    optimize(m, pipeline="fuse", remarks=remarks)
    texts = [r.message for r in remarks]
    assert any("%hb has 2 consumers" in t for t in texts), texts
    filecheck(print_module(m), 'CHECK: tensor.fused_matmul %x, %w, %b {kernel = "matmul_bias_fused"}')


def test_vertical_and_horizontal_elementwise() -> None:
    out = check("""func @f(%x: tensor<4x5xf32>, %y: tensor<5xf32>) -> (tensor<4x5xf32>, tensor<4x5xf32>) {
^entry:
  %a = tensor.mul %x, %y : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  %b = tensor.exp %a : tensor<4x5xf32>
  %c = tensor.abs %x : tensor<4x5xf32>
  %d = tensor.sqrt %c : tensor<4x5xf32>
  return %b, %d : tensor<4x5xf32>, tensor<4x5xf32>
}""", "fuse", """
CHECK: %b, %d = tensor.fused_elementwise %x, %y {kernel = "mul_exp_fused+abs_sqrt_fused"}
CHECK: yield {{.*}}, {{.*}} : f32, f32""")
    assert out.count("fused_elementwise") == 1


def test_escaping_intermediate_not_fused() -> None:
    remarks: list[Remark] = []
    m = parse_module("""func @f(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
^entry:
  %a = tensor.exp %x : tensor<4xf32>
  %b = tensor.neg %a : tensor<4xf32>
  return %a, %b : tensor<4xf32>, tensor<4xf32>
}""")
    optimize(m, pipeline="fuse", remarks=remarks)
    assert "fused_elementwise" not in print_module(m)
    assert any("escapes" in r.message for r in remarks)


SOFTMAX_LINEAR = """
import nn;
kernel head(input x: f32[B, I], input w: f32[I, O], input b: f32[O], output y: f32[B, O]) {
    y = nn.softmax(x @ w + b);
}
"""


def kernels_in(text: str) -> int:
    """Ops that launch work: everything but constants, views, returns and branches."""
    skip = ("arith.", "tensor.constant", "tensor.reshape", "tensor.dim", "func.return", "cf.", "yield")
    body = [line.strip() for line in text.splitlines() if " = " in line or line.strip().startswith("return")]
    return sum(1 for line in body if line.startswith("%") and line.split(" = ", 1)[1].split(" ")[0]
               .startswith("tensor.") and not line.split(" = ", 1)[1].startswith(skip)
               and not line.startswith("  "))


def test_softmax_of_linear_is_at_most_three_kernels() -> None:
    m = compile_to_ir(SOFTMAX_LINEAR, "head.wia")
    optimize(m, 3)
    text = print_module(m)
    launches = [op.name for op in m["head"].walk() if op.name.startswith("tensor.fused")
                or op.name in ("tensor.matmul", "tensor.reduce_max", "tensor.reduce_sum",
                               "tensor.exp", "tensor.div", "tensor.sub", "tensor.add")]
    assert len(launches) <= 3, text
    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in [(3, 5), (5, 7), (7,)])
    z = x @ w + b
    e = np.exp(z - z.max(1, keepdims=True))
    np.testing.assert_allclose(run_func(m, "head", [x, w, b])[0], e / e.sum(1, keepdims=True), rtol=1e-5)


def test_cnn_fuses_conv_bn_relu() -> None:
    m = compile_to_ir((ROOT / "examples/cnn.wia").read_text(), "cnn.wia")
    optimize(m, 3)
    text = print_module(m)
    assert text.count('kernel = "conv_bn_relu_fused"') == 2, text
    assert "tensor.transpose" not in text and "tensor.conv2d" not in text


def test_conditional_with_constant_threshold_folds_to_one_path() -> None:
    m = compile_to_ir((ROOT / "examples/conditional.wia").read_text(), "conditional.wia")
    driver = parse_module("""func @main(%x: tensor<?x?xf32>) -> tensor<?x?xf32> attributes {kernel} {
^entry:
  %t = arith.constant inf : f32
  %y = func.call @conditional_compute(%x, %t) : (tensor<?x?xf32>, f32) -> tensor<?x?xf32>
  return %y : tensor<?x?xf32>
}""")
    m.add(driver.remove("main"))
    optimize(m, pipeline="inline,canonicalize,sccp,simplify-cfg,dce")
    filecheck(print_module(m), """
CHECK-LABEL: func @main
CHECK: ^entry:
CHECK-NOT: cond_br
CHECK-NOT: tensor.mul
CHECK: return %x""")


def test_bn_fold_into_constant_weights() -> None:
    ir = """func @f(%x: tensor<1x2x4x4xf32>) -> tensor<1x3x4x4xf32> {
^entry:
  %w = tensor.constant {value = dense<%W : tensor<3x2x1x1xf32>>} : tensor<3x2x1x1xf32>
  %m = tensor.constant {value = dense<[[[0.5]], [[1.0]], [[-1.0]]] : tensor<3x1x1xf32>>} : tensor<3x1x1xf32>
  %s = tensor.constant {value = dense<[[[2.0]], [[0.5]], [[4.0]]] : tensor<3x1x1xf32>>} : tensor<3x1x1xf32>
  %c = tensor.conv2d %x, %w {stride = [1, 1], padding = [0, 0]} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32>
  %d = tensor.sub %c, %m : (tensor<1x3x4x4xf32>, tensor<3x1x1xf32>) -> tensor<1x3x4x4xf32>
  %e = tensor.mul %d, %s : (tensor<1x3x4x4xf32>, tensor<3x1x1xf32>) -> tensor<1x3x4x4xf32>
  return %e : tensor<1x3x4x4xf32>
}""".replace("%W", "[[[[1.0]], [[2.0]]], [[[3.0]], [[4.0]]], [[[5.0]], [[6.0]]]]")
    m = parse_module(ir)
    x = np.random.default_rng(0).standard_normal((1, 2, 4, 4)).astype(np.float32)
    (want,) = run_func(m, "f", [x])
    out, _ = run_pipeline(ir, "bn-fold,dce")
    filecheck(out, """
CHECK: %w_folded = tensor.constant
CHECK: tensor.conv2d %x, %w_folded
CHECK-NEXT: %b_folded = tensor.constant
CHECK-NEXT: %e = tensor.add
CHECK-NOT: tensor.mul""")
    np.testing.assert_allclose(run_func(parse_module(out), "f", [x])[0], want, rtol=1e-5)


def test_declarative_pattern_builtin_and_user() -> None:
    ir = """func @f(%x: tensor<1x2x5x5xf32>, %w: tensor<3x2x3x3xf32>, %b: tensor<3x1x1xf32>) -> tensor<1x3x5x5xf32> {
^entry:
  %c = tensor.conv2d %x, %w {stride = [1, 1], padding = [1, 1]} : (tensor<1x2x5x5xf32>, tensor<3x2x3x3xf32>) -> tensor<1x3x5x5xf32>
  %a = tensor.add %c, %b : (tensor<1x3x5x5xf32>, tensor<3x1x1xf32>) -> tensor<1x3x5x5xf32>
  %o = tensor.relu %a : tensor<1x3x5x5xf32>
  return %o : tensor<1x3x5x5xf32>
}"""
    check(ir, "patterns", """
CHECK: %o = tensor.fused_conv2d %x, %w, %b {stride = [1, 1], padding = [1, 1], kernel = "conv_bias_relu_fused"}
CHECK-NOT: tensor.conv2d""")
    user = load_patterns("""pattern ExpNeg {
  match: %e = exp(%x); %n = neg(%e)
  rewrite: %n = fused_negexp(%x)
}""")
    m = parse_module("""func @g(%x: tensor<3xf32>) -> tensor<3xf32> {
^entry:
  %e = tensor.exp %x : tensor<3xf32>
  %n = tensor.neg %e : tensor<3xf32>
  return %n : tensor<3xf32>
}""")
    optimize(m, pipeline="patterns{builtin=false}", patterns=user)
    filecheck(print_module(m), 'CHECK: %n = tensor.fused_elementwise %x {kernel = "negexp_fused"}')


def test_pattern_errors() -> None:
    with pytest.raises(WiaUsageError, match="unknown op 'conv3d'"):
        load_patterns("pattern P { match: %a = conv3d(%x); rewrite: %a = %x }")
    with pytest.raises(WiaUsageError, match="cannot parse"):
        load_patterns("pattern P { match %a }")


def test_plan_memory_reuses_dead_buffers() -> None:
    out, _ = run_pipeline("""func @f(%x: tensor<64xf32>) -> tensor<64xf32> {
^entry:
  %a = tensor.exp %x : tensor<64xf32>
  %b = tensor.neg %a : tensor<64xf32>
  %c = tensor.exp %b : tensor<64xf32>
  %d = tensor.neg %c : tensor<64xf32>
  return %d : tensor<64xf32>
}""", "plan-memory")
    filecheck(out, """
CHECK: peak_bytes_before = 768, peak_bytes_after = 512
CHECK: %a = tensor.exp %x {buffer = 0}
CHECK: %b = tensor.neg %a {buffer = 1}
CHECK: %c = tensor.exp %b {buffer = 0}""")


def test_shape_specialize_folds_dims() -> None:
    ir = """func @f(%x: tensor<?x?xf32>) -> index attributes {kernel} {
^entry:
  %e = tensor.exp %x : tensor<?x?xf32>
  %d = tensor.dim %e {axis = 1} : tensor<?x?xf32> -> index
  return %d : index
}"""
    check(ir, "shape-specialize{shapes=3x5}", """
CHECK: func @f(%x: tensor<3x5xf32>) -> index
CHECK: arith.constant 5 : index""")
    m = parse_module(ir)
    specialize_shapes(m, "f", [(4, 7)])
    verify(m)
    assert "tensor<4x7xf32>" in print_module(m)
