"""The loop-level ``vectorize`` pass: IR text (CHECK lines), and the interpreter on the
loop IR before and after the pass, against NumPy, on odd sizes (1, 7, 33, 129), empty
(zero-trip) loops, static and dynamic extents; loops it cannot prove stay unchanged."""

from __future__ import annotations

import numpy as np
import pytest

from wiadsl.diagnostics import WiaRuntimeError, WiaUsageError
from wiadsl.ir import parse_module, print_module, run_func, verify
from wiadsl.loops import lower_module
from wiadsl.loops.counted import find_counted_loops
from wiadsl.loops.passes import LOOP_PASSES, parse_loop_pipeline, run_loop_passes
from wiadsl.testing.filecheck import filecheck

CHAIN = """
func @f(%a: tensor<?x?xf32>, %b: tensor<?x?xf32>) -> tensor<?x?xf32> attributes {kernel, outputs = ["y"]} {
^entry:
  %0 = tensor.mul %a, %b : tensor<?x?xf32>
  %1 = tensor.exp %0 : tensor<?x?xf32>
  %2 = tensor.tanh %1 : tensor<?x?xf32>
  %3 = tensor.sigmoid %2 : tensor<?x?xf32>
  %4 = tensor.sub %3, %a : tensor<?x?xf32>
  %5 = tensor.relu %4 : tensor<?x?xf32>
  return %5 : tensor<?x?xf32>
}
"""

ROW_VECTOR = """
func @f(%a: tensor<?x?xf32>, %b: tensor<?xf32>) -> tensor<?x?xf32> attributes {kernel, outputs = ["y"]} {
^entry:
  %0 = tensor.mul %a, %b : (tensor<?x?xf32>, tensor<?xf32>) -> tensor<?x?xf32>
  %c = arith.constant 0.5 : f32
  %m = tensor.cmpf ogt, %0, %c : (tensor<?x?xf32>, f32) -> tensor<?x?xi1>
  %1 = tensor.select %m, %a, %b : (tensor<?x?xi1>, tensor<?x?xf32>, tensor<?xf32>) -> tensor<?x?xf32>
  return %1 : tensor<?x?xf32>
}
"""


def reduce_text(op: str, dtype: str = "f32") -> str:
    return f"""
func @f(%x: tensor<?x?x{dtype}>) -> tensor<?x{dtype}> attributes {{kernel, outputs = ["y"]}} {{
^entry:
  %m = tensor.{op} %x {{axes = [1]}} : tensor<?x?x{dtype}> -> tensor<?x{dtype}>
  return %m : tensor<?x{dtype}>
}}
"""


SOFTMAX = """
func @f(%x: tensor<?x?xf32>) -> tensor<?x?xf32> attributes {kernel, outputs = ["y"]} {
^entry:
  %m = tensor.reduce_max %x {axes = [1], keepdims} : tensor<?x?xf32> -> tensor<?x1xf32>
  %d = tensor.sub %x, %m : (tensor<?x?xf32>, tensor<?x1xf32>) -> tensor<?x?xf32>
  %e = tensor.exp %d : tensor<?x?xf32>
  %s = tensor.reduce_sum %e {axes = [1], keepdims} : tensor<?x?xf32> -> tensor<?x1xf32>
  %y = tensor.div %e, %s : (tensor<?x?xf32>, tensor<?x1xf32>) -> tensor<?x?xf32>
  return %y : tensor<?x?xf32>
}
"""

