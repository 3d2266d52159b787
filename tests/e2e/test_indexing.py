"""Indexing, slicing and functional slice updates (LANGUAGE.md §5, §6) end to end."""

from __future__ import annotations

import numpy as np
import pytest

import wiadsl
from tests.e2e.harness import TARGETS, assert_matches, kernel, rand

B = np.arange(48, dtype=np.float32).reshape(6, 8)

CONSTANT_VIEWS = [
    "B[2, 3]", "B[-1, -1]", "B[1, :]", "B[:, -2]", "B[1:4, ::3]", "B[::2, 1:-1]",
    "B[::-1, :]", "B[-2:, ::-2]", "B[4:1:-1, 7]", "B[:, 2:2]", "B[1]", "B[10:, :]",
    "B[-100:2, 5:100]", "B[:, ::5]", "B[5:]",
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("expr", CONSTANT_VIEWS)
def test_constant_indices_and_slices(target, expr):
    src = f"kernel k(input B: f32[6, 8], output y: tensor) {{ y = {expr}; }}"
    want = eval(expr, {"B": B})
    assert_matches(kernel(src, target)(B), want)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("i, j", [(0, 0), (5, 7), (-1, -8), (2, -3)])
def test_dynamic_indices_wrap_when_negative(target, i, j):
    src = "kernel k(input B: f32[M, N], input i: i64, input j: i32, output y: f32) " \
          "{ y = B[i, j]; }"
    assert_matches(kernel(src, target)(B, i, np.int32(j)), B[i, j])


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("a, b, s", [(0, 6, 1), (1, 5, 2), (5, 0, -1), (-3, 100, 1),
                                     (4, 4, 1), (-1, -7, -2)])
def test_dynamic_slice_bounds_follow_python(target, a, b, s):
    src = """kernel k(input B: f32[M, N], input a: i64, input b: i64, input s: i64,
                      output y: tensor) { y = B[a:b:s, 1]; }"""
    assert_matches(kernel(src, target)(B, a, b, s), B[a:b:s, 1])


@pytest.mark.parametrize("i", [6, -7, 100])
def test_dynamic_index_out_of_range_is_a_runtime_error(i):
    src = "kernel k(input B: f32[M, N], input i: i64, output y: tensor) { y = B[i, :]; }"
    with pytest.raises(wiadsl.WiaRuntimeError, match="out of range"):
        kernel(src, "interp")(B, i)


def test_dynamic_slice_step_zero_is_a_runtime_error():
    src = "kernel k(input B: f32[M, N], input s: i64, output y: tensor) { y = B[::s, 0]; }"
    with pytest.raises(wiadsl.WiaError):
        kernel(src, "interp")(B, 0)


def test_constant_index_out_of_range_is_a_compile_error():
    with pytest.raises(wiadsl.WiaError, match="out of range"):
        wiadsl.jit("kernel k(input B: f32[6, 8], output y: f32) { y = B[6, 0]; }")


SLICE_UPDATES = [
    ("u[1:-1:2, 0] = 0.0;", lambda u: u.__setitem__((slice(1, -1, 2), 0), 0.0)),
    ("u[:, -1] = B[:, 0];", lambda u: u.__setitem__((slice(None), -1), B[:, 0])),
    ("u[0:2, 2:4] = B[4:6, 5:7];", lambda u: u.__setitem__((slice(0, 2), slice(2, 4)),
                                                           B[4:6, 5:7])),
    ("u[3, 4] = -1.0;", lambda u: u.__setitem__((3, 4), -1.0)),
    ("u[2] = B[0];", lambda u: u.__setitem__(2, B[0])),
    ("u[::-1, 1] = B[:, 2];", lambda u: u.__setitem__((slice(None, None, -1), 1), B[:, 2])),
    ("u[:, :] = B[0, :];", lambda u: u.__setitem__((slice(None), slice(None)), B[0])),
    ("u[1:3, :] = 7;", lambda u: u.__setitem__((slice(1, 3), slice(None)), 7)),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("stmt, ref", SLICE_UPDATES, ids=[s for s, _ in SLICE_UPDATES])
def test_slice_updates_are_functional(target, stmt, ref):
    src = f"""kernel k(input B: f32[6, 8], output U: f32[6, 8], output V: f32[6, 8]) {{
        u = B;
        {stmt}
        U = u;
        V = B;   // the original value is unchanged
    }}"""
    want = B.copy()
    ref(want)
    u, v = kernel(src, target)(B)
    assert_matches(u, want)
    assert_matches(v, B)


@pytest.mark.parametrize("target", TARGETS)
def test_slice_update_with_dynamic_indices_in_loop(target):
    src = """kernel cumsum(input A: f32[M, N], output C: f32[M, N]) {
        acc = A;
        for i in range(1, M) { acc[i, :] = acc[i - 1, :] + A[i, :]; }
        C = acc;
    }"""
    for shape in [(1, 3), (7, 1), (5, 4)]:
        a = rand(shape, np.float32, 3)
        assert_matches(kernel(src, target)(a), np.cumsum(a, axis=0, dtype=np.float32))


@pytest.mark.parametrize("target", TARGETS)
def test_slice_update_of_integer_tensor_casts_floats(target):
    src = """kernel k(input x: i8[N], output y: i8[N]) {
        y = x; y[0:2] = 2.9; y[-1] = -3.7;
    }"""
    x = rand((5,), np.int8, 0, -9, 9)
    want = x.copy()
    want[0:2] = 2
    want[-1] = -3
    assert_matches(kernel(src, target)(x), want)


@pytest.mark.parametrize("target", TARGETS)
def test_index_of_a_three_d_tensor_with_mixed_items(target):
    x = np.arange(2 * 5 * 7, dtype=np.int32).reshape(2, 5, 7)
    src = """kernel k(input x: i32[A, B, C], input j: i64, output y: tensor, output z: tensor) {
        y = x[1, j:, ::2];
        z = x[:, j, -1];
    }"""
    y, z = kernel(src, target)(x, 3)
    assert_matches(y, x[1, 3:, ::2])
    assert_matches(z, x[:, 3, -1])
