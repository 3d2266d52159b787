"""The stdlib called with `axis=` / `eps=` fuses as tightly as with its defaults, and
`nn.attention` takes its scale from `dim` (no reduction of ones): checked on the -O2 IR."""

from __future__ import annotations

from wiadsl.frontend.compile import compile_to_ir
from wiadsl.ir import print_module
from wiadsl.passes import optimize
from wiadsl.testing.filecheck import filecheck


def optimized(body: str, params: str = "input x: f32[M, N]", imports: str = "nn") -> str:
    src = f"import {imports};\nkernel k({params}, output y: f32[M, N]) {{ y = {body}; }}"
    m = compile_to_ir(src, "k.wia")
    optimize(m, 2)
    return print_module(m)


def op_names(text: str) -> list[str]:
    return [line.split(" = ", 1)[1].split(" ")[0] for line in text.splitlines() if " = " in line]


def test_softmax_over_axis_0_is_as_fused_as_over_the_last() -> None:
    last, first = optimized("nn.softmax(x)"), optimized("nn.softmax(x, axis=0)")
    assert op_names(first) == op_names(last)
    filecheck(first, """
    CHECK: tensor.fused_reduce %x {kinds = ["max"], axes = [0]
    CHECK: tensor.fused_reduce {{%\\w+}} {kinds = ["sum"], axes = [0]
    CHECK-NOT: tensor.reduce_
    """)


def test_log_softmax_axis_keyword_is_as_fused_as_the_default() -> None:
    assert op_names(optimized("nn.log_softmax(x, axis=-1)")) == \
        op_names(optimized("nn.log_softmax(x)"))


def test_layer_norm_eps_keyword_only_changes_the_constant() -> None:
    params = "input x: f32[M, N], input g: f32[N], input b: f32[N]"
    default = optimized("nn.layer_norm(x, g, b)", params)
    custom = optimized("nn.layer_norm(x, g, b, eps=1e-3)", params)
    assert op_names(custom) == op_names(default)
    assert "1e-05" in default and "0.001" in custom and "1e-05" not in custom


def test_attention_scale_is_the_extent_not_a_reduction() -> None:
    text = optimized("nn.attention(x, k, v)",
                     "input x: f32[M, D], input k: f32[S, D], input v: f32[S, N]")
    filecheck(text, """
    CHECK-NOT: tensor.fused_reduce %x
    CHECK:     tensor.dim %x {axis = 1}
    CHECK:     arith.sqrt
    CHECK:     tensor.fused_matmul %x, {{%\\w+}}, {{%\\w+}} {kernel = "matmul_div_fused"}
    CHECK:     tensor.fused_reduce {{%\\w+}} {kinds = ["max"]
    CHECK:     tensor.fused_reduce {{%\\w+}} {kinds = ["sum"]
    CHECK:     tensor.matmul
    """)
    assert op_names(text).count("tensor.fused_reduce") == 2
