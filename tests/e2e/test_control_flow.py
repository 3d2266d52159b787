"""Statements of LANGUAGE.md §5 end to end: rebinding, compound assignment, if / else if /
else, counted loops (zero-trip, negative and dynamic steps), while, nesting, and
outputs assigned on every path."""

from __future__ import annotations

import numpy as np
import pytest

from tests.e2e.harness import TARGETS, assert_matches, kernel, rand

CLASSIFY = """
kernel classify(input x: f32[N], input t: f32, output y: f32[N], output code: i32) {
    if t > 1.0 {
        y = x * 2.0; code = 2;
    } else if (t > 0.0) {
        y = x + 1.0; code = 1;
    } else if t == 0.0 {
        y = x; code = 0;
    } else {
        y = -x; code = -1;
    }
}
"""


def classify_ref(x, t):
    if t > 1:
        return x * np.float32(2), np.int32(2)
    if t > 0:
        return x + np.float32(1), np.int32(1)
    if t == 0:
        return x, np.int32(0)
    return -x, np.int32(-1)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("t", [2.0, 0.5, 0.0, -3.0])
def test_if_else_if_else_chain(target, t):
    x = rand((7,), np.float32, 1)
    y, code = kernel(CLASSIFY, target)(x, np.float32(t))
    want_y, want_code = classify_ref(x, t)
    assert_matches(y, want_y)
    assert_matches(code, want_code)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("scale", [0.5, 200.0])
def test_if_without_else_keeps_the_old_value(target, scale):
    # LANGUAGE.md §1: rescale only when the activations are large
    src = """kernel k(input h: f32[T, D], output y: f32[T, D]) {
        g = h;
        if reduce_max(abs(g)) > 100.0 {
            g = g / reduce_max(abs(g));
        }
        y = g;
    }"""
    h = rand((3, 5), np.float32, 2) * np.float32(scale)
    want = h / np.max(np.abs(h)) if np.max(np.abs(h)) > 100 else h
    assert_matches(kernel(src, target)(h), want)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("a, b", [(1, 1), (1, -1), (-1, 1), (-1, -1)])
def test_nested_ifs_join_values_of_different_types(target, a, b):
    src = """kernel k(input a: i64, input b: i64, input x: f16[N], output y: f16[N],
                      output n: i64) {
        n = 0;
        y = x;
        if a > 0 {
            if b > 0 { y = y * 2.0; n += 3; } else { n = 1; }
            y = y + 1.0;
        } else {
            if (b > 0) { n = a * b; }
        }
    }"""
    x = rand((5,), np.float16, 3)
    y, n = kernel(src, target)(a, b, x)
    want_y, want_n = x, 0
    if a > 0:
        if b > 0:
            want_y, want_n = want_y * 2.0, want_n + 3
        else:
            want_n = 1
        want_y = want_y + 1.0
    elif b > 0:
        want_n = a * b
    assert_matches(y, want_y)
    assert_matches(n, np.int64(want_n))


@pytest.mark.parametrize("target", TARGETS)
def test_join_of_a_weak_literal_and_a_strong_value(target):
    src = """kernel k(input x: f16, input c: bool, output y: f16) {
        if c { v = 0.5; } else { v = x; }
        y = v * 3.0;
    }"""
    f = kernel(src, target)
    assert_matches(f(np.float16(0.25), True), np.float16(1.5))
    assert_matches(f(np.float16(0.25), False), np.float16(0.75))


@pytest.mark.parametrize("target", TARGETS)
def test_branch_that_changes_static_extent(target):
    # a value of static shape [3] meets one of dynamic shape [N] at the join
    src = """kernel k(input x: f32[N], input c: bool, output y: tensor) {
        if c { v = zeros([3], f32); } else { v = x; }
        y = v + 1.0;
    }"""
    f = kernel(src, target)
    x = rand((3,))
    assert_matches(f(x, True), np.ones(3, np.float32))
    assert_matches(f(x, False), x + np.float32(1))


