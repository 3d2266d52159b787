"""The loop-level ``pipeline-loads`` pass: IR text, and the interpreter before and
after (bit-identical). The interpreter raises on any out-of-range load, so running
zero-trip and odd-sized loops checks that the prologue is guarded and that the last
iteration does not load past the end."""

from __future__ import annotations

import numpy as np
import pytest

from wiadsl.dtypes import DType
from wiadsl.ir import print_module, run_func
from wiadsl.ir.types import ScalarType, TensorType
from wiadsl.loops.counted import find_counted_loops
from wiadsl.testing.filecheck import filecheck

from .loop_cases import (
    DOT_SOURCE,
    IMATMUL,
    RELU,
    ROWSUM,
    SOFTMAX,
    SUM,
    TRANSPOSE,
    check_runs_alike,
    custom_loop_ir,
    inputs_for,
    numpy_ref,
    transform,
)


def test_load_is_issued_one_iteration_ahead_behind_a_guard():
    _, after, stats = transform(SUM, "pipeline-loads")
    assert stats["pipeline-loads"]["loops pipelined"] == 1
    text = print_module(after)
    filecheck(text, """
    CHECK: %4 = arith.cmpi slt, %2, %0 : index
    CHECK: cond_br %4, ^prologue, ^pipelined(%5 : f32)
    CHECK-NEXT: ^prologue:
    CHECK-NEXT: %6 = loop.load %x, %2 : (tensor<?xf32>, index) -> f32
    CHECK-NEXT: br ^pipelined(%6 : f32)
    CHECK-NEXT: ^pipelined(%7: f32):
    CHECK-NEXT: br ^loop(%2, %3, %7 : index, f32, f32)
    CHECK-NEXT: ^loop(%i: index, %8: f32, %9: f32):
    CHECK-NEXT: arith.cmpi slt, %i, %0 : index
    CHECK-NEXT: cond_br {{%[0-9]+}}, ^body, ^done(%8, %9 : f32, f32)
    CHECK-NEXT: ^body:
    CHECK-NOT: loop.load
    CHECK: arith.add %8, %9 {reassoc} : f32
    CHECK: %16 = arith.add %i, %15 : index
    CHECK-NEXT: %17 = arith.cmpi slt, %16, %0 : index
    CHECK-NEXT: %18 = arith.select %17, %16, %i : (i1, index, index) -> index
    CHECK-NEXT: %19 = loop.load %x, %18 : (tensor<?xf32>, index) -> f32
    CHECK-NEXT: br ^loop({{%[0-9]+}}, {{%[0-9]+}}, %19 : index, f32, f32)
    CHECK-NEXT: ^done(%20: f32, %21: f32):
    CHECK-NEXT: return %20 : f32
    """)
    # still a counted loop, with the early value as an iteration value
    (loop,) = find_counted_loops(after["f"])
    assert len(loop.iters) == 2 and loop.exit.args[1].type == ScalarType(DType.F32)


def test_static_trip_count_needs_no_guard():
    _, after, _ = transform(SUM, "pipeline-loads", [(7,)])
    text = print_module(after)
    assert "^prologue" not in text
    filecheck(text, """
    CHECK: ^entry:
    CHECK: loop.load %x, %2
    CHECK-NEXT: br ^loop(
    CHECK: arith.select
    CHECK-NEXT: loop.load %x
    """)


def test_loads_behind_a_check_stay():
    # a user loop's a[i] is range-checked first: loading it early could read out of bounds
    before, after, stats = transform(DOT_SOURCE, "pipeline-loads")
    assert stats["pipeline-loads"]["loops pipelined"] == 0
    text = print_module(after)
    assert text.count("loop.load") == 2 and "^prologue" not in text
    (loop,) = find_counted_loops(after["f"])
    assert [op.name for op in loop.latch.ops].count("loop.load") == 2


def _shift(lb, args):
    """``y[i + 1] = y[i] + x[i]`` on a fresh buffer: the loop reads what it wrote in
    the previous iteration, so y's load must stay put (x's may move)."""
    x = args[0]
    n = lb.dim(x, 0)
    y = lb.alloc(DType.F32, [lb.add(n, lb.idx(1))])
    lb.store(lb.const(0.0, ScalarType(DType.F32)), y, lb.idx(0))

    def body(lb, i, _):
        v = lb.op("arith.add", [lb.load(y, i), lb.load(x, i)], ScalarType(DType.F32))
        lb.store(v, y, lb.add(i, lb.idx(1)))
        return []
    lb.loop(lb.idx(0), n, body)
    lb.results.append(y)


def test_loads_of_written_buffers_stay():
    vec = TensorType(DType.F32, (None,))
    before, after, stats = transform(custom_loop_ir(_shift, [vec], [vec]), "pipeline-loads")
    assert stats["pipeline-loads"]["loops pipelined"] == 1
    body = [op.name for op in find_counted_loops(after["f"])[0].latch.ops]
    assert body.count("loop.load") == 2  # y's load in place, x's next-iteration load
    for n in (0, 1, 7, 33):
        x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
        got = run_func(after, "f", [x])[0]
        np.testing.assert_array_equal(got, run_func(before, "f", [x])[0])
        np.testing.assert_allclose(got, np.concatenate([[0], np.cumsum(x)]), rtol=1e-5, atol=1e-5)


KERNELS = [SUM, ROWSUM, SOFTMAX, RELU, TRANSPOSE, IMATMUL]


@pytest.mark.parametrize("src", KERNELS)
def test_dynamic_extents_run_like_before(src):
    before, after, stats = transform(src, "pipeline-loads")
    assert stats["pipeline-loads"]["loops pipelined"] >= 1
    for n in (0, 1, 7, 33, 129):
        args = inputs_for(src, n)
        check_runs_alike(before, after, args, exact=True, ref=numpy_ref(src, args))


@pytest.mark.parametrize("n", [1, 2, 7, 33, 129])
@pytest.mark.parametrize("src", [SUM, ROWSUM, TRANSPOSE])
def test_static_extents_run_like_before(src, n):
    shapes = [(n,)] if src is SUM else [(5, n)]
    before, after, _ = transform(src, "pipeline-loads", shapes)
    args = inputs_for(src, n)
    check_runs_alike(before, after, args, exact=True, ref=numpy_ref(src, args))


def test_composes_with_the_other_loop_passes():
    pipeline = "pipeline-loads,split-accumulators{count=2},unroll{factor=3},tile{size=4,interchange=true}"
    for src in (SUM, ROWSUM, TRANSPOSE):
        before, after, _ = transform(src, pipeline)
        for n in (0, 1, 7, 33):
            args = inputs_for(src, n)
            check_runs_alike(before, after, args, exact=False, ref=numpy_ref(src, args))
