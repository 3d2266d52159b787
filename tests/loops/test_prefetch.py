"""The loop-level ``prefetch`` pass: IR text, and the interpreter before/after (a
prefetch never changes a value and never fails, even far out of range)."""

from __future__ import annotations

import numpy as np
import pytest

from wiadsl.ir import parse_module, print_module, run_func, verify
from wiadsl.loops import lower_module
from wiadsl.loops.passes import LOOP_PASSES, parse_loop_pipeline, run_loop_passes
from wiadsl.testing.filecheck import filecheck

ROWS = """
func @f(%x: tensor<?x?xf32>, %b: tensor<?xf32>) -> tensor<?x?xf32> attributes {kernel, outputs = ["y"]} {
^entry:
  %m = tensor.reduce_sum %x {axes = [1], keepdims} : tensor<?x?xf32> -> tensor<?x1xf32>
  %d = tensor.sub %x, %m : (tensor<?x?xf32>, tensor<?x1xf32>) -> tensor<?x?xf32>
  %e = tensor.mul %d, %b : (tensor<?x?xf32>, tensor<?xf32>) -> tensor<?x?xf32>
  return %e : tensor<?x?xf32>
}
"""

TRANSPOSE = """
func @f(%x: tensor<?x?xf32>) -> tensor<?x?xf32> attributes {kernel, outputs = ["y"]} {
^entry:
  %t = tensor.transpose %x {perm = [1, 0]} : tensor<?x?xf32> -> tensor<?x?xf32>
  return %t : tensor<?x?xf32>
}
"""


def run(text: str, shapes, pipeline: str):
    module = lower_module(parse_module(text), shapes)
    before = parse_module(print_module(module))
    run_loop_passes(module, pipeline, verify_each=True)
    verify(module)
    out = print_module(module)
    assert print_module(parse_module(out)) == out
    return before, module


def test_unit_stride_loads_get_a_prefetch_ahead():
    _, module = run(ROWS, {"f": [(4, 40), (40,)]}, "prefetch{distance=32,scalar=true}")
    filecheck(print_module(module), """
    CHECK: ^bb1:
    CHECK: %26 = arith.add %25, %21 : index
    CHECK-NEXT: %27 = arith.constant 32 : index
    CHECK-NEXT: %28 = arith.add %26, %27 : index
    CHECK-NEXT: loop.prefetch %x, %28 : (tensor<?x?xf32>, index) -> ()
    CHECK-NEXT: loop.load %x, %26 : (tensor<?x?xf32>, index) -> f32
    """)
    assert print_module(module).count("loop.prefetch %b") == 1


def test_vector_loops_prefetch_and_remainders_do_not():
    _, module = run(ROWS, {"f": [(4, 40), (40,)]}, "vectorize{width=8},prefetch")
    text = print_module(module)
    filecheck(text, """
    CHECK: ^vbody:
    CHECK: arith.constant 64 : index
    CHECK: loop.prefetch %x
    CHECK-NEXT: loop.vload %x
    """)
    # the 40-element rows divide by 8: no remainder loops; every load is a vload
    assert text.count("loop.prefetch") == text.count("loop.vload")


def test_strided_loads_get_none():
    _, module = run(TRANSPOSE, {"f": [(9, 13)]}, "prefetch{scalar=true}")
    assert "loop.prefetch" not in print_module(module)


def test_scalar_loads_get_none_by_default():
    _, module = run(ROWS, {"f": [(4, 40), (40,)]}, "prefetch")
    assert "loop.prefetch" not in print_module(module)


@pytest.mark.parametrize("pipeline", ["prefetch{scalar=true}", "prefetch{distance=100000,scalar=true}",
                                      "vectorize{width=8},prefetch{distance=16}",
                                      "vectorize{width=4,interleave=2},prefetch{scalar=true}"])
@pytest.mark.parametrize("shape", [(3, 1), (2, 7), (3, 33), (1, 129), (2, 0)])
@pytest.mark.parametrize("static", [True, False])
def test_results_do_not_change(pipeline, shape, static):
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape).astype(np.float32)
    b = rng.standard_normal(shape[1]).astype(np.float32)
    before, after = run(ROWS, {"f": [shape, shape[1:]]} if static else None, pipeline)
    # static empty rows: no loops at all; otherwise there is something to prefetch
    # (only in vector loops without scalar=true)
    text = print_module(after)
    expected = (not static or shape[1] > 0) and ("scalar=true" in pipeline or "loop.vload" in text)
    assert ("loop.prefetch" in text) == expected
    want, got = run_func(before, "f", [x, b])[0], run_func(after, "f", [x, b])[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got, (x - x.sum(axis=1, keepdims=True)) * b, rtol=1e-4, atol=1e-4)


def test_the_op_ignores_any_offset():
    text = """
func @p(%x: tensor<3xf32>, %i: index) -> f32 {
^entry:
  loop.prefetch %x, %i : (tensor<3xf32>, index) -> ()
  %c0 = arith.constant 0 : index
  %v = loop.load %x, %c0 : (tensor<3xf32>, index) -> f32
  return %v : f32
}
"""
    module = parse_module(text)
    verify(module)
    for i in (-5, 0, 3, 1 << 40):
        assert run_func(module, "p", [np.ones(3, np.float32), i])[0] == 1.0


def test_options():
    assert "prefetch" in LOOP_PASSES
    (p,) = parse_loop_pipeline("prefetch{distance=128,scalar=true}")
    assert p.distance == 128 and p.scalar is True