# ------------------------------------------------------------------ for loops


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("n", [0, 1, 7])
def test_counted_loop_carries_values(target, n):
    src = """kernel k(input x: f32[N], input n: i64, output y: f32[N], output s: i64) {
        y = x;
        s = 0;
        for i in range(n) {
            y = y * 0.5 + i;
            s += i * i;
        }
    }"""
    x = rand((7,))
    y, s = kernel(src, target)(x, n)
    want = x.copy()
    for i in range(n):
        want = want * np.float32(0.5) + i
    assert_matches(y, want)
    assert_matches(s, np.int64(sum(i * i for i in range(n))))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("start, stop, step", [(0, 10, 1), (2, 9, 3), (5, 5, 1), (9, 2, 1),
                                               (10, 0, -1), (10, -3, -4), (0, 10, -1),
                                               (-5, 5, 2)])
def test_range_with_start_stop_and_dynamic_step(target, start, stop, step):
    src = """kernel k(input a: i64, input b: i64, input c: i64, output s: i64, output n: i64) {
        s = 0; n = 0;
        for i in range(a, b, c) { s += i; n += 1; }
    }"""
    s, n = kernel(src, target)(start, stop, step)
    r = range(start, stop, step)
    assert_matches(s, np.int64(sum(r)))
    assert_matches(n, np.int64(len(r)))


@pytest.mark.parametrize("target", TARGETS)
def test_range_with_constant_negative_step(target):
    src = """kernel k(input x: f32[N], output y: f32[N]) {
        y = x;
        for i in range(N - 1, 0, -1) { y[i] = y[i] - y[i - 1]; }
    }"""
    x = rand((33,), np.float32, 4)
    want = x.copy()
    for i in range(32, 0, -1):
        want[i] = want[i] - want[i - 1]
    assert_matches(kernel(src, target)(x), want)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("m, n", [(1, 1), (3, 5), (7, 1), (0, 4)])
def test_nested_loops_with_if_inside(target, m, n):
    src = """kernel k(input m: i64, input n: i64, output evens: i64, output odds: i64) {
        evens = 0; odds = 0;
        for i in range(m) {
            for j in range(n) {
                if (i + j) % 2 == 0 { evens += i * j; } else { odds += 1; }
            }
        }
    }"""
    evens, odds = kernel(src, target)(m, n)
    pairs = [(i, j) for i in range(m) for j in range(n)]
    assert_matches(evens, np.int64(sum(i * j for i, j in pairs if (i + j) % 2 == 0)))
    assert_matches(odds, np.int64(sum(1 for i, j in pairs if (i + j) % 2)))


@pytest.mark.parametrize("target", TARGETS)
def test_loop_carried_value_widens_from_weak_to_tensor_dtype(target):
    # acc starts as the weak literal 0 and becomes an f16 value in the body
    src = """kernel k(input x: f16[N], output y: f16) {
        acc = 0;
        for i in range(N) { acc = acc + x[i]; }
        y = acc;
    }"""
    x = rand((7,), np.float16, 5)
    want = np.float16(0)
    for v in x:
        want = want + v
    assert_matches(kernel(src, target)(x), want)


@pytest.mark.parametrize("target", TARGETS)
def test_loop_over_dim_name_range(target):
    src = """kernel k(input A: f32[M, N], output C: f32[M, N]) {
        acc = zeros([M, N], f32);
        for i in range(M) { acc[i, :] = A[i, :] * i; }
        C = acc;
    }"""
    a = rand((5, 3))
    assert_matches(kernel(src, target)(a), a * np.arange(5, dtype=np.float32)[:, None])


# ------------------------------------------------------------------ while


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("scale", [0.5, 1.0, 1000.0])
def test_while_loop_halves_until_small(target, scale):
    src = """kernel k(input x: f32[N], output y: f32[N], output steps: i64) {
        h = x; n = 0;
        while reduce_max(abs(h)) >= 1.0 { h = h * 0.5; n += 1; }
        y = h; steps = n;
    }"""
    x = rand((7,), np.float32, 6) * np.float32(scale)
    h, n = x.copy(), 0
    while np.max(np.abs(h)) >= 1:
        h, n = h * np.float32(0.5), n + 1
    y, steps = kernel(src, target)(x)
    assert_matches(y, h)
    assert_matches(steps, np.int64(n))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("a, b", [(48, 18), (7, 7), (1, 0), (0, 5), (17, 5)])