# a user-written dot product: the float add carries no reassoc attribute
DOT = """
func @dot(%x: tensor<?xf32>, %y: tensor<?xf32>) -> f32 {
^entry:
  %n = tensor.dim %x {axis = 0} : tensor<?xf32> -> index
  %c0 = arith.constant 0 : index
  %z = arith.constant 0.0 : f32
  br ^loop(%c0, %z : index, f32)
^loop(%i: index, %acc: f32):
  %c = arith.cmpi slt, %i, %n : index
  cond_br %c, ^body, ^done(%acc : f32)
^body:
  %a = loop.load %x, %i : (tensor<?xf32>, index) -> f32
  %b = loop.load %y, %i : (tensor<?xf32>, index) -> f32
  %p = arith.mul %a, %b : f32
  %s = arith.add %acc, %p : f32
  %c1 = arith.constant 1 : index
  %next = arith.add %i, %c1 : index
  br ^loop(%next, %s : index, f32)
^done(%r: f32):
  return %r : f32
}
"""

# a prefix sum: the running value is stored every iteration (not a reduction)
SCAN = """
func @scan(%x: tensor<?xf32>) -> tensor<?xf32> {
^entry:
  %n = tensor.dim %x {axis = 0} : tensor<?xf32> -> index
  %o = loop.alloc %n : index -> tensor<?xf32>
  %c0 = arith.constant 0 : index
  %z = arith.constant 0.0 : f32
  br ^loop(%c0, %z : index, f32)
^loop(%i: index, %acc: f32):
  %c = arith.cmpi slt, %i, %n : index
  cond_br %c, ^body, ^done(%acc : f32)
^body:
  %v = loop.load %x, %i : (tensor<?xf32>, index) -> f32
  %s = arith.add %acc, %v : f32
  loop.store %s, %o, %i : (f32, tensor<?xf32>, index) -> ()
  %c1 = arith.constant 1 : index
  %next = arith.add %i, %c1 : index
  br ^loop(%next, %s : index, f32)
^done(%r: f32):
  return %o : tensor<?xf32>
}
"""

# o[i] = 2 * o[i + 1] in place: lane i reads what lane i + 1 ... no, what the
# scalar loop has not written yet; a vector store of lanes i..i+7 before the next
# iteration's loads is still right, but the pass cannot tell the offsets apart safely
SHIFT = """
func @shift(%x: tensor<?xf32>) -> tensor<?xf32> {
^entry:
  %n = tensor.dim %x {axis = 0} : tensor<?xf32> -> index
  %o = loop.alloc %n : index -> tensor<?xf32>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  br ^copy(%c0 : index)
^copy(%i: index):
  %c = arith.cmpi slt, %i, %n : index
  cond_br %c, ^cbody, ^cdone
^cbody:
  %v = loop.load %x, %i : (tensor<?xf32>, index) -> f32
  loop.store %v, %o, %i : (f32, tensor<?xf32>, index) -> ()
  %inext = arith.add %i, %c1 : index
  br ^copy(%inext : index)
^cdone:
  %last = arith.sub %n, %c1 : index
  br ^loop(%c0 : index)
^loop(%j: index):
  %d = arith.cmpi slt, %j, %last : index
  cond_br %d, ^body, ^done
^body:
  %j1 = arith.add %j, %c1 : index
  %w = loop.load %o, %j1 : (tensor<?xf32>, index) -> f32
  %w2 = arith.add %w, %w : f32
  loop.store %w2, %o, %j : (f32, tensor<?xf32>, index) -> ()
  %jnext = arith.add %j, %c1 : index
  br ^loop(%jnext : index)
^done:
  return %o : tensor<?xf32>
}
"""

# a strided read (every other element): not unit stride
STRIDED = """
func @even(%x: tensor<?xf32>, %n: index) -> tensor<?xf32> {
^entry:
  %o = loop.alloc %n : index -> tensor<?xf32>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  br ^loop(%c0 : index)
^loop(%i: index):
  %c = arith.cmpi slt, %i, %n : index
  cond_br %c, ^body, ^done
^body:
  %k = arith.mul %i, %c2 : index
  %v = loop.load %x, %k : (tensor<?xf32>, index) -> f32
  loop.store %v, %o, %i : (f32, tensor<?xf32>, index) -> ()
  %next = arith.add %i, %c1 : index
  br ^loop(%next : index)
^done:
  return %o : tensor<?xf32>
}
"""

