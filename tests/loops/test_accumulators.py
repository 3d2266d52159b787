"""The loop-level ``split-accumulators`` pass: IR text, and the interpreter before and
after. Integer reductions and float max/min must be identical; float sums and
products are reassociated, so they are compared with tolerances (and with NumPy)."""

from __future__ import annotations

import numpy as np
import pytest

from wiadsl.diagnostics import WiaUsageError
from wiadsl.dtypes import DType
from wiadsl.ir import print_module, run_func
from wiadsl.ir.types import INDEX, ScalarType, TensorType
from wiadsl.loops.passes import parse_loop_pipeline
from wiadsl.testing.filecheck import filecheck

from .loop_cases import (
    DOT_SOURCE,
    IMATMUL,
    ROWSUM,
    SOFTMAX,
    SUM,
    check_runs_alike,
    custom_loop_ir,
    inputs_for,
    numpy_ref,
    reduce_1d,
    transform,
)


def test_sum_gets_four_accumulators_combined_pairwise():
    _, after, stats = transform(SUM, "split-accumulators{count=4}")
    assert stats["split-accumulators"]["loops split"] == 1
    filecheck(print_module(after), """
    CHECK: br ^loop({{%[0-9]+}}, %3, [[ZERO]], [[ZERO]], [[ZERO]] : index, f32, f32, f32, f32)
    CHECK-NEXT: ^loop({{%[0-9]+}}: index, %11: f32, %12: f32, %13: f32, %14: f32):
    CHECK-NEXT: arith.cmpi slt, {{%[0-9]+}}, %8 : index
    CHECK-NEXT: cond_br {{%[0-9]+}}, ^body, ^done(%11, %12, %13, %14 : f32, f32, f32, f32)
    CHECK: loop.load %x
    CHECK-NEXT: %19 = arith.add %11, %18 {reassoc} : f32
    CHECK: loop.load %x
    CHECK-NEXT: %26 = arith.add %12, %25 {reassoc} : f32
    CHECK: loop.load %x
    CHECK-NEXT: %33 = arith.add %13, %32 {reassoc} : f32
    CHECK: loop.load %x
    CHECK-NEXT: %40 = arith.add %14, %39 {reassoc} : f32
    CHECK: br ^loop({{%[0-9]+}}, %19, %26, %33, %40 : index, f32, f32, f32, f32)
    CHECK-NEXT: ^done(%45: f32, %46: f32, %47: f32, %48: f32):
    CHECK-NEXT: %49 = arith.add %45, %46 {reassoc} : f32
    CHECK-NEXT: %50 = arith.add %47, %48 {reassoc} : f32
    CHECK-NEXT: %51 = arith.add %49, %50 {reassoc} : f32
    CHECK-NEXT: br ^bb0(%8, %51 : index, f32)
    CHECK-NEXT: ^bb0(%i: index, {{%[0-9]+}}: f32):
    CHECK-NEXT: arith.cmpi slt, %i, %0 : index
    """.replace("[[ZERO]]", "%9"))
    assert "%9 = arith.constant 0.0 : f32" in print_module(after)


@pytest.mark.parametrize("op,ident", [("max", "-inf : f32"), ("min", "inf : f32"), ("prod", "1.0 : f32")])
def test_identities_start_the_extra_accumulators(op, ident):
    _, after, _ = transform(reduce_1d(op), "split-accumulators{count=2}", [(9,)])
    text = print_module(after)
    filecheck(text, f"""
    CHECK: {{{{%[0-9]+}}}} = arith.constant {ident}
    CHECK: ^loop({{{{%[0-9]+}}}}: index, {{{{%[0-9]+}}}}: f32, {{{{%[0-9]+}}}}: f32):
    CHECK: ^done({{{{%[0-9]+}}}}: f32, {{{{%[0-9]+}}}}: f32):
    CHECK-NEXT: arith.{'mul' if op == 'prod' else op}
    """)


def test_static_trip_divisible_by_count_has_no_remainder():
    _, after, _ = transform(SUM, "split-accumulators{count=4}", [(32,)])
    assert print_module(after).count("cond_br") == 1


def _running_sum(lb, args):
    """``y[i] = s += x[i]``: the partial sums are stored, so they must stay sequential."""
    x = args[0]
    n = lb.dim(x, 0)
    y = lb.alloc(DType.F32, [n])

    def body(lb, i, iters):
        s = lb.op("arith.add", [iters[0], lb.load(x, i)], ScalarType(DType.F32))
        lb.store(s, y, i)
        return [s]
    lb.loop(lb.idx(0), n, body, [lb.const(0.0, ScalarType(DType.F32))])
    lb.results.append(y)