def test_while_euclid_gcd_with_if_inside(target, a, b):
    src = """kernel gcd(input a: i64, input b: i64, output g: i64, output swaps: i32) {
        x = a; y = b; swaps = 0;
        while (y != 0) {
            t = x % y;
            x = y;
            y = t;
            if x < y { swaps += 1; }
        }
        g = x;
    }"""
    g, swaps = kernel(src, target)(a, b)
    assert_matches(g, np.int64(np.gcd(a, b)))
    assert_matches(swaps, np.int32(0))


@pytest.mark.parametrize("target", TARGETS)
def test_while_with_nested_for(target):
    src = """kernel k(input n: i64, output total: i64, output rounds: i64) {
        total = 0; rounds = 0;
        while total < n {
            for j in range(rounds + 1) { total += j + 1; }
            rounds += 1;
        }
    }"""
    for n in (0, 1, 10, 50):
        total, rounds = 0, 0
        while total < n:
            for j in range(rounds + 1):
                total += j + 1
            rounds += 1
        got_total, got_rounds = kernel(src, target)(n)
        assert_matches(got_total, np.int64(total))
        assert_matches(got_rounds, np.int64(rounds))


# ------------------------------------------------------------------ rebinding


@pytest.mark.parametrize("target", TARGETS)
def test_rebinding_and_compound_assignment(target):
    src = """kernel k(input x: f32[N], input y: i32[N], output a: f32[N], output b: i32[N]) {
        a = x; a += 1.0; a *= x; a -= 0.5; a /= 2.0;
        b = y; b += 3; b *= y; b -= 1;
    }"""
    x, y = rand((7,)), rand((7,), np.int32, 1, -9, 9)
    a, b = kernel(src, target)(x, y)
    assert_matches(a, ((x + np.float32(1)) * x - np.float32(0.5)) / np.float32(2))
    assert_matches(b, (y + 3) * y - 1)


# ------------------------------------------------------------------ swaps (parallel copies)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("c", [True, False])
def test_if_without_else_swapping_two_values(target, c):
    src = """kernel k(input a: f32[N], input b: f32[N], input c: bool, output x: f32[N],
                      output y: f32[N]) {
        x = a; y = b;
        if c { t = x; x = y; y = t; }
    }"""
    a, b = rand((3,), seed=1), rand((3,), seed=2)
    x, y = kernel(src, target)(a, b, c)
    assert_matches(x, b if c else a)
    assert_matches(y, a if c else b)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("n", [0, 1, 2, 5])
def test_loop_swapping_carried_values(target, n):
    # the swap problem of block arguments: each back edge passes (y, x) for (x, y)
    src = """kernel k(input n: i64, output x: i64, output y: i64, output z: i64) {
        x = 1; y = 2; z = 3;
        for i in range(n) { t = x; x = y; y = z; z = t; }
    }"""
    vals = [1, 2, 3]
    for _ in range(n):
        vals = vals[1:] + vals[:1]
    got = kernel(src, target)(n)
    for g, w in zip(got, vals):
        assert_matches(g, np.int64(w))


@pytest.mark.parametrize("target", TARGETS)
def test_fibonacci_with_while(target):
    src = """kernel fib(input n: i64, output f: i64) {
        a = 0; b = 1; i = 0;
        while i < n { c = a + b; a = b; b = c; i += 1; }
        f = a;
    }"""
    fibs = [0, 1, 1, 2, 3, 5, 8, 13, 21, 34, 55]
    for n in (0, 1, 2, 10):
        assert_matches(kernel(src, target)(n), np.int64(fibs[n]))
