"""The seed's SSA examples (§5.2.1): conditional_compute and forward_pass, lowered from
examples/conditional.wia and examples/cnn.wia."""

from __future__ import annotations

from pathlib import Path

from tests.lowering.helpers import NUM, check

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_conditional_compute_branches_and_joins_with_a_block_argument():
    src = (EXAMPLES / "conditional.wia").read_text()
    check(src, f"""
    CHECK-LABEL: func @conditional_compute(%x: tensor<?x?xf32>, %threshold: f32) -> tensor<?x?xf32> attributes {{kernel, outputs = ["y"], arg_dims = [["M", "N"], []]}}
    CHECK-NEXT:  ^entry:
    CHECK-NEXT:    {NUM} = tensor.abs %x : tensor<?x?xf32>
    CHECK-NEXT:    %norm = tensor.reduce_sum {NUM} {{axes = [0, 1]}} : tensor<?x?xf32> -> f32
    CHECK-NEXT:    {NUM} = arith.cmpf ogt, %norm, %threshold : f32
    CHECK-NEXT:    cond_br {NUM}, ^then, ^else
    CHECK-NEXT:  ^then:
    CHECK-NEXT:    {NUM} = tensor.mul %x, %x : tensor<?x?xf32>
    CHECK-NEXT:    br ^join({NUM} : tensor<?x?xf32>)
    CHECK-NEXT:  ^else:
    CHECK-NEXT:    br ^join(%x : tensor<?x?xf32>)
    CHECK-NEXT:  ^join(%y: tensor<?x?xf32>):
    CHECK-NEXT:    return %y : tensor<?x?xf32>
    CHECK-NEXT:  }}
    """)


def test_forward_pass_is_a_chain_of_ops_and_calls():
    src = (EXAMPLES / "cnn.wia").read_text()
    check(src, """
    CHECK-LABEL: func @forward_pass(%x: tensor<1x3x16x16xf32>, %w1: tensor<8x3x3x3xf32>
    CHECK-SAME:  -> tensor<1x10xf32> attributes {kernel, outputs = ["y"], arg_dims = [
    CHECK:   %h0 = tensor.conv2d %x, %w1 {stride = [1, 1], padding = [1, 1]} : (tensor<1x3x16x16xf32>, tensor<8x3x3x3xf32>) -> tensor<1x8x16x16xf32>
    CHECK-NEXT: %h1 = func.call @nn.batch_norm(%h0, %bn1_mean, %bn1_var, %bn1_gamma, %bn1_beta) : (tensor<1x8x16x16xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<1x8x16x16xf32>
    CHECK-NEXT: %h2 = tensor.relu %h1 : tensor<1x8x16x16xf32>
    CHECK-NEXT: %h3 = tensor.max_pool %h2 {kernel = [2, 2], stride = [2, 2]} : tensor<1x8x16x16xf32> -> tensor<1x8x8x8xf32>
    CHECK-NEXT: %h4 = tensor.conv2d %h3, %w2 {stride = [1, 1], padding = [1, 1]} : (tensor<1x8x8x8xf32>, tensor<16x8x3x3xf32>) -> tensor<1x16x8x8xf32>
    CHECK-NEXT: %h5 = func.call @nn.batch_norm.1(%h4, %bn2_mean, %bn2_var, %bn2_gamma, %bn2_beta)
    CHECK-SAME: -> tensor<1x16x8x8xf32>
    CHECK-NEXT: %h6 = tensor.relu %h5 : tensor<1x16x8x8xf32>
    CHECK-NEXT: %h7 = tensor.reshape %h6 : tensor<1x16x8x8xf32> -> tensor<1x1024xf32>
    CHECK-NEXT: %h8 = tensor.matmul %h7, %fc : (tensor<1x1024xf32>, tensor<1024x10xf32>) -> tensor<1x10xf32>
    CHECK-NEXT: %y = func.call @nn.softmax(%h8) : (tensor<1x10xf32>) -> tensor<1x10xf32>
    CHECK-NEXT: return %y : tensor<1x10xf32>

    CHECK-LABEL: func @nn.batch_norm(%x: tensor<1x8x16x16xf32>
    CHECK-NOT:   func.call
    CHECK:       %xt = tensor.transpose %x {perm = [0, 2, 3, 1]} : tensor<1x8x16x16xf32> -> tensor<1x16x16x8xf32>
    CHECK:       arith.constant 1e-05 : f32
    CHECK:       tensor.rsqrt
    CHECK:       tensor.transpose %yt {perm = [0, 3, 1, 2]}

    CHECK-LABEL: func @nn.batch_norm.1(%x: tensor<1x16x8x8xf32>
    CHECK-LABEL: func @nn.softmax(%x: tensor<1x10xf32>) -> tensor<1x10xf32> {
    CHECK-NEXT:  ^entry:
    CHECK-NEXT:    %m = tensor.reduce_max %x {axes = [1], keepdims} : tensor<1x10xf32> -> tensor<1x1xf32>
    CHECK-NEXT:    {{%[0-9]+}} = tensor.sub %x, %m : (tensor<1x10xf32>, tensor<1x1xf32>) -> tensor<1x10xf32>
    CHECK-NEXT:    %e = tensor.exp {{%[0-9]+}} : tensor<1x10xf32>
    CHECK-NEXT:    {{%[0-9]+}} = tensor.reduce_sum %e {axes = [1], keepdims}
    CHECK-NEXT:    {{%[0-9]+}} = tensor.div %e, {{%[0-9]+}}
    CHECK-NEXT:    return
    """)
