"""Dtype promotion (LANGUAGE.md §3): NEP 50 weak literals, dims and loop indices; strong
declared scalar inputs; integer ``/`` gives f64; ``cast``; output dtypes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.e2e.harness import TARGETS, assert_matches, kernel, rand

WEAK_CASES = [
    # (expression in x, NumPy with a Python scalar, input dtype)
    ("x * 2.0", lambda x: x * 2.0, np.float16),
    ("x * 2.0", lambda x: x * 2.0, np.float32),
    ("2.5 - x", lambda x: 2.5 - x, np.float16),
    ("x + 1", lambda x: x + 1, np.int8),
    ("x * 3", lambda x: x * 3, np.int32),
    ("x * 2.0", lambda x: x * 2.0, np.int32),  # int tensor meets a float literal: f64
    ("x / 2", lambda x: x / 2, np.int32),      # int true division: f64
    ("x / 2", lambda x: x / 2, np.float16),
    ("x > 0.5", lambda x: x > 0.5, np.float16),
    ("x ** 2", lambda x: x**2, np.float16),
    ("max(x, 0.25)", lambda x: np.maximum(x, 0.25), np.float16),
    ("where(x > 0.0, x, 0.0)", lambda x: np.where(x > 0.0, x, np.float16(0)), np.float16),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("expr, ref, dtype", WEAK_CASES,
                         ids=lambda v: v if isinstance(v, str) else v.__name__)
def test_weak_literals_keep_the_tensor_dtype(target, expr, ref, dtype):
    x = rand((33,), dtype, 0, -4, 4)
    y = kernel(f"kernel k(input x: tensor, output y: tensor) {{ y = {expr}; }}", target)(x)
    assert_matches(y, ref(x))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.int8])
def test_dims_and_loop_indices_are_weak(target, dtype):
    src = """kernel k(input x: tensor, output y: tensor) {
        y = x + N;                     // N = 0 here: a weak i64
        for i in range(3) { y = y + i; }
    }"""
    # a dim name needs a declared dim: rewrite with a typed input per dtype
    name = np.dtype(dtype).name.replace("float", "f").replace("int", "i")
    src = src.replace("input x: tensor", f"input x: {name}[N]")
    x = rand((5,), dtype, 1, -4, 4)
    y = kernel(src, target)(x)
    assert_matches(y, x + 5 + 0 + 1 + 2)


@pytest.mark.parametrize("target", TARGETS)
def test_scalar_computed_from_dims_is_weak(target):
    src = """kernel k(input x: f16[N], output y: f16[N]) {
        s = sqrt(N) * 2.0;  // only from a dim and literals: weak
        y = x / s;
    }"""
    x = rand((9,), np.float16)
    assert_matches(kernel(src, target)(x), x / (math.sqrt(9) * 2.0))  # Python float: weak


@pytest.mark.parametrize("target", TARGETS)
def test_declared_scalar_inputs_are_strong(target):
    src = """kernel k(input x: f16[N], input a: f32, input n: i64, output y: tensor,
                      output z: tensor) {
        y = x * a;   // f16 tensor * strong f32 scalar: f32
        z = x + n;   // f16 + strong i64: f64 (NumPy 2)
    }"""
    x = rand((7,), np.float16)
    y, z = kernel(src, target)(x, np.float32(1.5), 3)
    assert_matches(y, x * np.float32(1.5))
    assert_matches(z, x + np.int64(3))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("src_dtype, dst", [(np.float32, "f16"), (np.float32, "i32"),
                                             (np.float64, "i8"), (np.int32, "f32"),
                                             (np.float32, "bool"), (np.bool_, "f32"),
                                             (np.int64, "i8")], ids=str)
def test_cast_is_numpy_astype(target, src_dtype, dst):
    from tests.reference import numpy_ref as ref

    x = rand((3, 7), src_dtype, 4, -100, 100)
    y = kernel(f"kernel k(input x: tensor, output y: tensor) {{ y = cast(x, {dst}); }}",
               target)(x)
    assert_matches(y, ref.cast(x, dst))


@pytest.mark.parametrize("target", TARGETS)
def test_cast_to_bf16_rounds_to_nearest_even(target):
    from tests.reference import numpy_ref as ref

    x = rand((33,), np.float32, 9, -1000, 1000)
    src = "kernel k(input x: f32[N], output y: f32[N]) { y = cast(cast(x, bf16), f32); }"
    assert_matches(kernel(src, target)(x), ref.cast(x, "bf16"))


@pytest.mark.parametrize("target", TARGETS)
def test_slice_update_casts_to_the_tensor_dtype(target):
    src = """kernel k(input x: i32[N], input v: f32, output y: i32[N]) {
        y = x; y[0] = v; y[1:3] = 7.9;
    }"""
    x = rand((5,), np.int32, 0, -9, 9)
    want = x.copy()
    want[0] = np.float32(-2.7).astype(np.int32)
    want[1:3] = np.int32(7.9)
    assert_matches(kernel(src, target)(x, np.float32(-2.7)), want)


@pytest.mark.parametrize("target", TARGETS)
def test_weak_literal_output_takes_the_declared_dtype(target):
    src = """kernel k(input x: f16[N], output y: f16, output n: i8, output z: f32[N]) {
        y = 0.1; n = 3; z = zeros([N], f32) + 1;
    }"""
    y, n, z = kernel(src, target)(rand((4,), np.float16))
    assert_matches(y, np.float16(0.1))
    assert_matches(n, np.int8(3))
    assert_matches(z, np.ones(4, np.float32))


def test_round_bf16_keeps_a_scalar_a_scalar():
    from wiadsl.ir.numerics import round_bf16

    assert round_bf16(np.asarray(np.float32(3.0))).shape == ()
