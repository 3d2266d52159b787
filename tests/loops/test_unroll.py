"""The loop-level ``unroll`` pass: IR text (CHECK lines), the interpreter on the loop
IR before and after the pass (bit-identical: unrolling keeps the order of every
operation) and against NumPy, on odd, zero and static trip counts."""

from __future__ import annotations

import re

import pytest

from wiadsl.diagnostics import WiaUsageError
from wiadsl.ir import print_module
from wiadsl.loops.passes import LOOP_PASSES, parse_loop_pipeline
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
    inputs_for,
    numpy_ref,
    transform,
)


def test_dynamic_loop_gets_a_main_loop_and_the_original_as_remainder():
    _, after, stats = transform(SUM, "unroll{factor=4}")
    assert stats["unroll"]["loops unrolled"] == 1
    text = print_module(after)
    # the main loop stops at lo + (max(n - lo, 0) // 4) * 4; the remainder starts there
    stop = re.search(r"(%[0-9]+) = arith.mul %[0-9]+, %[0-9]+ : index\n  br \^loop", text).group(1)
    filecheck(text, """
    CHECK: %0 = tensor.dim %x
    CHECK: arith.max %0, {{%[0-9]+}} : index
    CHECK-NEXT: arith.constant 4 : index
    CHECK-NEXT: arith.div
    CHECK-NEXT: [[STOP]] = arith.mul
    CHECK-NEXT: br ^loop({{%[0-9]+}}, {{%[0-9]+}} : index, f32)
    CHECK: ^loop({{%[0-9]+}}: index, {{%[0-9]+}}: f32):
    CHECK-NEXT: arith.cmpi slt, {{%[0-9]+}}, [[STOP]] : index
    CHECK: loop.load %x
    CHECK-NEXT: arith.add {{%[0-9]+}}, {{%[0-9]+}} {reassoc} : f32
    CHECK: loop.load %x
    CHECK-NEXT: arith.add {{%[0-9]+}}, {{%[0-9]+}} {reassoc} : f32
    CHECK: loop.load %x
    CHECK-NEXT: arith.add {{%[0-9]+}}, {{%[0-9]+}} {reassoc} : f32
    CHECK: loop.load %x
    CHECK-NEXT: arith.add {{%[0-9]+}}, {{%[0-9]+}} {reassoc} : f32
    CHECK: arith.constant 4 : index
    CHECK-NEXT: arith.add {{%[0-9]+}}, {{%[0-9]+}} : index
    CHECK-NEXT: br ^loop(
    CHECK: ^done({{%[0-9]+}}: f32):
    CHECK-NEXT: br ^bb0([[STOP]], {{%[0-9]+}} : index, f32)
    CHECK: ^bb0(%i: index, {{%[0-9]+}}: f32):
    CHECK-NEXT: arith.cmpi slt, %i, %0 : index
    CHECK: loop.load %x, %i
    CHECK: return
    """.replace("[[STOP]]", stop))
    assert text.count("loop.load") == 5



def test_static_trip_divisible_by_the_factor_keeps_no_remainder():
    _, after, _ = transform(SUM, "unroll{factor=4}", [(8,)])
    text = print_module(after)
    assert text.count("cond_br") == 1 and text.count("loop.load") == 4
    filecheck(text, """
    CHECK: ^loop({{%[0-9]+}}: index, {{%[0-9]+}}: f32):
    CHECK-NEXT: arith.cmpi slt, {{%[0-9]+}}, {{%[0-9]+}} : index
    CHECK: loop.load %x
    CHECK: loop.load %x
    CHECK: loop.load %x
    CHECK: ^done({{%[0-9]+}}: f32):
    CHECK-NEXT: br ^bb0({{%[0-9]+}} : f32)
    CHECK-NEXT: ^bb0({{%[0-9]+}}: f32):
    CHECK-NEXT: return
    """)


def test_small_static_trip_is_unrolled_fully():
    _, after, _ = transform(SUM, "unroll{factor=4}", [(3,)])
    text = print_module(after)
    assert "cond_br" not in text and text.count("loop.load") == 3
    filecheck(text, """
    CHECK: ^entry:
    CHECK: loop.load %x
    CHECK: loop.load %x
    CHECK: loop.load %x
    CHECK-NEXT: arith.add {{%[0-9]+}}, {{%[0-9]+}} {reassoc} : f32
    CHECK: br ^done({{%[0-9]+}} : f32)
    """)


def test_parallel_mark_stays_on_both_loops_of_an_elementwise_loop():
    _, after, _ = transform(RELU, "unroll{factor=2}")
    assert print_module(after).count("{parallel}") == 2


def test_multi_block_bodies_are_left_alone():
    # the row loop of a row sum holds the inner reduction loop: only that one unrolls
    before, after, stats = transform(ROWSUM, "unroll{factor=4}")
    assert stats["unroll"]["loops unrolled"] == 1
    text = print_module(after)
    assert text.count("{parallel}") == 1 and text.count("loop.store") == 1
    assert text.count("loop.load") == 5


def test_factor_one_changes_nothing():
    before, after, stats = transform(SUM, "unroll{factor=1}")
    assert print_module(before) == print_module(after)
    assert stats["unroll"]["loops unrolled"] == 0


KERNELS = [SUM, ROWSUM, SOFTMAX, RELU, TRANSPOSE, IMATMUL, DOT_SOURCE]


@pytest.mark.parametrize("factor", [2, 4])
@pytest.mark.parametrize("src", KERNELS)
def test_dynamic_extents_run_like_before(src, factor):
    before, after, stats = transform(src, f"unroll{{factor={factor}}}")
    assert stats["unroll"]["loops unrolled"] >= 1
    for n in (0, 1, 7, 33, 129):
        args = inputs_for(src, n)
        check_runs_alike(before, after, args, exact=True, ref=numpy_ref(src, args))


@pytest.mark.parametrize("n", [1, 3, 4, 7, 8, 33, 129])
@pytest.mark.parametrize("src", [SUM, ROWSUM, DOT_SOURCE])
def test_static_extents_run_like_before(src, n):
    shapes = [(5, n)] if src is ROWSUM else [(n,), (n,)] if src is DOT_SOURCE else [(n,)]
    before, after, _ = transform(src, "unroll{factor=4}", shapes)
    args = inputs_for(src, n)
    check_runs_alike(before, after, args, exact=True, ref=numpy_ref(src, args))


def test_options_are_checked():
    assert "unroll" in LOOP_PASSES
    (p,) = parse_loop_pipeline("unroll{factor=8}")
    assert p.factor == 8
    with pytest.raises(WiaUsageError, match="factor"):
        parse_loop_pipeline("unroll{factor=0}")
    with pytest.raises(WiaUsageError, match="option 'factor'"):
        parse_loop_pipeline("unroll{factor=four}")
    with pytest.raises(WiaUsageError, match="factors"):
        parse_loop_pipeline("unroll{factors=4}")
