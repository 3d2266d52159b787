"""The loop-level ``contract-rows`` pass: a buffer only one fused parallel loop uses,
row by row, becomes a row buffer in the callee's frame. IR text (CHECK lines), the
interpreter before and after (the values must not change), round trips, and the
verifier's rule for ``loop.alloc {stack}``; the CPU backend against NumPy at odd
sizes and both thread counts."""

from __future__ import annotations

import numpy as np
import pytest

import wiadsl
from wiadsl.diagnostics import WiaIRError
from wiadsl.ir import parse_module, print_module, verify
from wiadsl.testing.filecheck import filecheck

from .loop_cases import SOFTMAX, check_runs_alike, transform

# exp's rows are read column-wise by the transpose after it: its buffer is not one loop's
READ_AFTER = """
func @f(%x: tensor<?x?xf32>) -> tensor<?x?xf32> attributes {kernel, outputs = ["y"]} {
^entry:
  %e = tensor.exp %x : tensor<?x?xf32>
  %t = tensor.transpose %e {perm = [1, 0]} : tensor<?x?xf32> -> tensor<?x?xf32>
  %y = tensor.add %t, %t : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
  return %y : tensor<?x?xf32>
}
"""

PIPELINE = "parallelize{min_cost=0},fuse-parallel,contract-rows"


def contracted(text: str, shape: tuple[int, int] | None):
    before, after, _ = transform(text, PIPELINE, None if shape is None else [shape])
    return before, after


def same_values(before, after, shape) -> None:
    check_runs_alike(before, after, [np.random.default_rng(4).standard_normal(shape).astype(np.float32)])


def test_a_fused_softmax_keeps_its_rows_in_the_callees_frame():
    before, after = contracted(SOFTMAX, (6, 40))
    verify(after)
    out = print_module(after)
    # the caller allocates the result only; the row max, exp and sum live in the callee
    filecheck(out, """
    CHECK: func @f(
    CHECK: loop.alloc : tensor<6x40xf32>
    CHECK-NEXT: arith.constant
    CHECK: func.call @f.par0(
    CHECK: func @f.par0(
    CHECK-DAG: loop.alloc {stack} : tensor<1xf32>
    CHECK-DAG: loop.alloc {stack} : tensor<40xf32>
    CHECK: cond_br {{.*}}, ^ret {parallel}
    """)
    assert out.count("loop.alloc {stack}") == 3 and out.count("loop.alloc :") == 1
    assert print_module(parse_module(out)) == out
    same_values(before, after, (6, 40))


def test_rows_other_loops_read_keep_their_buffer():
    before, after = contracted(READ_AFTER, (5, 7))
    out = print_module(after)
    assert "{stack}" not in out
    assert out.count("loop.alloc : tensor<5x7xf32>") == 1  # exp's rows, read by the transpose
    same_values(before, after, (5, 7))


def test_rows_of_a_run_time_width_are_left_alone():
    # no constant stride proves row-locality (and fuse-parallel fuses nothing)
    before, after = contracted(SOFTMAX, None)
    assert "{stack}" not in print_module(after)
    same_values(before, after, (3, 9))


def test_rows_beyond_the_frame_budget_keep_their_buffer():
    from wiadsl.loops.contract_rows import STACK_BYTES
    wide = STACK_BYTES // 4 + 16  # one f32 row larger than the budget
    _, after = contracted(SOFTMAX, (2, wide))
    out = print_module(after)
    assert f"loop.alloc {{stack}} : tensor<{wide}xf32>" not in out
    assert out.count("loop.alloc {stack} : tensor<1xf32>") == 2  # the max and the sum still are


def test_a_stack_buffer_needs_static_extents():
    text = """
func @f(%n: index) -> () {
^entry:
  %b = loop.alloc %n {stack} : index -> tensor<?xf32>
  return
}
"""
    with pytest.raises(WiaIRError, match="static extents"):
        verify(parse_module(text))


SRC = """
import nn;
kernel softmax(input x: f32[T, D], output y: f32[T, D]) { y = nn.softmax(x); }
kernel norm(input x: f32[T, D], input g: f32[D], input b: f32[D], output y: f32[T, D]) {
    y = nn.layer_norm(x, g, b);
}
"""


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("t,d", [(1, 1), (7, 33), (129, 7), (300, 1024)])
def test_row_operations_on_the_cpu_match_numpy(threads, t, d):
    mod = wiadsl.jit(SRC, target="cpu")
    rng = np.random.default_rng(t * d)
    x = (rng.standard_normal((t, d)) * 4).astype(np.float32)
    g, b = rng.standard_normal(d).astype(np.float32), rng.standard_normal(d).astype(np.float32)
    before = wiadsl.get_num_threads()
    wiadsl.set_num_threads(threads)
    try:
        y, z = mod.softmax(x), mod.norm(x, g, b)
    finally:
        wiadsl.set_num_threads(before)
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)
    mean = x.mean(1, keepdims=True)
    var = ((x - mean) ** 2).mean(1, keepdims=True)
    np.testing.assert_allclose(z, (x - mean) / np.sqrt(var + 1e-5) * g + b, rtol=1e-4, atol=1e-4)