SIZES = [1, 7, 33, 129, 0]
rng = np.random.default_rng(7)


def vectorized(module, pipeline: str = "vectorize{width=8}"):
    before = parse_module(print_module(module))
    run_loop_passes(module, pipeline, verify_each=True)
    verify(module)
    text = print_module(module)
    assert print_module(parse_module(text)) == text
    return before, module


def lowered(text: str, shapes=None):
    return lower_module(parse_module(text), shapes)


def count_vector_loops(module) -> int:
    return print_module(module).count("loop.vload") + print_module(module).count("loop.vstore")


# ------------------------------------------------------------------ IR text

def test_elementwise_loop_gets_a_vector_loop_and_a_remainder():
    _, module = vectorized(lowered(ROW_VECTOR, {"f": [(4, 33), (33,)]}))
    filecheck(print_module(module), """
    CHECK: ^body:
    CHECK: arith.constant 32 : index
    CHECK: br ^vloop(
    CHECK: ^vloop(%vi: index):
    CHECK-NEXT: arith.cmpi slt, %vi, {{%[0-9]+}} : index
    CHECK-NEXT: cond_br {{%[0-9]+}}, ^vbody, ^vdone
    CHECK: ^vbody:
    CHECK: loop.vload %a, {{%[0-9]+}} : (tensor<?x?xf32>, index) -> vector<8xf32>
    CHECK: loop.vload %b, %vi : (tensor<?xf32>, index) -> vector<8xf32>
    CHECK: arith.mul {{%[0-9]+}}, {{%[0-9]+}} : vector<8xf32>
    CHECK: loop.broadcast {{%[0-9a-z]+}} : f32 -> vector<8xf32>
    CHECK: arith.cmpf ogt, {{%[0-9]+}}, {{%[0-9]+}} : vector<8xf32>
    CHECK: loop.vload %a
    CHECK: loop.vload %b
    CHECK: arith.select {{.*}} : (vector<8xi1>, vector<8xf32>, vector<8xf32>) -> vector<8xf32>
    CHECK: loop.vstore {{.*}} : (vector<8xf32>, tensor<4x33xf32>, index) -> ()
    CHECK: arith.add %vi, {{%[0-9]+}} : index
    CHECK: ^vdone:
    CHECK-NEXT: br ^bb0(
    CHECK: cond_br {{.*}} {remainder}
    CHECK: loop.load %a
    CHECK: loop.store
    """)


def test_divisible_static_trip_count_drops_the_scalar_loop():
    _, module = vectorized(lowered(ROW_VECTOR, {"f": [(4, 32), (32,)]}))
    text = print_module(module)
    assert "loop.vstore" in text and "loop.load" not in text and "remainder" not in text


def test_reduction_gets_a_vector_accumulator_and_vreduce():
    _, module = vectorized(lowered(reduce_text("reduce_sum")))
    filecheck(print_module(module), """
    CHECK: arith.constant -0.0 : f32
    CHECK-NEXT: loop.broadcast {{%[0-9]+}} : f32 -> vector<8xf32>
    CHECK: ^vloop(%vi: index, %vacc0: vector<8xf32>):
    CHECK: cond_br {{%[0-9]+}}, ^vbody, ^vdone(%vacc0 : vector<8xf32>)
    CHECK: loop.vload %x
    CHECK: arith.add %vacc0, {{%[0-9]+}} {reassoc} : vector<8xf32>
    CHECK: ^vdone({{%[0-9]+}}: vector<8xf32>):
    CHECK-NEXT: loop.vreduce {{%[0-9]+}} {kind = "add"} : vector<8xf32> -> f32
    CHECK-NEXT: arith.add {{%[0-9]+}}, {{%[0-9]+}} {reassoc} : f32
    CHECK-NEXT: br ^bb0(
    CHECK: {remainder}
    """)


