"""The PTX module header, the launch plan's structure, and clear errors for unsupported input."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from wiadsl.backends.ptx.emit import emit_ptx
from wiadsl.backends.ptx.executor import PlanRun
from wiadsl.backends.ptx.isa import isa_version
from wiadsl.backends.ptx.simbackend import SimDevice
from wiadsl.diagnostics import WiaError, WiaUsageError
from wiadsl.ir.parser import parse_module

from .helpers import corpus_module, emitted, example_kernels

SOFTMAX = "import nn;\nkernel k(input a: f32[M, N], output y: f32[M, N]) { y = nn.softmax(a); }"


@pytest.mark.parametrize("arch,version", [("sm_80", "8.0"), ("sm_90", "8.0"), ("sm_90a", "8.0"),
                                          ("sm_100", "8.6")])
def test_header_respects_minimum_version(arch: str, version: str) -> None:
    text, _ = emit_ptx(corpus_module(SOFTMAX), "k", arch)
    assert text.splitlines()[1:4] == [f".version {version}", f".target {arch}", ".address_size 64"]
    assert isa_version(arch) == version


def test_unknown_arch_is_a_usage_error() -> None:
    with pytest.raises(WiaUsageError, match="unknown PTX target 'sm_12'"):
        emit_ptx(corpus_module(SOFTMAX), "k", "sm_12")


def test_softmax_is_one_row_kernel_with_shuffles() -> None:
    text, plan = emit_ptx(corpus_module(SOFTMAX), "k")
    assert [k["kind"] for k in plan["kernels"]] == ["row(1-pass)"]
    assert "shfl.sync.bfly.b32" in text and "bar.sync 0" in text
    assert "cvta.to.global.u64" in text and "ld.param.u64" in text


def test_plan_is_json_and_symbolic_without_shapes() -> None:
    text, plan = emit_ptx(corpus_module(SOFTMAX), "k")
    again = json.loads(json.dumps(plan))
    assert again["format"] == "wiadsl-ptx-plan/1" and again["dims"]["a_0"] == {"input": "a", "axis": 0}
    launch = next(s for s in again["blocks"][0]["steps"] if s["op"] == "launch")
    assert launch["grid"][0] == "min(a_0, 65535)" and launch["block"] == [256, 1, 1]
    assert {"expr": "a_1", "type": "u32"} in launch["args"]


def test_static_shapes_fold_into_immediates() -> None:
    text, plan = emit_ptx(corpus_module(SOFTMAX), "k", shapes={"a": (7, 33)})
    launch = next(s for s in plan["blocks"][0]["steps"] if s["op"] == "launch")
    assert launch["grid"] == [7, 1, 1] and all("expr" not in a for a in launch["args"])


def test_elementwise_uses_128_bit_loads() -> None:
    src = ("kernel k(input a: f32[M, N], input b: f32[M, N], input c: f32[M, N], output y: f32[M, N])"
           " { y = relu(a * b + c); }")
    text, plan = emit_ptx(corpus_module(src), "k")
    assert plan["kernels"][0]["kind"] == "elementwise(v4)"
    assert "ld.global.v4.f32" in text and "st.global.v4.f32" in text


def test_host_control_flow_in_plan() -> None:
    path, kernel = next((p, k) for p, k in example_kernels() if k == "halve_until_small")
    _, plan_json = emitted(path, kernel, "sm_80")
    plan = json.loads(plan_json)
    ops = [s["op"] for b in plan["blocks"] for s in b["steps"]]
    assert "cond_br" in ops and "read" in ops and "br" in ops and "return" in ops


def test_unsupported_op_names_the_op() -> None:
    ir = """func @k(%x: tensor<?xf32>) -> tensor<?xf32> attributes {kernel, outputs = ["y"]} {
^entry:
  %y = tensor.sort %x : tensor<?xf32>
  return %y : tensor<?xf32>
}"""
    try:
        module = parse_module(ir)
    except WiaError:
        pytest.skip("the IR has no sort op to test with")
    with pytest.raises(WiaError, match="tensor.sort"):
        emit_ptx(module, "k")


def test_executor_checks_equal_dims() -> None:
    src = "kernel k(input a: f32[M, N], input b: f32[N], output y: f32[M, N]) { y = a + b; }"
    text, plan = emit_ptx(corpus_module(src), "k")
    assert plan["dims"]["a_1"]["equal"] == [{"input": "b", "axis": 0}]
    with pytest.raises(WiaError, match="must agree"):
        PlanRun(plan, SimDevice(text)).run([np.zeros((2, 3), np.float32), np.zeros(4, np.float32)])


def test_kernel_names_are_unique_and_valid() -> None:
    for path, kernel in example_kernels():
        text, _ = emitted(path, kernel, "sm_80")
        names = re.findall(r"\.entry (\w+)\(", text)
        assert len(names) == len(set(names)) > 0


FUSED_IR = """func @k(%x: tensor<?x?xf32>, %b: tensor<?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) attributes {kernel, outputs = ["y", "s"]} {
^entry:
  %r = tensor.fused_elementwise %x, %b {kernel = "bias_relu"} : (tensor<?x?xf32>, tensor<?xf32>) -> tensor<?x?xf32> {
  ^bb0(%u: f32, %v: f32):
    %0 = arith.add %u, %v : f32
    %1 = arith.relu %0 : f32
    tensor.yield %1 : f32
  }
  %m, %sm = tensor.fused_reduce %r {kinds = ["max"], axes = [1], keepdims} : tensor<?x?xf32> -> (tensor<?x1xf32>, tensor<?x?xf32>) {
  ^bb1(%w: f32):
    tensor.yield %w : f32
  } {
  ^bb2(%z: f32, %mx: f32):
    %2 = arith.sub %z, %mx : f32
    %3 = arith.exp %2 : f32
    tensor.yield %3 : f32
  }
  return %r, %sm : tensor<?x?xf32>, tensor<?x?xf32>
}"""


def test_fused_ops_run_in_the_simulator() -> None:
    from wiadsl.ir.interpreter import run_func
    module = parse_module(FUSED_IR)
    rng = np.random.default_rng(0)
    x, b = rng.standard_normal((7, 33)).astype(np.float32), rng.standard_normal(33).astype(np.float32)
    text, plan = emit_ptx(module, "k")
    assert [k["kind"] for k in plan["kernels"]] == ["elementwise", "row(1-pass)"]
    got = PlanRun(plan, SimDevice(text)).run([x, b])
    for g, w in zip(got, run_func(module, "k", [x, b]), strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
