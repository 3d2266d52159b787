"""The loop-level ``parallelize`` pass: IR text (CHECK lines), round trips, and the
interpreter on the loop IR before and after the pass (outlining must not change
what a function computes)."""

from __future__ import annotations

import numpy as np
import pytest

from wiadsl.diagnostics import WiaUsageError
from wiadsl.ir import parse_module, print_module, run_func, verify
from wiadsl.loops import lower_module
from wiadsl.loops.passes import LOOP_PASSES, parse_loop_pipeline, run_loop_passes
from wiadsl.testing.filecheck import filecheck

CHAIN = """
func @f(%a: tensor<?x?xf32>, %b: tensor<?xf32>) -> tensor<?x?xf32> attributes {kernel, outputs = ["y"]} {
^entry:
  %0 = tensor.mul %a, %b : (tensor<?x?xf32>, tensor<?xf32>) -> tensor<?x?xf32>
  %1 = tensor.relu %0 : tensor<?x?xf32>
  return %1 : tensor<?x?xf32>
}
"""

ROWS = """
func @f(%x: tensor<?x?xf32>) -> tensor<?x?xf32> attributes {kernel, outputs = ["y"]} {
^entry:
  %m = tensor.reduce_max %x {axes = [1], keepdims} : tensor<?x?xf32> -> tensor<?x1xf32>
  %d = tensor.sub %x, %m : (tensor<?x?xf32>, tensor<?x1xf32>) -> tensor<?x?xf32>
  %e = tensor.exp %d : tensor<?x?xf32>
  return %e : tensor<?x?xf32>
}
"""

SUM = """
func @f(%x: tensor<?xf32>) -> f32 attributes {kernel, outputs = ["s"]} {
^entry:
  %s = tensor.reduce_sum %x {axes = [0]} : tensor<?xf32> -> f32
  return %s : f32
}
"""


def parallel(text: str, shapes=None, pipeline: str = "parallelize{min_cost=0}"):
    module = lower_module(parse_module(text), shapes)
    before = print_module(module)
    run_loop_passes(module, pipeline, verify_each=True)
    return parse_module(before), module


def test_marked_loops_carry_the_attribute():
    module = lower_module(parse_module(CHAIN), {"f": [(4, 8), (8,)]})
    filecheck(print_module(module), """
    CHECK: ^loop(%i: index):
    CHECK: cond_br {{%[0-9a-z.]+}}, ^{{[a-z0-9]+}}, ^{{[a-z0-9]+}} {parallel}
    """)


def test_elementwise_loop_is_outlined_with_its_captures():
    _, module = parallel(CHAIN, {"f": [(4, 8), (8,)]})
    filecheck(print_module(module), """
    CHECK: func @f(
    CHECK: loop.alloc : tensor<4x8xf32>
    CHECK-NEXT: func.call @f.par0({{%[0-9]+}}, {{%[0-9]+}}, %a, %b, {{%[0-9]+}}) {parallel = {{[0-9]+}}} : (index, index,
    CHECK-NEXT: br ^
    CHECK: func @f.par0(%lo: index, %hi: index, %a: tensor<?x?xf32>, %b: tensor<?xf32>, {{%[0-9]+}}: tensor<4x8xf32>) {
    CHECK: arith.constant 8 : index
    CHECK: br ^loop(%lo : index)
    CHECK: arith.cmpi slt, %i, %hi : index
    CHECK: cond_br {{.*}}, ^ret {parallel}
    CHECK: loop.store
    CHECK: ^ret:
    CHECK-NEXT: return
    """)


def test_a_unit_outer_extent_leaves_the_next_loop_to_split():
    """A batch of one: its single trip is emitted as straight code (no loop), and the
    nest's first loop of an extent other than 1 is the parallel one (the rows here),
    so the threads share the rows instead of one trip."""
    _, module = parallel(CHAIN, {"f": [(1, 8), (8,)]})
    filecheck(print_module(module), """
    CHECK: func @f(
    CHECK-NOT: ^loop(
    CHECK: func.call @f.par0({{%[0-9]+}}, {{%[0-9]+}}, %a, %b, {{%[0-9]+}}) {parallel = {{[0-9]+}}}
    CHECK: func @f.par0(
    CHECK: cond_br {{.*}}, ^ret {parallel}
    """)