def test_max_reduction_starts_at_minus_infinity():
    _, module = vectorized(lowered(reduce_text("reduce_max")))
    filecheck(print_module(module), """
    CHECK: arith.constant -inf : f32
    CHECK: loop.vreduce {{%[0-9]+}} {kind = "max"} : vector<8xf32> -> f32
    """)


def test_both_loops_stay_counted_loops():
    _, module = vectorized(lowered(reduce_text("reduce_sum")))
    loops = find_counted_loops(module["f"])
    steps = sorted(lp.step for lp in loops if lp.is_innermost)
    assert steps == [1, 8]


# ------------------------------------------------------------------ semantics

def check_runs(before, after, args, name="f", exact=True):
    want = run_func(before, name, args)
    got = run_func(after, name, args)
    for w, g in zip(want, got, strict=True):
        if exact:
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5)
    return got


@pytest.mark.parametrize("static", [True, False])
@pytest.mark.parametrize("n", SIZES)
def test_elementwise_chain_matches(n, static):
    a = rng.standard_normal((3, n)).astype(np.float32)
    b = rng.standard_normal((3, n)).astype(np.float32)
    before, after = vectorized(lowered(CHAIN, {"f": [(3, n), (3, n)]} if static else None))
    # dynamic: two ? operands may broadcast against each other, so the lowering
    # picks offsets with selects (not unit stride) and the loop stays scalar
    # (static extents: the lowering flattens the 3 x n loop into one of 3n elements)
    assert bool(count_vector_loops(after)) == (static and 3 * n >= 8)
    (got,) = check_runs(before, after, [a, b])
    x = np.tanh(np.exp(a * b))
    want = np.maximum(1 / (1 + np.exp(-x)) - a, 0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("static", [True, False])
@pytest.mark.parametrize("n", SIZES)
def test_broadcast_compare_select_matches(n, static):
    a = rng.standard_normal((2, n)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    before, after = vectorized(lowered(ROW_VECTOR, {"f": [(2, n), (n,)]} if static else None))
    (got,) = check_runs(before, after, [a, b])
    np.testing.assert_array_equal(got, np.where(a * b > 0.5, a, np.broadcast_to(b, a.shape)))


@pytest.mark.parametrize("op,np_op", [("reduce_sum", np.sum), ("reduce_max", np.max),
                                      ("reduce_min", np.min), ("reduce_prod", np.prod)])
@pytest.mark.parametrize("static", [True, False])
@pytest.mark.parametrize("n", [1, 7, 33, 129])
def test_float_row_reductions_match(op, np_op, n, static):
    x = (rng.standard_normal((3, n)) * (0.3 if op == "reduce_prod" else 1)).astype(np.float32) + \
        (1 if op == "reduce_prod" else 0)
    before, after = vectorized(lowered(reduce_text(op), {"f": [(3, n)]} if static else None))
    if n >= 8 or not static:
        assert "loop.vreduce" in print_module(after)
    exact = op in ("reduce_max", "reduce_min")  # add/mul are reassociated
    (got,) = check_runs(before, after, [x], exact=exact)
    np.testing.assert_allclose(got, np_op(x, axis=1), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op,np_op", [("reduce_sum", np.sum), ("reduce_max", np.max),
                                      ("reduce_prod", np.prod)])
@pytest.mark.parametrize("n", [1, 7, 33, 129])
def test_integer_reductions_are_exact(op, np_op, n):
    x = rng.integers(-3, 4, (4, n)).astype(np.int32)
    before, after = vectorized(lowered(reduce_text(op, "i32")))
    assert "loop.vreduce" in print_module(after)
    (got,) = check_runs(before, after, [x])
    np.testing.assert_array_equal(got, np_op(x, axis=1).astype(np.int32))


def test_nan_propagates_through_a_vector_max():
    x = rng.standard_normal((2, 20)).astype(np.float32)
    x[0, 13] = np.nan
    before, after = vectorized(lowered(reduce_text("reduce_max")))
    (got,) = check_runs(before, after, [x])
    assert np.isnan(got[0]) and got[1] == x[1].max()


@pytest.mark.parametrize("static", [True, False])
@pytest.mark.parametrize("n", SIZES)
def test_softmax_matches(n, static):
    x = rng.standard_normal((3, n)).astype(np.float32)
    before, after = vectorized(lowered(SOFTMAX, {"f": [(3, n)]} if static else None))
    if n == 0:  # the max of an empty row fails alike before and after
        for module in (before, after):
            with pytest.raises(WiaRuntimeError, match="empty"):
                run_func(module, "f", [x])
        return
    (got,) = check_runs(before, after, [x], exact=False)
    if n:
        e = np.exp(x - x.max(axis=1, keepdims=True))
        np.testing.assert_allclose(got, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("n", SIZES)
def test_user_dot_product(n):
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    before, after = vectorized(parse_module(DOT))
    assert "loop.vreduce" in print_module(after)
    (got,) = check_runs(before, after, [x, y], name="dot", exact=False)
    np.testing.assert_allclose(got, np.dot(x, y), rtol=1e-4, atol=1e-5)


def test_zero_trip_reduction_keeps_the_initial_value_bits():
    # -0.0 is the identity of float add: an empty sum of -0.0 stays -0.0
    text = DOT.replace("%z = arith.constant 0.0 : f32", "%z = arith.constant -0.0 : f32")
    before, after = vectorized(parse_module(text))
    (got,) = check_runs(before, after, [np.zeros(0, np.float32)] * 2, name="dot")
    assert np.signbit(got)


def test_after_parallelize_the_outlined_loops_vectorize():
    module = lowered(SOFTMAX, {"f": [(5, 37)]})
    before, after = vectorized(module, "parallelize{min_cost=0},fuse-parallel,vectorize{width=8}")
    assert any(f.name.startswith("f.par") for f in after)
    text = print_module(after)
    assert text.count("loop.vreduce") == 2 and "loop.vstore" in text
    x = rng.standard_normal((5, 37)).astype(np.float32)
    check_runs(before, after, [x], exact=False)


def test_width_four_and_pass_options():
    assert "vectorize" in LOOP_PASSES
    (p,) = parse_loop_pipeline("vectorize{width=4,reassoc=false}")
    assert p.width == 4 and p.reassoc is False
    before, after = vectorized(lowered(CHAIN, {"f": [(2, 13), (2, 13)]}), "vectorize{width=4}")
    assert "vector<4xf32>" in print_module(after) and "vector<8xf32>" not in print_module(after)
    a, b = (rng.standard_normal((2, 13)).astype(np.float32) for _ in range(2))
    check_runs(before, after, [a, b])
    with pytest.raises(WiaUsageError, match="power of two"):
        run_loop_passes(lowered(CHAIN), "vectorize{width=6}")
    with pytest.raises(WiaUsageError, match="interleave"):
        run_loop_passes(lowered(CHAIN), "vectorize{interleave=3}")
    with pytest.raises(WiaUsageError, match="widths"):
        parse_loop_pipeline("vectorize{widths=8}")


@pytest.mark.parametrize("static", [True, False])
@pytest.mark.parametrize("n", [1, 7, 33, 129, 0])
def test_interleaved_accumulators(n, static):
    x = rng.standard_normal((3, n)).astype(np.float32)
    before, after = vectorized(lowered(reduce_text("reduce_sum"), {"f": [(3, n)]} if static else None),
                               "vectorize{width=4,interleave=4}")
    text = print_module(after)
    if not static or n >= 16:  # static trip counts below 16 get fewer copies
        assert "%vacc0_3: vector<4xf32>" in text and text.count("loop.vload") == 4
    elif static and n >= 8:
        assert "%vacc0_1: vector<4xf32>" in text and "%vacc0_2" not in text
    (got,) = check_runs(before, after, [x], exact=False)
    np.testing.assert_allclose(got, x.sum(axis=1), rtol=1e-5, atol=1e-5)
    i = rng.integers(-9, 9, (3, n)).astype(np.int64)
    before, after = vectorized(lowered(reduce_text("reduce_max", "i64")), "vectorize{interleave=2}")
    if n:
        check_runs(before, after, [i])


def test_running_twice_changes_nothing_more():
    _, once = vectorized(lowered(SOFTMAX))
    text = print_module(once)
    run_loop_passes(once, "vectorize{width=8}")
    assert print_module(once) == text


# ------------------------------------------------------------------ left alone

def unchanged(module, pipeline: str = "vectorize{width=8}") -> None:
    text = print_module(module)
    run_loop_passes(module, pipeline, verify_each=True)
    assert print_module(module) == text


def test_reassoc_false_keeps_plain_float_sums_scalar():
    unchanged(parse_module(DOT), "vectorize{reassoc=false}")
    # the lowering's reduce_sum carries reassoc: still vectorized
    _, after = vectorized(lowered(reduce_text("reduce_sum")), "vectorize{reassoc=false}")
    assert "loop.vreduce" in print_module(after)


def test_scan_is_not_a_reduction():
    module = parse_module(SCAN)
    unchanged(module)
    x = rng.standard_normal(19).astype(np.float32)
    np.testing.assert_allclose(run_func(module, "scan", [x])[0], np.cumsum(x), rtol=1e-5, atol=1e-5)


def test_strided_access_is_left_alone():
    unchanged(parse_module(STRIDED))


def test_overlapping_access_to_a_stored_buffer_is_left_alone():
    before, after = vectorized(parse_module(SHIFT))
    text = print_module(after)
    # the copy loop vectorizes, the in-place shift does not
    assert text.count("loop.vstore") == 1 and text.count("loop.vload") == 1
    for n in SIZES[:-1]:
        x = rng.standard_normal(n).astype(np.float32)
        (got,) = check_runs(before, after, [x], name="shift")
        want = x.copy()
        for j in range(n - 1):
            want[j] = 2 * want[j + 1]
        np.testing.assert_array_equal(got, want)


def test_transposes_and_short_static_loops_are_left_alone():
    t = """
func @f(%x: tensor<?x?xf32>) -> tensor<?x?xf32> attributes {kernel, outputs = ["y"]} {
^entry:
  %t = tensor.transpose %x {perm = [1, 0]} : tensor<?x?xf32> -> tensor<?x?xf32>
  return %t : tensor<?x?xf32>
}
"""
    unchanged(lowered(t, {"f": [(9, 11)]}))
    unchanged(lowered(CHAIN, {"f": [(1, 7), (1, 7)]}))  # 7 < 8 lanes


def test_checks_and_calls_are_left_alone():
    checked = DOT.replace("  %p = arith.mul %a, %b : f32\n",
                          "  %p = arith.mul %a, %b : f32\n"
                          "  %ok = arith.cmpf oeq, %p, %p : f32\n"
                          "  loop.check %ok {message = \"nan\"} : i1\n")
    unchanged(parse_module(checked))
    called = DOT.replace("  %p = arith.mul %a, %b : f32\n",
                         "  %p = func.call @sq(%a) : (f32) -> f32\n") + """
func @sq(%v: f32) -> f32 {
^entry:
  %r = arith.mul %v, %v : f32
  return %r : f32
}
"""
    unchanged(parse_module(called))


def test_libm_only_functions_are_left_alone():
    t = """
func @f(%x: tensor<?xf32>) -> tensor<?xf32> attributes {kernel, outputs = ["y"]} {
^entry:
  %l = tensor.log %x : tensor<?xf32>
  return %l : tensor<?xf32>
}
"""
    unchanged(lowered(t))
