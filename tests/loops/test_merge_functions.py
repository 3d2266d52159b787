"""The loop-level ``merge-functions`` pass: identical outlined loops become one
function (IR text, CHECK lines), anything that differs keeps its own, callers that
become identical merge in turn, and the interpreter computes the same before and
after; the CPU backend's results with the pass in its default pipeline."""

from __future__ import annotations

import numpy as np
import pytest

import wiadsl
from wiadsl.diagnostics import Span
from wiadsl.ir import parse_module, print_module, run_func, verify
from wiadsl.loops import lower_module
from wiadsl.loops.merge_functions import fingerprint, merge_functions
from wiadsl.loops.passes import default_loop_pipeline, run_loop_passes
from wiadsl.testing.filecheck import filecheck

TWO_RELUS = """
func @f(%a: tensor<?x?xf32>, %b: tensor<?x?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) attributes {kernel, outputs = ["y", "z"]} {
^entry:
  %0 = tensor.relu %a : tensor<?x?xf32>
  %1 = tensor.relu %b : tensor<?x?xf32>
  return %0, %1 : tensor<?x?xf32>, tensor<?x?xf32>
}
"""


def outlined(shapes, pipeline="parallelize{min_cost=0},merge-functions"):
    module = lower_module(parse_module(TWO_RELUS), {"f": shapes})
    before = parse_module(print_module(module))
    run_loop_passes(module, pipeline, verify_each=True)
    return before, module


def test_identical_loops_on_two_inputs_become_one_function():
    before, module = outlined([(4, 8), (4, 8)])
    filecheck(print_module(module), """
    CHECK: func.call @f.par0({{.*}}%a,
    CHECK: func.call @f.par0({{.*}}%b,
    CHECK: func @f.par0(
    CHECK-NOT: func @f.par1(
    """)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((4, 8), np.float32), rng.standard_normal((4, 8), np.float32)
    for got, want in zip(run_func(module, "f", [a, b]), run_func(before, "f", [a, b]), strict=True):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(run_func(module, "f", [a, b])[1], np.maximum(b, 0))


def test_identical_small_loops_outlined_as_plain_calls_merge_too():
    # below parallelize's min_cost, in a function of serial_min_ops ops, the loops are
    # <f>.loop<k>, serial calls
    before, module = outlined([(4, 8), (4, 8)], "parallelize{serial_min_ops=10},merge-functions")
    filecheck(print_module(module), """
    CHECK: func.call @f.loop0({{.*}}%a,
    CHECK-NOT: parallel
    CHECK: func.call @f.loop0({{.*}}%b,
    CHECK: func @f.loop0(
    CHECK-NOT: func @f.loop1(
    """)
    a, b = np.full((4, 8), -1.5, np.float32), np.arange(32, dtype=np.float32).reshape(4, 8) - 9
    for got, want in zip(run_func(module, "f", [a, b]), run_func(before, "f", [a, b]), strict=True):
        np.testing.assert_array_equal(got, want)


def test_loops_over_other_extents_stay_apart():
    _, module = outlined([(4, 8), (4, 9)])
    text = print_module(module)
    assert "func @f.par0(" in text and "func @f.par1(" in text
    assert "func.call @f.par1(" in text


TWO_LEVELS = """
func @k(%x: tensor<8xf32>, %y: tensor<8xf32>) attributes {kernel, outputs = []} {
^entry:
  %0 = arith.constant 0 : index
  %1 = arith.constant 8 : index
  func.call @k.par0(%0, %1, %x) {parallel = 1} : (index, index, tensor<8xf32>) -> ()
  func.call @k.par1(%0, %1, %y) {parallel = 1} : (index, index, tensor<8xf32>) -> ()
  return
}

func @k.par0(%lo: index, %hi: index, %t: tensor<8xf32>) {
^entry:
  func.call @k.par2(%lo, %hi, %t) : (index, index, tensor<8xf32>) -> ()
  return
}

func @k.par1(%lo: index, %hi: index, %u: tensor<8xf32>) {
^entry:
  func.call @k.par3(%lo, %hi, %u) : (index, index, tensor<8xf32>) -> ()
  return
}

func @k.par2(%lo: index, %hi: index, %t: tensor<8xf32>) {
^entry:
  %c = arith.constant 2.0 : f32
  loop.store %c, %t, %lo : (f32, tensor<8xf32>, index) -> ()
  return
}

func @k.par3(%lo: index, %hi: index, %t: tensor<8xf32>) {
^entry:
  %c = arith.constant 2.0 : f32
  loop.store %c, %t, %lo : (f32, tensor<8xf32>, index) -> ()
  return
}
"""


