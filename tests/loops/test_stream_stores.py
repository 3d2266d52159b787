"""The loop-level ``stream-stores`` pass: a loop that writes a large buffer its
function never reads is vectorized (two vector bodies per iteration) and its vector
stores into that buffer get the ``nontemporal`` attribute. IR text (CHECK lines), the
interpreter before and after against NumPy on odd sizes, and the loops it must leave
alone: small buffers, run-time sizes, buffers the function reads back."""

from __future__ import annotations

import numpy as np
import pytest

from wiadsl.ir import parse_module, print_module, run_func, verify
from wiadsl.loops import lower_module
from wiadsl.loops.passes import parse_loop_pipeline, run_loop_passes
from wiadsl.testing.filecheck import filecheck

FUSED = """
func @f(%a: tensor<?xf32>, %b: tensor<?xf32>, %c: tensor<?xf32>) -> tensor<?xf32> attributes {kernel, outputs = ["y"], arg_dims = [["N"], ["N"], ["N"]]} {
^entry:
  %0 = tensor.mul %a, %b : tensor<?xf32>
  %1 = tensor.add %0, %c : tensor<?xf32>
  %2 = tensor.relu %1 : tensor<?xf32>
  return %2 : tensor<?xf32>
}
"""

# stores into %o, then reads it back: streaming it past the caches would slow the read
READ_BACK = """
func @g(%x: tensor<64xf32>) -> f32 {
^entry:
  %o = loop.alloc : tensor<64xf32>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = arith.constant 64 : index
  br ^loop(%c0 : index)
^loop(%i: index):
  %c = arith.cmpi slt, %i, %n : index
  cond_br %c, ^body, ^done
^body:
  %v = loop.load %x, %i : (tensor<64xf32>, index) -> f32
  %w = arith.mul %v, %v : f32
  loop.store %w, %o, %i : (f32, tensor<64xf32>, index) -> ()
  %next = arith.add %i, %c1 : index
  br ^loop(%next : index)
^done:
  %r = loop.load %o, %c0 : (tensor<64xf32>, index) -> f32
  return %r : f32
}
"""

rng = np.random.default_rng(11)


def streamed(n: int | None, pipeline: str = "stream-stores{bytes=64,width=8}"):
    module = lower_module(parse_module(FUSED), None if n is None else {"f": [(n,), (n,), (n,)]})
    before = parse_module(print_module(module))
    run_loop_passes(module, pipeline, verify_each=True)
    verify(module)
    text = print_module(module)
    assert print_module(parse_module(text)) == text  # the attribute parses back
    return before, module, text


def test_a_large_output_gets_nontemporal_vector_stores_two_per_iteration():
    _, _, text = streamed(1000)
    filecheck(text, """
    CHECK: ^vloop(%vi: index):
    CHECK: ^vbody:
    CHECK: loop.vload %a, %vi : (tensor<?xf32>, index) -> vector<8xf32>
    CHECK: arith.relu {{%[0-9]+}} : vector<8xf32>
    CHECK-NEXT: loop.vstore {{%[0-9]+}}, {{%[0-9]+}}, %vi {nontemporal} : (vector<8xf32>, tensor<1000xf32>, index) -> ()
    CHECK: arith.add %vi, {{%[0-9]+}} : index
    CHECK-NEXT: loop.vload %a, {{%[0-9]+}} : (tensor<?xf32>, index) -> vector<8xf32>
    CHECK: loop.vstore {{.*}} {nontemporal} : (vector<8xf32>, tensor<1000xf32>, index) -> ()
    CHECK-NEXT: arith.constant 16 : index
    CHECK: ^vdone:
    CHECK: cond_br {{.*}} {parallel, remainder}
    CHECK: loop.store {{.*}} : (f32, tensor<1000xf32>, index) -> ()
    """)


def test_a_buffer_below_the_threshold_is_left_alone():
    _, _, text = streamed(1000, "stream-stores{bytes=4001,width=8}")  # 4000 bytes
    assert "nontemporal" not in text and "loop.vstore" not in text


def test_a_buffer_sized_at_run_time_streams_only_when_large():
    _, _, text = streamed(None)
    filecheck(text, """
    CHECK: = loop.alloc {{%[0-9]+}} : index -> tensor<?xf32>
    CHECK: tensor.dim {{%[0-9]+}} {axis = 0} : tensor<?xf32> -> index
    CHECK-NEXT: arith.mul {{%[0-9]+}}, {{%[0-9]+}} : index
    CHECK-NEXT: arith.constant 64 : index
    CHECK-NEXT: arith.cmpi sge, {{%[0-9]+}}, {{%[0-9]+}} : index
    CHECK-NEXT: cond_br {{%[0-9]+}}, ^vloop({{%[0-9]+}} : index), ^loop({{%[0-9]+}} : index)
    CHECK: loop.vstore {{.*}} {nontemporal} : (vector<8xf32>, tensor<?xf32>, index) -> ()
    CHECK: ^vdone:
    CHECK: ^loop(%i: index):
    CHECK: loop.store {{.*}} : (f32, tensor<?xf32>, index) -> ()
    """)


@pytest.mark.parametrize("n", [0, 1, 7, 15, 16, 33, 129, 1000])
def test_a_run_time_size_computes_what_the_scalar_loop_did(n):
    before, after, _ = streamed(None)  # 64 bytes: the vector loop from 16 elements on
    a, b, c = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
    (want,) = run_func(before, "f", [a, b, c])
    (got,) = run_func(after, "f", [a, b, c])
    np.testing.assert_array_equal(got, want)


def test_a_buffer_the_function_reads_back_is_left_alone():
    module = parse_module(READ_BACK)
    run_loop_passes(module, "stream-stores{bytes=64,width=8}", verify_each=True)
    assert "nontemporal" not in print_module(module)


@pytest.mark.parametrize("n", [1, 7, 33, 129, 1000])
def test_the_streamed_loop_computes_what_the_scalar_one_did(n):
    before, after, text = streamed(n)
    assert ("nontemporal" in text) == (n * 4 >= 64 and n >= 16)  # two vectors of 8 at least
    a, b, c = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
    (want,) = run_func(before, "f", [a, b, c])
    (got,) = run_func(after, "f", [a, b, c])
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, np.maximum(a * b + c, 0), rtol=1e-6, atol=1e-6)


def test_pass_options():
    (p,) = parse_loop_pipeline("stream-stores{bytes=1024,width=4}")
    assert (p.bytes, p.width) == (1024, 4)
    _, _, text = streamed(1000, "stream-stores{bytes=64,width=4}")
    assert "vector<4xf32>" in text and "vector<8xf32>" not in text
