"""The stdlib as LANGUAGE.md §7 names it, called with its defaults and with `axis=` /
`eps=` by keyword, on every target (interp, cpu -O0/-O3, ptxsim, systolic) at odd
sizes, against NumPy (tests/reference/numpy_ref.py)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.e2e.harness import assert_matches, rand
from tests.e2e.numerics import SIZES, TARGETS, kernel
from tests.reference import numpy_ref as ref

SOFTMAXES = """import nn;
kernel k(input x: f32[M, N], output a: f32[M, N], output b: f32[M, N],
         output c: f32[M, N], output d: f32[M, N]) {
    a = nn.softmax(x);
    b = nn.softmax(x, axis=0);
    c = nn.log_softmax(x, axis=-2);
    d = nn.log_softmax(x, -1);
}"""

NORMS = """import nn;
kernel k(input x: f32[M, N], input g: f32[N], input b: f32[N], output a: f32[M, N],
         output c: f32[M, N], output r: f32[M, N], output s: f32[M, N]) {
    a = nn.layer_norm(x, g, b);
    c = nn.layer_norm(x, g, b, eps=0.25);
    r = nn.rms_norm(x, g);
    s = nn.rms_norm(x, eps=0.5, gamma=g);
}"""

BATCH_NORM = """import nn;
kernel k(input x: f32[N, C, H, W], input m: f32[C], input v: f32[C], input g: f32[C],
         input b: f32[C], output y: f32[N, C, H, W], output z: f32[N, C, H, W]) {
    y = nn.batch_norm(x, m, v, g, b);
    z = nn.batch_norm(x, m, v, g, b, eps=0.5);
}"""

LINALG_NORMS = """import linalg;
func sum_sq(x, axis=none) { return reduce_sum(x * x, axis=axis); }
kernel k(input x: f32[B, M, N], output a: f32, output r: f32[B, M], output c: f32[N],
         output f: f32[B], output n: f32, output s: f32[M]) {
    a = linalg.norm(x);
    r = linalg.norm(x, axis=-1);
    c = linalg.norm(x, axis=[0, 1]);
    f = linalg.norm(x, [1, 2]);
    n = linalg.norm(x, axis=none);
    s = sum_sq(x, axis=[0, 2]);
}"""

ATTENTION = """import nn;
kernel k(input q: f32[T, D], input k: f32[S, D], input v: f32[S, E], output y: f32[T, E]) {
    y = nn.attention(q, k, v);
}"""

@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("n", SIZES)
def test_softmax_and_log_softmax_by_axis(target: str, n: int) -> None:
    x = rand((3, n), seed=n, low=-4, high=4)
    a, b, c, d = kernel(SOFTMAXES, target)(x)
    assert_matches(a, ref.softmax(x))
    assert_matches(b, ref.softmax(x, axis=0))
    assert_matches(c, ref.log_softmax(x, axis=-2))
    assert_matches(d, ref.log_softmax(x, axis=-1))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("n", SIZES)
def test_layer_norm_and_rms_norm_eps(target: str, n: int) -> None:
    x = rand((2, n), seed=n)
    g, b = rand((n,), seed=n + 1, low=0.5, high=1.5), rand((n,), seed=n + 2)
    a, c, r, s = kernel(NORMS, target)(x, g, b)
    assert_matches(a, ref.layer_norm(x, g, b))
    assert_matches(c, ref.layer_norm(x, g, b, eps=0.25))
    assert_matches(r, ref.rms_norm(x, g))
    assert_matches(s, ref.rms_norm(x, g, eps=0.5))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("c", [1, 7])
def test_batch_norm_eps(target: str, c: int) -> None:
    x = rand((2, c, 3, 5), seed=c)
    m, g, b = rand((c,), seed=1), rand((c,), seed=2), rand((c,), seed=3)
    v = rand((c,), seed=4, low=0.0, high=2.0)
    y, z = kernel(BATCH_NORM, target)(x, m, v, g, b)
    assert_matches(y, ref.batch_norm(x, m, v, g, b))
    assert_matches(z, ref.batch_norm(x, m, v, g, b, eps=0.5))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("n", SIZES)
def test_linalg_norm_by_axis(target: str, n: int) -> None:
    """`axis=` an int, a list, positional, `none`; the default is every axis; a func
    of the user's that defaults its axis to none."""
    x = rand((2, 3, n), seed=n)
    a, r, c, f, whole, s = kernel(LINALG_NORMS, target)(x)
    assert_matches(a, ref.norm(x))
    assert_matches(r, ref.norm(x, axis=-1))
    assert_matches(c, ref.norm(x, axis=[0, 1]))
    assert_matches(f, ref.norm(x, axis=[1, 2]))
    assert_matches(whole, ref.norm(x))
    assert_matches(s, np.sum(x * x, axis=(0, 2)))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("d", SIZES)
def test_attention_scales_by_dim(target: str, d: int) -> None:
    q, k, v = rand((7, d), seed=1), rand((5, d), seed=2), rand((5, 3), seed=3)
    assert_matches(kernel(ATTENTION, target)(q, k, v), ref.attention(q, k, v))