PADDED = """
func @f(%x: tensor<?x8x4x4xf32>) -> tensor<?x8x6x6xf32> attributes {kernel, outputs = ["y"], arg_dims = [["N", "", "", ""]]} {
^entry:
  %0 = tensor.dim %x {axis = 0} : tensor<?x8x4x4xf32> -> index
  %n = arith.cast %0 : index -> i64
  %m = arith.cast %n : i64 -> index
  %z = arith.constant 0.0 : f32
  %p = tensor.full %z, %m : (f32, index) -> tensor<?x8x6x6xf32>
  %a = arith.constant 1 : i64
  %b = arith.constant 5 : i64
  %y = tensor.insert_slice %x, %p, %a, %b, %a, %b {layout = [":", ":", "s:e", "s:e"]} : (tensor<?x8x4x4xf32>, tensor<?x8x6x6xf32>, i64, i64, i64, i64) -> tensor<?x8x6x6xf32>
  return %y : tensor<?x8x6x6xf32>
}
"""


def test_a_unit_batch_through_casts_leaves_the_channels_to_split():
    """The batch size a kernel reads with ``tensor.dim`` and casts to ``i64`` and back
    (as the ONNX importer's ``full([N, ...])`` does) is a constant 1 at a batch of one:
    the channels are the parallel loop, not the single image (ResNet-18, batch 1, two
    threads: its pads and epilogues had run on one thread)."""
    _, module = parallel(PADDED, {"f": [(1, 8, 4, 4)]})
    filecheck(print_module(module), """
    CHECK: func @f(
    CHECK: loop.alloc : tensor<1x8x6x6xf32>
    CHECK: func.call @f.par0(
    CHECK: func @f.par0(
    CHECK: arith.cmpi slt, %i, %hi : index
    CHECK: cond_br {{.*}}, ^ret {parallel}
    """)
    text = print_module(module)
    assert "arith.constant 8 : index" in text.split("func @f.par0(")[0]  # the channels' range


@pytest.mark.parametrize("text,shapes,inputs", [
    (CHAIN, {"f": [(5, 7), (7,)]}, [(5, 7), (7,)]),
    (CHAIN, None, [(3, 9), (9,)]),
    (ROWS, {"f": [(6, 33)]}, [(6, 33)]),
    (ROWS, None, [(2, 5)]),
    (PADDED, {"f": [(1, 8, 4, 4)]}, [(1, 8, 4, 4)]),
])
def test_outlined_loop_ir_runs_like_before(text, shapes, inputs):
    rng = np.random.default_rng(1)
    args = [rng.standard_normal(s).astype(np.float32) for s in inputs]
    before, after = parallel(text, shapes)
    verify(after)
    assert any(f.name.startswith("f.par") for f in after)
    want = run_func(before, "f", args)[0]
    got = run_func(after, "f", args)[0]
    np.testing.assert_array_equal(got, want)
    # and the outlined module prints and parses back to the same text
    assert print_module(parse_module(print_module(after))) == print_module(after)


def test_only_the_outermost_loop_of_a_nest_is_outlined():
    _, module = parallel(ROWS, {"f": [(6, 33)]})
    names = [f.name for f in module]
    # the reduction's row loop and the elementwise loop: two regions, no nested outlining
    assert names == ["f", "f.par0", "f.par1"]
    for f in module.funcs[1:]:
        assert "func.call" not in print_module(type(module)([f]))


def test_loops_with_iteration_values_stay():
    _, module = parallel(SUM, {"f": [(100,)]})
    assert [f.name for f in module] == ["f"]


def test_small_static_loops_stay_inline_by_default():
    module = lower_module(parse_module(CHAIN), {"f": [(4, 8), (8,)]})
    run_loop_passes(module, "parallelize")
    assert [f.name for f in module] == ["f"]
    big = lower_module(parse_module(CHAIN), {"f": [(512, 1024), (1024,)]})
    run_loop_passes(big, "parallelize")
    assert [f.name for f in big] == ["f", "f.par0"]
    filecheck(print_module(big), "CHECK: func.call @f.par0({{.*}}) {parallel = ")