def test_callers_that_become_identical_merge_too():
    module = parse_module(TWO_LEVELS)
    assert merge_functions(module) == 2  # par3 into par2, then par1 into par0
    verify(module)
    assert [f.name for f in module] == ["k", "k.par0", "k.par2"]
    filecheck(print_module(module), """
    CHECK: func.call @k.par0(%0, %1, %x)
    CHECK-NEXT: func.call @k.par0(%0, %1, %y)
    CHECK: func @k.par0(
    CHECK-NEXT: ^entry:
    CHECK-NEXT: func.call @k.par2(
    """)


@pytest.mark.parametrize("old,new", [
    ("arith.constant 2.0 : f32", "arith.constant 3.0 : f32"),          # a constant
    ("loop.store %c, %t, %lo", "loop.store %c, %t, %hi"),              # the wiring
    ("loop.store %c, %t, %lo : (f32, tensor<8xf32>, index) -> ()\n  return\n}\n",
     "loop.store %c, %t, %lo : (f32, tensor<8xf32>, index) -> ()\n"
     "  loop.store %c, %t, %hi : (f32, tensor<8xf32>, index) -> ()\n  return\n}\n"),  # an op more
])
def test_a_difference_keeps_functions_apart(old: str, new: str):
    base = parse_module(TWO_LEVELS)
    assert fingerprint(base["k.par2"]) == fingerprint(base["k.par3"])
    i = TWO_LEVELS.rindex(old)  # in k.par3, the last function
    module = parse_module(TWO_LEVELS[:i] + new + TWO_LEVELS[i + len(old):])
    assert fingerprint(module["k.par2"]) != fingerprint(module["k.par3"])
    assert merge_functions(module) == 0


CHECKED = """
func @g.par0(%lo: index, %hi: index, %ok: i1) {
^entry:
  loop.check %ok {message = "index is out of range"} : i1
  return
}

func @g.par1(%lo: index, %hi: index, %ok: i1) {
^entry:
  loop.check %ok {message = "index is out of range"} : i1
  return
}
"""


@pytest.mark.parametrize("same_line", [True, False])
def test_checks_keep_their_own_source_lines(same_line: bool):
    """A run-time error names the line of its check: checks of two source lines never
    share one function (the message would point at the wrong line)."""
    module = parse_module(CHECKED)
    for func, line in zip(module, (3, 3 if same_line else 7), strict=True):
        func.entry.ops[0].loc = Span("model.wia", line, 5, line, 20)
    assert merge_functions(module) == (1 if same_line else 0)


def test_the_cpu_pipeline_merges_and_computes_the_same():
    assert "merge-functions" in default_loop_pipeline(2)
    mod = wiadsl.jit("""
    kernel two(input a: f32[R, C], input b: f32[R, C], output y: f32[R, C], output z: f32[R, C]) {
        y = exp(a) * 2.0 + 1.0;
        z = exp(b) * 2.0 + 1.0;
    }""", target="cpu")
    rng = np.random.default_rng(1)
    for shape in [(1, 1), (7, 33), (129, 257)]:
        a, b = rng.standard_normal(shape, np.float32), rng.standard_normal(shape, np.float32)
        y, z = mod.two(a, b)
        np.testing.assert_allclose(y, np.exp(a) * 2 + 1, rtol=1e-5)
        np.testing.assert_allclose(z, np.exp(b) * 2 + 1, rtol=1e-5)
