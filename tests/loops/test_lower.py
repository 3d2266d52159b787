"""Tensor -> loop lowering: IR text (CHECK lines), round trips, and interpreter runs
of the loop-level IR against the tensor-level IR (the loop interpreter is the
tensor interpreter: loop ops carry their own NumPy semantics)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from wiadsl.diagnostics import WiaRuntimeError
from wiadsl.ir import parse_module, print_module, run_func, verify
from wiadsl.loops import lower_module
from wiadsl.testing.filecheck import filecheck

FUSED_CHAIN = """
func @f(%a: tensor<?x?xf32>, %b: tensor<?xf32>) -> tensor<?x?xf32> attributes {kernel, outputs = ["y"]} {
^entry:
  %0 = tensor.mul %a, %b : (tensor<?x?xf32>, tensor<?xf32>) -> tensor<?x?xf32>
  %1 = tensor.relu %0 : tensor<?x?xf32>
  return %1 : tensor<?x?xf32>
}
"""

ROW_FILL = """
func @f(%A: tensor<?x?xf32>, %n: i64) -> tensor<?x?xf32> attributes {kernel, outputs = ["y"]} {
^entry:
  %z = arith.constant 0 : i64
  %one = arith.constant 1 : i64
  br ^loop(%z, %A : i64, tensor<?x?xf32>)
^loop(%i: i64, %acc: tensor<?x?xf32>):
  %c = arith.cmpi slt, %i, %n : i64
  cond_br %c, ^body, ^exit
^body:
  %r = tensor.extract_slice %A, %i {layout = ["i", ":"]} : (tensor<?x?xf32>, i64) -> tensor<?xf32>
  %neg = tensor.neg %r : tensor<?xf32>
  %u = tensor.insert_slice %neg, %acc, %i {layout = ["i", ":"]} : (tensor<?xf32>, tensor<?x?xf32>, i64) -> tensor<?x?xf32>
  %next = arith.add %i, %one : i64
  br ^loop(%next, %u : i64, tensor<?x?xf32>)
^exit:
  return %acc : tensor<?x?xf32>
}
"""


def lowered(text: str, shapes=None) -> str:
    module = lower_module(parse_module(text), shapes)
    verify(module)
    return print_module(module)


def test_elementwise_chain_is_one_loop_with_one_store():
    out = lowered(FUSED_CHAIN, {"f": [(4, 8), (8,)]})
    filecheck(out, """
    CHECK: loop.alloc : tensor<4x8xf32>
    CHECK: ^loop(
    CHECK: ^loop(
    CHECK: loop.load %a
    CHECK: loop.load %b
    CHECK: arith.mul
    CHECK-NEXT: arith.relu
    CHECK: loop.store
    """)
    assert out.count("loop.store") == 1 and out.count("loop.alloc") == 1


def test_dynamic_shapes_keep_broadcast_checks():
    out = lowered(FUSED_CHAIN)
    filecheck(out, """
    CHECK: tensor.dim %a {axis = 1}
    CHECK: loop.check {{%[0-9a-z.]+}} {message = "'tensor.mul': shape: operand shapes do not broadcast (axis 1)"}
    """)


def test_loop_carried_tensor_is_updated_in_place_after_one_copy():
    out = lowered(ROW_FILL, {"f": [(3, 4), ()]})
    # One copy of the parameter on the loop entry edge, none in the body.
    assert out.count("loop.copy") == 1
    body = out.split("^body")[1]
    assert "loop.alloc" not in body and "loop.copy" not in body


@pytest.mark.parametrize("text", [FUSED_CHAIN, ROW_FILL])
def test_loop_ir_round_trips(text):
    out = lowered(text)
    assert print_module(parse_module(out)) == out


def test_loop_ir_runs_like_the_tensor_ir():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    n = np.int64(3)
    want = run_func(parse_module(ROW_FILL), "f", [a, n])[0]
    got = run_func(lower_module(parse_module(ROW_FILL)), "f", [a, n])[0]
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(a, np.arange(12, dtype=np.float32).reshape(3, 4))  # input untouched


def test_loop_check_raises_in_the_interpreter():
    module = lower_module(parse_module(FUSED_CHAIN))
    with pytest.raises(WiaRuntimeError, match="do not broadcast"):
        run_func(module, "f", [np.ones((2, 3), np.float32), np.ones(4, np.float32)])


PAD = """
func @pad(%x: tensor<?x?xf32>) -> tensor<?x?xf32> attributes {kernel, outputs = ["y"]} {
^entry:
  %0 = tensor.dim %x {axis = 1} : tensor<?x?xf32> -> index
  %W = arith.cast %0 : index -> i64
  %1 = tensor.dim %x {axis = 0} : tensor<?x?xf32> -> index
  %H = arith.cast %1 : index -> i64
  %2 = arith.constant 2 : i64
  %3 = arith.add %H, %2 : i64
  %4 = arith.cast %3 : i64 -> index
  %5 = arith.constant 3 : i64
  %6 = arith.add %W, %5 : i64
  %7 = arith.cast %6 : i64 -> index
  %fill = arith.constant 0.5 : f32
  %p = tensor.full %fill, %4, %7 : (f32, index, index) -> tensor<?x?xf32>
  %9 = arith.constant 1 : i64
  %11 = arith.add %H, %9 : i64
  %12 = arith.constant 2 : i64
  %14 = arith.add %W, %12 : i64
  %15 = tensor.insert_slice %x, %p, %9, %11, %12, %14 {layout = ["s:e", "s:e"]} : (tensor<?x?xf32>, tensor<?x?xf32>, i64, i64, i64, i64) -> tensor<?x?xf32>
  return %15 : tensor<?x?xf32>
}
"""


def test_a_padded_copy_fills_only_around_the_slice():
    """``full`` then ``insert_slice`` (a padded copy): the fill value is stored in the
    bands before and after the slice on each axis (four nests here), never over the
    slice the source then overwrites; the static case drops nothing but empty bands."""
    out = lowered(PAD, {"pad": [(7, 5)]})
    fill = re.search(r"(%\d+) = arith.constant 0.5 : f32", out).group(1)
    filecheck(out.replace(fill + ",", "%fill,"), """
    CHECK: loop.alloc
    CHECK: loop.store %fill, {{%[0-9]+}}
    CHECK: loop.store %fill, {{%[0-9]+}}
    CHECK: loop.store %fill, {{%[0-9]+}}
    CHECK: loop.store %fill, {{%[0-9]+}}
    CHECK: loop.load %x
    CHECK-NOT: loop.store %fill
    """)
    assert out.count(f"loop.store {fill},") == 4 and out.count("loop.alloc") == 1
    for h, w in [(0, 0), (1, 1), (7, 5), (33, 2)]:
        x = np.arange(h * w, dtype=np.float32).reshape(h, w)
        want = np.full((h + 2, w + 3), 0.5, np.float32)
        want[1:h + 1, 2:w + 2] = x
        for shapes in (None, {"pad": [(h, w)]}):
            got = run_func(lower_module(parse_module(PAD), shapes), "pad", [x])[0]
            np.testing.assert_array_equal(got, want)


CAST_PLANE_SUM = """
func @f(%x: tensor<?x?xi32>) -> i64 attributes {kernel, outputs = ["y"]} {
^entry:
  %0 = tensor.cast %x : tensor<?x?xi32> -> tensor<?x?xi64>
  %1 = tensor.reduce_sum %0 {axes = [0, 1]} : tensor<?x?xi64> -> i64
  return %1 : i64
}
"""


def test_a_plane_one_pixel_wide_of_a_map_reads_every_row():
    """A [4, 1] plane under a map (the cast) is summed by rows, each read at its own
    index, not as one flat loop through the map, whose broadcast would send the
    extent-1 axis to index 0 for every pixel (fuzz seed 5500000000512)."""
    out = lowered(CAST_PLANE_SUM, {"f": [(4, 1)]})
    filecheck(out, """
    CHECK: ^loop(%i: index
    CHECK-NOT: loop.load %x, %{{[0-9]+}} :
    CHECK: loop.load %x, %i :
    """)
    np.testing.assert_array_equal(run_func(parse_module(out), "f", [np.arange(1, 5, dtype=np.int32).reshape(4, 1)]), 10)


def test_softmax_evaluates_its_exp_once_per_element():
    """CHECK: the sum of exp(x - m) and the division by it read one buffer of the
    exponentials (lower_reduce.py ``_costly``): one ``arith.exp`` in the loop IR, the
    row loops fused into one by the default loop pipeline; the result as NumPy's."""
    import wiadsl
    from wiadsl.backends.llvm.compile import lower_kernel, tensor_passes
    src = "import nn;\nkernel sm(input x: f32[T, D], output y: f32[T, D]) { y = nn.softmax(x); }"
    module = tensor_passes(wiadsl.jit(src, kernel="sm").ir_for(), 3)
    text = str(lower_kernel(module, "sm", [(64, 33)]).loop_ir)
    assert text.count("arith.exp") == 1 and text.count("func.call @sm.par") == 1, text
    filecheck(text, """
    CHECK: func @sm(
    CHECK: func.call @sm.par0(
    CHECK: func @sm.par0(
    CHECK: arith.max
    CHECK: arith.exp
    CHECK: loop.store
    CHECK: arith.add
    CHECK: arith.div
    """)
    x = np.random.default_rng(2).standard_normal((64, 33)).astype(np.float32)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(wiadsl.jit(src, kernel="sm")(x), e / e.sum(axis=1, keepdims=True),
                               rtol=1e-5, atol=1e-7)