def test_a_large_functions_small_loops_are_outlined_as_serial_calls():
    # from serial_min_ops ops (default SERIAL_MIN_OPS) a function keeps no small loop
    # inline either: without loops, a kernel function is glue codegen.py leaves
    # unoptimized
    module = lower_module(parse_module(CHAIN), {"f": [(4, 8), (8,)]})
    run_loop_passes(module, "parallelize{serial_min_ops=10}")
    assert [f.name for f in module] == ["f", "f.loop0"]
    filecheck(print_module(module), """
        CHECK-LABEL: func @f(
        CHECK-NOT: cond_br
        CHECK: func.call @f.loop0(
        CHECK-NOT: parallel
        CHECK-SAME: -> ()
        CHECK-NOT: cond_br
        CHECK-LABEL: func @f.loop0(
    """)
    x, b = np.random.default_rng(0).standard_normal((4, 8), np.float32), np.arange(8, dtype=np.float32)
    np.testing.assert_array_equal(run_func(module, "f", [x, b])[0], np.maximum(x * b, 0))


def test_pipeline_text_errors_name_the_pass_and_option():
    assert "parallelize" in LOOP_PASSES
    with pytest.raises(WiaUsageError, match="unknown loop pass 'vectorise'"):
        parse_loop_pipeline("vectorise")
    with pytest.raises(WiaUsageError, match="min_costs"):
        parse_loop_pipeline("parallelize{min_costs=3}")
    (p,) = parse_loop_pipeline("parallelize{min_cost=7}")
    assert p.min_cost == 7
    (p,) = parse_loop_pipeline("parallelize{serial_min_ops=3}")
    assert p.serial_min_ops == 3


LAYERNORM = """
func @f(%x: tensor<?x?xf32>) -> tensor<?x?xf32> attributes {kernel, outputs = ["y"]} {
^entry:
  %m = tensor.reduce_mean %x {axes = [1], keepdims} : tensor<?x?xf32> -> tensor<?x1xf32>
  %d = tensor.sub %x, %m : (tensor<?x?xf32>, tensor<?x1xf32>) -> tensor<?x?xf32>
  %s = tensor.mul %d, %d : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
  %v = tensor.reduce_mean %s {axes = [1], keepdims} : tensor<?x?xf32> -> tensor<?x1xf32>
  %y = tensor.div %x, %v : (tensor<?x?xf32>, tensor<?x1xf32>) -> tensor<?x?xf32>
  return %y : tensor<?x?xf32>
}
"""

COLUMNS = """
func @f(%x: tensor<?x?xf32>) -> tensor<?x?xf32> attributes {kernel, outputs = ["y"]} {
^entry:
  %t = tensor.transpose %x {perm = [1, 0]} : tensor<?x?xf32> -> tensor<?x?xf32>
  %e = tensor.exp %t : tensor<?x?xf32>
  %u = tensor.transpose %e {perm = [1, 0]} : tensor<?x?xf32> -> tensor<?x?xf32>
  %y = tensor.add %u, %x : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
  return %y : tensor<?x?xf32>
}
"""


def fused(text: str, shape):
    return parallel(text, {"f": [shape]}, "parallelize{min_cost=0},fuse-parallel")


def test_row_local_loops_fuse_into_one():
    before, after = fused(LAYERNORM, (6, 40))
    assert [f.name for f in after] == ["f", "f.par0"]
    out = print_module(after)
    assert out.count("func.call") == 1
    filecheck(out, """
    CHECK: func.call @f.par0(
    CHECK: func @f.par0(
    CHECK: cond_br {{.*}}, ^ret {parallel}
    CHECK: loop.store
    CHECK: loop.store
    CHECK: loop.store
    """)
    x = np.random.default_rng(2).standard_normal((6, 40)).astype(np.float32)
    np.testing.assert_array_equal(run_func(after, "f", [x])[0], run_func(before, "f", [x])[0])


def test_loops_that_read_other_rows_stay_apart():
    # the second loop reads the first one's buffer column-wise: rows of one
    # iteration are written by every iteration of the other, so no fusion
    before, after = fused(COLUMNS, (5, 7))
    calls = print_module(after).count("{parallel = ")
    x = np.random.default_rng(3).standard_normal((5, 7)).astype(np.float32)
    np.testing.assert_array_equal(run_func(after, "f", [x])[0], run_func(before, "f", [x])[0])
    assert calls == 2 and len(after.funcs) == 3
