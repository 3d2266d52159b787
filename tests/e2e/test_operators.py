"""Operators of LANGUAGE.md §6 end to end: arithmetic, comparisons, logic, `@`, with
NumPy 2.x promotion (NEP 50 weak literals, §3) and broadcasting."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tests.e2e.harness import TARGETS, assert_matches, kernel, rand

BINARY_SRC = "kernel k(input a: tensor, input b: tensor, output c: tensor) {{ c = a {op} b; }}"

BROADCAST_PAIRS = [((7,), (7,)), ((3, 1), (1, 5)), ((1,), (33,)), ((2, 1, 4), (3, 1)),
                   ((5,), ())]

ARITH = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.true_divide,
         "%": np.remainder, "**": np.power}
CMP = {"==": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal,
       ">": np.greater, ">=": np.greater_equal}


def operands(op: str, dtype, shapes, seed=0):
    a_shape, b_shape = shapes
    if op == "**":  # NumPy rejects negative integer powers; keep floats real
        return rand(a_shape, dtype, seed, 0.5, 3), rand(b_shape, dtype, seed + 1, 0, 3)
    if op in ("/", "%"):  # no zero divisors
        b = rand(b_shape, dtype, seed + 1, 1, 5)
        return rand(a_shape, dtype, seed, -9, 9), b
    return rand(a_shape, dtype, seed, -9, 9), rand(b_shape, dtype, seed + 1, -9, 9)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("shapes", BROADCAST_PAIRS, ids=str)
@pytest.mark.parametrize("op", list(ARITH))
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_arithmetic_broadcasts_like_numpy(target, op, dtype, shapes):
    a, b = operands(op, dtype, shapes)
    c = kernel(BINARY_SRC.format(op=op), target)(a, b)
    assert_matches(c, ARITH[op](a, b))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("op", list(ARITH))
@pytest.mark.parametrize("dtype", [np.float16, np.int8, np.float64])
def test_arithmetic_small_and_wide_dtypes(target, op, dtype):
    a, b = operands(op, dtype, ((3, 7), (7,)), seed=3)
    if op == "**" and np.dtype(dtype).kind == "i":
        a, b = rand((3, 7), dtype, 3, -2, 2), rand((7,), dtype, 4, 0, 3)
    c = kernel(BINARY_SRC.format(op=op), target)(a, b)
    assert_matches(c, ARITH[op](a, b))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("pair", [(np.float16, np.float32), (np.int8, np.int32),
                                  (np.int32, np.float32), (np.int8, np.float16),
                                  (np.bool_, np.int8), (np.int64, np.float16)], ids=str)
def test_mixed_dtypes_promote_like_numpy(target, pair):
    a, b = rand((4, 3), pair[0], 1, -5, 5), rand((3,), pair[1], 2, -5, 5)
    c = kernel(BINARY_SRC.format(op="+"), target)(a, b)
    assert_matches(c, a + b)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("op", list(CMP))
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float16])
def test_comparisons_give_exact_bools(target, op, dtype):
    a = rand((5, 1), dtype, 0, -3, 3)
    b = rand((1, 6), dtype, 1, -3, 3)
    b[0, 0] = a[0, 0]  # at least one tie
    c = kernel(BINARY_SRC.format(op=op), target)(a, b)
    assert_matches(c, CMP[op](a, b))


def test_float_comparison_with_nan_is_numpy_unordered():
    a = np.array([np.nan, 1.0, np.nan], np.float32)
    b = np.array([np.nan, np.nan, 2.0], np.float32)
    for op, fn in CMP.items():
        c = kernel(BINARY_SRC.format(op=op), "interp")(a, b)
        assert_matches(c, fn(a, b))


@pytest.mark.parametrize("target", TARGETS)
def test_logic_operators_on_bool_tensors(target):
    src = """kernel k(input a: bool[N], input b: bool[N], output c: bool[N], output d: bool[N],
                      output e: bool[N]) {
        c = a && b; d = a || !b; e = !(a && b) == (!a || !b);
    }"""
    a, b = rand((33,), np.bool_, 1), rand((33,), np.bool_, 2)
    c, d, e = kernel(src, target)(a, b)
    assert_matches(c, a & b)
    assert_matches(d, a | ~b)
    assert_matches(e, np.ones(33, bool))


@pytest.mark.parametrize("target", TARGETS)
def test_unary_minus_and_not(target):
    src = """kernel k(input x: f32[N], input i: i8[N], input m: bool[N],
                      output a: f32[N], output b: i8[N], output c: bool[N]) {
        a = -x; b = -i; c = !m;
    }"""
    x, i, m = rand((7,)), rand((7,), np.int8, 0, -100, 100), rand((7,), np.bool_)
    a, b, c = kernel(src, target)(x, i, m)
    assert_matches(a, -x)
    assert_matches(b, -i)
    assert_matches(c, ~m)


@pytest.mark.parametrize("target", TARGETS)
def test_precedence_follows_the_table(target):
    # unary minus binds looser than **: -2 ** 2 is -(2 ** 2); * before +; && before ||
    src = """kernel k(input x: f32[N], output y: f32[N], output b: bool) {
        y = -x ** 2.0 + 3.0 * x - x / 2.0 % 0.75;
        b = 1 < 2 || 3 < 2 && 1 > 2;
    }"""
    x = rand((7,), np.float32, 5, 0.1, 3)
    y, b = kernel(src, target)(x)
    assert_matches(y, -(x**2.0) + 3.0 * x - np.remainder(x / 2.0, 0.75))
    assert_matches(b, np.True_)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("shapes", [((7,), (7,)), ((3, 5), (5, 2)), ((5,), (5, 3)),
                                    ((4, 5), (5,)), ((2, 3, 4), (4, 5)), ((2, 1, 3, 4), (5, 4, 2)),
                                    ((1, 1), (1, 1)), ((33, 7), (7, 1))], ids=str)
def test_matmul_operator_is_numpy_matmul(target, shapes):
    a, b = rand(shapes[0], seed=1), rand(shapes[1], seed=2)
    c = kernel("kernel k(input a: tensor, input b: tensor, output c: tensor) { c = a @ b; }",
               target)(a, b)
    assert_matches(c, np.matmul(a, b))


@pytest.mark.parametrize("target", TARGETS)
def test_integer_matmul_is_exact(target):
    a, b = rand((5, 7), np.int32, 1, -50, 50), rand((7, 3), np.int32, 2, -50, 50)
    c = kernel("kernel k(input a: i32[M, K], input b: i32[K, N], output c: i32[M, N]) "
               "{ c = a @ b; }", target)(a, b)
    assert_matches(c, a @ b)


@pytest.mark.parametrize("target", TARGETS)
def test_float_modulo_and_floor_semantics_of_negatives(target):
    a = np.array([-7.5, -1.0, 0.0, 2.5, 7.0], np.float32)
    b = np.array([2.0, -3.0, 4.0, -1.5, 3.0], np.float32)
    ai, bi = a.astype(np.int32), b.astype(np.int32)
    f = kernel(BINARY_SRC.format(op="%"), target)
    assert_matches(f(a, b), np.remainder(a, b))
    assert_matches(f(ai, bi), np.remainder(ai, bi))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3,
                                                 min_side=1, max_side=9),
       op=st.sampled_from(["+", "-", "*", "max", "<"]),
       seed=st.integers(0, 2**16))
def test_random_broadcast_shapes_match_numpy(shapes, op, seed):
    a, b = rand(shapes.input_shapes[0], seed=seed), rand(shapes.input_shapes[1], seed=seed + 1)
    expr = "max(a, b)" if op == "max" else f"a {op} b"
    src = f"kernel k(input a: tensor, input b: tensor, output c: tensor) {{ c = {expr}; }}"
    want = np.maximum(a, b) if op == "max" else (ARITH | CMP)[op](a, b)
    assert_matches(kernel(src, "interp")(a, b), want)
