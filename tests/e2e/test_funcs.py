"""Generic ``func``s, ``const``s and ``import``s (LANGUAGE.md §4) end to end."""

from __future__ import annotations

import numpy as np
import pytest

import wiadsl
from tests.e2e.harness import TARGETS, assert_matches, jit, kernel, rand

BLOCK = """
import nn;                       // stdlib/nn.wia

const EPS = 1e-5;                // compile-time constant

func scale_shift(x, s, b) {      // generic helper, inlined at each call
    return x * s + b;
}

kernel block(input X: f32[T, D], input W: f32[D, D], input g: f32[D],
             input b: f32[D], output Y: f32[T, D]) {
    h = X @ W;
    h = scale_shift(h, g, b);    // rebinding a name makes a new SSA value
    if reduce_max(abs(h)) > 100.0 {
        h = h / reduce_max(abs(h));
    }
    Y = nn.gelu(h);
}
"""


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("scale", [0.1, 100.0])
def test_language_reference_block_program(target, scale):
    from tests.reference import numpy_ref as ref

    x, w = rand((7, 5), seed=1), rand((5, 5), seed=2) * np.float32(scale)
    g, b = rand((5,), seed=3), rand((5,), seed=4)
    h = x @ w * g + b
    if np.max(np.abs(h)) > 100:
        h = h / np.max(np.abs(h))
    assert_matches(kernel(BLOCK, target)(x, w, g, b), ref.gelu(h))


@pytest.mark.parametrize("target", TARGETS)
def test_generic_func_is_instantiated_per_argument_type(target):
    src = """
    func twice(v) { return v + v; }
    kernel k(input a: f32[N], input b: f16[M, N], input n: i32, output x: f32[N],
             output y: f16[M, N], output z: i32, output w: f64) {
        x = twice(a); y = twice(b); z = twice(n); w = twice(0.25);
    }"""
    a, b = rand((7,)), rand((3, 7), np.float16)
    x, y, z, w = kernel(src, target)(a, b, np.int32(21))
    assert_matches(x, a + a)
    assert_matches(y, b + b)
    assert_matches(z, np.int32(42))
    assert_matches(w, np.float64(0.5))


@pytest.mark.parametrize("target", TARGETS)
def test_func_with_branches_loops_and_early_returns(target):
    src = """
    func first_above(x, n, t) {
        for i in range(n) {
            if x[i] > t { return i; }
        }
        return -1;
    }
    func clamp(v, lo, hi) {
        if v < lo { return lo; } else if v > hi { return hi; }
        return v;
    }
    kernel k(input x: f32[N], input t: f32, output i: i64, output c: f32) {
        i = first_above(x, N, t);
        c = clamp(t, -1.0, 1.0);
    }"""
    x = np.array([0.5, -2.0, 3.0, 1.0, 7.0], np.float32)
    f = kernel(src, target)
    for t in (-5.0, 0.75, 2.0, 6.5, 9.0):
        i, c = f(x, np.float32(t))
        above = np.nonzero(x > t)[0]
        assert_matches(i, np.int64(above[0] if above.size else -1))
        assert_matches(c, np.float32(min(max(t, -1.0), 1.0)))


@pytest.mark.parametrize("target", TARGETS)
def test_func_with_compile_time_axis_argument(target):
    src = """
    func sum_over(x, ax) { return reduce_sum(x, axis=ax, keepdims=true); }
    func normalize(x, ax) { return x / sum_over(x, ax); }
    kernel k(input x: f32[M, N], output r: f32[M, N], output c: f32[M, N]) {
        r = normalize(x, 1);
        c = normalize(x, 0);
    }"""
    x = rand((3, 5), np.float32, 1, 0.5, 2)
    r, c = kernel(src, target)(x)
    assert_matches(r, x / x.sum(axis=1, keepdims=True))
    assert_matches(c, x / x.sum(axis=0, keepdims=True))


@pytest.mark.parametrize("target", TARGETS)
def test_consts_numbers_arrays_and_module_consts(target):
    src = """
    import nn;
    const SCALE = 2.5;
    const SHIFT = -3;
    const TABLE = [[1.0, 2.0], [3.0, 4.0]];
    const IDX = [0, 2, 1];
    kernel k(input x: f16[2, 2], output y: f16[2, 2], output t: f64[2, 2], output e: f64,
             output n: i64) {
        y = x * SCALE + SHIFT;
        t = TABLE @ TABLE;
        e = nn.EPS * 2;
        n = reduce_sum(IDX) * SHIFT;
    }"""
    x = rand((2, 2), np.float16)
    y, t, e, n = kernel(src, target)(x)
    table = np.array([[1.0, 2.0], [3.0, 4.0]])
    assert_matches(y, x * 2.5 + -3)
    assert_matches(t, table @ table)
    assert_matches(e, np.float64(2e-5))
    assert_matches(n, np.int64(-9))


@pytest.mark.parametrize("target", TARGETS)
def test_array_literal_in_an_expression_is_weak(target):
    src = """kernel k(input x: f16[N, 3], output y: f16[N, 3], output z: i8[2, 2]) {
        y = x * [1.0, 0.5, -2.0];
        z = cast([[1, 2], [3, 4]], i8) * 3;
    }"""
    x = rand((4, 3), np.float16)
    y, z = kernel(src, target)(x)
    assert_matches(y, x * np.array([1.0, 0.5, -2.0], np.float16))
    assert_matches(z, np.array([[3, 6], [9, 12]], np.int8))


@pytest.mark.parametrize("target", TARGETS)
def test_import_of_a_module_next_to_the_file(target, tmp_path):
    (tmp_path / "helpers.wia").write_text("""
        const K = 3;
        func cube(x) { return x * x * x; }
        func poly(x) { return cube(x) + K * x; }
    """)
    main = tmp_path / "main.wia"
    src = """import helpers;
    kernel k(input x: f32[N], output y: f32[N], output c: i64) {
        y = helpers.poly(x); c = helpers.K;
    }"""
    main.write_text(src)
    mod = jit(src, target, filename=str(main))
    x = rand((7,))
    y, k = mod.k(x)
    assert_matches(y, x * x * x + 3 * x)
    assert_matches(k, np.int64(3))


@pytest.mark.parametrize("target", TARGETS)
def test_several_kernels_share_funcs(target):
    src = """
    func sq(x) { return x * x; }
    kernel a(input x: f32[N], output y: f32[N]) { y = sq(x); }
    kernel b(input x: i32[N], output y: i32[N]) { y = sq(sq(x)); }
    """
    x = rand((5,))
    xi = rand((5,), np.int32, 1, -9, 9)
    assert_matches(kernel(src, target, "a")(x), x * x)
    assert_matches(kernel(src, target, "b")(xi), xi**4)


def test_parameter_named_like_its_kernel():
    src = "kernel k(input x: f32[N], output k: f32[N]) { k = x + 1.0; }"
    x = rand((3,))
    assert_matches(wiadsl.jit(src).k(x), x + np.float32(1))


@pytest.mark.parametrize("target", TARGETS)
def test_comments_of_both_forms(target):
    src = """/* a block comment
       over two lines */ kernel k(input x: f32[N], /* inline */ output y: f32[N]) {
        y = x /* not a division */ * 2.0;  // to end of line
    }"""
    x = rand((7,))
    assert_matches(kernel(src, target)(x), x * np.float32(2))