def test_observed_partial_values_are_not_split():
    vec = TensorType(DType.F32, (None,))
    before, after, stats = transform(custom_loop_ir(_running_sum, [vec], [vec]), "split-accumulators")
    assert stats["split-accumulators"]["loops split"] == 0
    assert print_module(before) == print_module(after)
    x = np.arange(9, dtype=np.float32)
    np.testing.assert_array_equal(run_func(after, "f", [x])[0], np.cumsum(x))


def _sum_and_count(lb, args):
    """A loop carrying an f32 sum, an i32 count of positives and the index of the last
    positive: the first two split, the third threads through the copies in order."""
    x = args[0]
    n = lb.dim(x, 0)
    f32, i32 = ScalarType(DType.F32), ScalarType(DType.I32)

    def body(lb, i, iters):
        v = lb.load(x, i)
        pos = lb.b.value("arith.cmpf", [v, lb.const(0.0, f32)], ScalarType(DType.BOOL), {"predicate": "ogt"})
        one = lb.select(pos, lb.const(1, i32), lb.const(0, i32))
        return [lb.op("arith.add", [iters[0], v], f32), lb.op("arith.add", [one, iters[1]], i32),
                lb.select(pos, i, iters[2])]
    outs = lb.loop(lb.idx(0), n, body, [lb.const(0.0, f32), lb.const(0, i32), lb.idx(-1)])
    lb.results.extend(outs)


def test_several_iteration_values_split_or_thread():
    vec = TensorType(DType.F32, (None,))
    module = custom_loop_ir(_sum_and_count, [vec], [ScalarType(DType.F32), ScalarType(DType.I32), INDEX])
    before, after, _ = transform(module, "split-accumulators{count=3}")
    filecheck(print_module(after), """
    CHECK: ^loop({{%[0-9]+}}: index, {{%[0-9]+}}: f32, {{%[0-9]+}}: f32, {{%[0-9]+}}: f32, {{%[0-9]+}}: i32, {{%[0-9]+}}: i32, {{%[0-9]+}}: i32, {{%[0-9]+}}: index):
    """)
    for n in (0, 1, 7, 33, 129):
        x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
        s, c, last = run_func(after, "f", [x])
        s0, c0, last0 = run_func(before, "f", [x])
        assert c == c0 == (x > 0).sum() and last == last0
        np.testing.assert_allclose(s, s0, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", ["i32", "i64"])
@pytest.mark.parametrize("op", ["sum", "prod", "max", "min"])
def test_integer_reductions_are_exact(op, dtype):
    before, after, stats = transform(reduce_1d(op, dtype), "split-accumulators{count=4}")
    assert stats["split-accumulators"]["loops split"] == 1
    for n in (1, 7, 33, 129):
        x = np.random.default_rng(n).integers(-3, 4, n).astype(dtype.replace("i", "int"))
        check_runs_alike(before, after, [x], exact=True)


@pytest.mark.parametrize("op", ["max", "min"])
def test_float_max_min_are_exact(op):
    before, after, _ = transform(reduce_1d(op), "split-accumulators{count=4}")
    for n in (1, 7, 33, 129):
        x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
        check_runs_alike(before, after, [x], exact=True, ref=getattr(np, op)(x))


@pytest.mark.parametrize("count", [2, 4])
@pytest.mark.parametrize("src", [SUM, ROWSUM, SOFTMAX, IMATMUL, DOT_SOURCE])
def test_dynamic_extents_run_like_before(src, count):
    before, after, stats = transform(src, f"split-accumulators{{count={count}}}")
    assert stats["split-accumulators"]["loops split"] >= 1
    for n in (0, 1, 7, 33, 129):
        args = inputs_for(src, n)
        check_runs_alike(before, after, args, exact=src is IMATMUL, ref=numpy_ref(src, args))


@pytest.mark.parametrize("n", [1, 3, 7, 8, 33, 129])
@pytest.mark.parametrize("src", [SUM, DOT_SOURCE])
def test_static_extents_run_like_before(src, n):
    shapes = [(n,), (n,)] if src is DOT_SOURCE else [(n,)]
    before, after, _ = transform(src, "split-accumulators{count=4}", shapes)
    args = inputs_for(src, n)
    check_runs_alike(before, after, args, exact=False, ref=numpy_ref(src, args))


def test_options_are_checked():
    (p,) = parse_loop_pipeline("split-accumulators{count=8}")
    assert p.count == 8
    with pytest.raises(WiaUsageError, match="count"):
        parse_loop_pipeline("split-accumulators{count=-1}")
    with pytest.raises(WiaUsageError, match="accumulators"):
        parse_loop_pipeline("split-accumulators{accumulators=2}")
