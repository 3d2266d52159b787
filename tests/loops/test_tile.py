"""The loop-level ``tile`` pass: strip-mining and (with ``interchange``) nest tiling,
as IR text and under the interpreter before and after (bit-identical: strip-mining
keeps the order, and nest tiling only reorders independent rows)."""

from __future__ import annotations

import numpy as np
import pytest

from wiadsl.diagnostics import WiaUsageError
from wiadsl.dtypes import DType
from wiadsl.ir import print_module, run_func
from wiadsl.ir.types import TensorType
from wiadsl.loops.counted import find_counted_loops
from wiadsl.loops.passes import parse_loop_pipeline
from wiadsl.testing.filecheck import filecheck

from .loop_cases import (
    DOT_SOURCE,
    IMATMUL,
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


def test_strip_mined_loop_runs_tiles_of_size_iterations():
    _, after, stats = transform(SUM, "tile{size=16}")
    assert stats["tile"]["loops tiled"] == 1
    filecheck(print_module(after), """
    CHECK: br ^tile({{%[0-9]+}}, {{%[0-9]+}} : index, f32)
    CHECK-NEXT: ^tile({{%[0-9]+}}: index, {{%[0-9]+}}: f32):
    CHECK-NEXT: arith.cmpi slt, {{%[0-9]+}}, %0 : index
    CHECK-NEXT: cond_br {{%[0-9]+}}, ^tile_body, ^done({{%[0-9]+}} : f32)
    CHECK-NEXT: ^tile_body:
    CHECK-NEXT: arith.constant 16 : index
    CHECK-NEXT: arith.add
    CHECK-NEXT: arith.min {{%[0-9]+}}, %0 : index
    CHECK-NEXT: br ^loop(
    CHECK-NEXT: ^tile_next({{%[0-9]+}}: f32):
    CHECK-NEXT: arith.constant 16 : index
    CHECK-NEXT: arith.add
    CHECK-NEXT: br ^tile(
    CHECK-NEXT: ^loop(%i: index, {{%[0-9]+}}: f32):
    CHECK-NEXT: arith.cmpi slt, %i, %9 : index
    CHECK-NEXT: cond_br {{%[0-9]+}}, ^body, ^tile_next({{%[0-9]+}} : f32)
    CHECK: loop.load %x, %i
    CHECK: ^done({{%[0-9]+}}: f32):
    CHECK-NEXT: return
    """)
    # the new loops are counted loops: the tile loop outside, the point loop inside
    loops = find_counted_loops(after["f"])
    assert [lp.step for lp in loops] == [1, 16] and loops[0].parent is loops[1]


def test_static_loops_no_longer_than_a_tile_stay():
    before, after, stats = transform(SUM, "tile{size=16}", [(16,)])
    assert stats["tile"]["loops tiled"] == 0
    assert print_module(before) == print_module(after)


def test_perfect_parallel_nest_gets_both_tile_loops_outside():
    _, after, stats = transform(TRANSPOSE, "tile{size=8,interchange=true}")
    assert stats["tile"]["loops tiled"] == 1
    text = print_module(after)
    assert text.count("{parallel}") == 1  # only the outermost tile loop
    filecheck(text, """
    CHECK: br ^tile_i(
    CHECK-NEXT: ^tile_i({{%[0-9]+}}: index):
    CHECK-NEXT: arith.cmpi slt, {{%[0-9]+}}, %1 : index
    CHECK-NEXT: cond_br {{%[0-9]+}}, ^tile_i_body, ^done {parallel}
    CHECK: arith.min {{%[0-9]+}}, %1 : index
    CHECK-NEXT: br ^tile_j(
    CHECK-NEXT: ^tile_j({{%[0-9]+}}: index):
    CHECK-NEXT: arith.cmpi slt, {{%[0-9]+}}, %0 : index
    CHECK-NEXT: cond_br {{%[0-9]+}}, ^tile_j_body, ^tile_i_next
    CHECK-NOT: parallel
    CHECK: arith.min {{%[0-9]+}}, %0 : index
    CHECK-NEXT: br ^loop(
    CHECK: ^loop(%i: index):
    CHECK-NEXT: arith.cmpi slt, %i, {{%[0-9]+}} : index
    CHECK-NEXT: cond_br {{%[0-9]+}}, ^body, ^tile_j_next
    CHECK: loop.load %x
    CHECK: loop.store
    """)
    depth = {lp.header.name_hint: 0 for lp in find_counted_loops(after["f"])}
    loops = find_counted_loops(after["f"])
    for lp in loops:
        d, p = 0, lp.parent
        while p is not None:
            d, p = d + 1, p.parent
        depth[lp.header.name_hint or ""] = d
    assert depth["tile_i"] == 0 and depth["tile_j"] == 1 and depth["loop"] == 2


def test_nests_with_iteration_values_are_only_strip_mined():
    # the row sum's inner loop carries the sum: no interchange, its loop is strip-mined
    _, after, stats = transform(ROWSUM, "tile{size=4,interchange=true}")
    text = print_module(after)
    assert "^tile_i" not in text and text.count("\n^tile(") == 1
    assert stats["tile"]["loops tiled"] == 1


def _serial_nest(lb, args):
    """``y[i, j] = x[i, j] + y[i - 1, j]`` over a 2-D nest *not* marked parallel (row i
    reads row i - 1): a dependence that interchanging must respect."""
    x = args[0]
    rows, cols = lb.dim(x, 0), lb.dim(x, 1)
    y = lb.alloc(DType.F32, [rows, cols])

    def body(lb, ivs):
        i, j = ivs
        off = lb.add(lb.mul(i, cols), j)
        v = lb.load(x, off)
        prev = lb.sub(off, cols)
        has_prev = lb.cmp("sgt", i, lb.idx(0))
        up = lb.load(y, lb.select(has_prev, prev, off))
        lb.store(lb.op("arith.add", [v, lb.select(has_prev, up, lb.const(0.0, v.type))], v.type), y, off)
    lb.nest([rows, cols], body)
    lb.results.append(y)


def test_nest_that_is_not_parallel_is_not_interchanged():
    module = custom_loop_ir(_serial_nest, [TensorType(DType.F32, (None, None))], [TensorType(DType.F32, (None, None))])
    before, after, _ = transform(module, "tile{size=2,interchange=true}")
    assert "^tile_i" not in print_module(after)
    x = np.random.default_rng(0).standard_normal((7, 5)).astype(np.float32)
    np.testing.assert_array_equal(run_func(after, "f", [x])[0], run_func(before, "f", [x])[0])
    np.testing.assert_allclose(run_func(after, "f", [x])[0], np.cumsum(x, axis=0), rtol=1e-5)


KERNELS = [SUM, ROWSUM, SOFTMAX, TRANSPOSE, IMATMUL, DOT_SOURCE]


@pytest.mark.parametrize("pipeline", ["tile{size=4}", "tile{size=3,interchange=true}"])
@pytest.mark.parametrize("src", KERNELS)
def test_dynamic_extents_run_like_before(src, pipeline):
    before, after, stats = transform(src, pipeline)
    assert stats["tile"]["loops tiled"] >= 1
    for n in (0, 1, 7, 33):
        args = inputs_for(src, n)
        check_runs_alike(before, after, args, exact=True, ref=numpy_ref(src, args))


@pytest.mark.parametrize("n", [1, 7, 33, 129])
@pytest.mark.parametrize("src", [SUM, TRANSPOSE])
def test_static_extents_run_like_before(src, n):
    shapes = [(9, n)] if src is TRANSPOSE else [(n,)]
    before, after, _ = transform(src, "tile{size=8,interchange=true}", shapes)
    args = inputs_for(src, n, m=9)
    check_runs_alike(before, after, args, exact=True, ref=numpy_ref(src, args))


def test_options_are_checked():
    (p,) = parse_loop_pipeline("tile{size=32, interchange=true}")
    assert p.size == 32 and p.interchange
    with pytest.raises(WiaUsageError, match="size"):
        parse_loop_pipeline("tile{size=0}")
    with pytest.raises(WiaUsageError, match="option 'interchange'"):
        parse_loop_pipeline("tile{interchange=maybe}")
