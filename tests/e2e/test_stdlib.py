"""Every stdlib function (LANGUAGE.md §7: stdlib/nn.wia, stdlib/linalg.wia) end to end."""

from __future__ import annotations

import numpy as np
import pytest

from tests.e2e.harness import TARGETS, assert_matches, kernel, rand
from tests.reference import numpy_ref as ref

DTYPES = [np.float32, np.float16]


def nn_kernel(call: str, params: str) -> str:
    return f"import nn;\nkernel k({params}, output y: tensor) {{ y = {call}; }}"


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("fn", ["softmax", "log_softmax", "gelu", "silu"])
@pytest.mark.parametrize("shape", [(1,), (7,), (3, 33), (2, 1, 5)], ids=str)
def test_nn_elementwise_and_softmaxes(target, fn, dtype, shape):
    x = rand(shape, dtype, 1, -3, 3)
    y = kernel(nn_kernel(f"nn.{fn}(x)", "input x: tensor"), target)(x)
    assert_matches(y, getattr(ref, fn)(x))


@pytest.mark.parametrize("target", TARGETS)
def test_softmax_is_stable_for_large_inputs(target):
    x = np.array([[1000.0, 1001.0, 999.0], [-1e4, 0.0, 1e4]], np.float32)
    y = kernel(nn_kernel("nn.softmax(x)", "input x: tensor"), target)(x)
    assert np.all(np.isfinite(y))
    assert_matches(y, ref.softmax(x))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (7, 33), (2, 3, 5)], ids=str)
def test_layer_norm(target, dtype, shape):
    x = rand(shape, dtype, 2)
    g, b = rand(shape[-1:], dtype, 3, 0.5, 1.5), rand(shape[-1:], dtype, 4)
    f = kernel(nn_kernel("nn.layer_norm(x, g, b)",
                         "input x: tensor, input g: tensor, input b: tensor"), target)
    assert_matches(f(x, g, b), ref.layer_norm(x, g, b))


@pytest.mark.parametrize("target", TARGETS)
def test_layer_norm_eps_by_keyword(target):
    x, g, b = rand((4, 7), seed=5), rand((7,), seed=6), rand((7,), seed=7)
    f = kernel(nn_kernel("nn.layer_norm(x, g, b, eps=0.1)",
                         "input x: f32[T, D], input g: f32[D], input b: f32[D]"), target)
    assert_matches(f(x, g, b), ref.layer_norm(x, g, b, 0.1))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("shape", [(1, 1, 1, 1), (2, 3, 5, 7)], ids=str)
def test_batch_norm(target, shape):
    c = shape[1]
    x = rand(shape, seed=8)
    mean, var = rand((c,), seed=9), rand((c,), np.float32, 10, 0.5, 2)
    gamma, beta = rand((c,), seed=11), rand((c,), seed=12)
    params = ", ".join(f"input {n}: f32[C]" for n in ("m", "v", "g", "b"))
    f = kernel(nn_kernel("nn.batch_norm(x, m, v, g, b)", f"input x: f32[N, C, H, W], {params}"),
               target)
    assert_matches(f(x, mean, var, gamma, beta), ref.batch_norm(x, mean, var, gamma, beta))


@pytest.mark.parametrize("target", TARGETS)
def test_batch_norm_eps_by_keyword(target):
    x = rand((1, 2, 3, 3), seed=1)
    mean, var, gamma, beta = (rand((2,), np.float32, s, 0.5, 2) for s in range(4))
    f = kernel(nn_kernel("nn.batch_norm(x, m, v, g, b, eps=0.5)",
                         "input x: tensor, input m: tensor, input v: tensor, input g: tensor, "
                         "input b: tensor"), target)
    assert_matches(f(x, mean, var, gamma, beta), ref.batch_norm(x, mean, var, gamma, beta, 0.5))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("t, s, d, e", [(1, 1, 1, 1), (7, 5, 3, 2), (4, 33, 8, 3)])
def test_attention(target, t, s, d, e):
    q, k, v = rand((t, d), seed=1), rand((s, d), seed=2), rand((s, e), seed=3)
    f = kernel(nn_kernel("nn.attention(q, k, v)",
                         "input q: f32[T, D], input k: f32[S, D], input v: f32[S, E]"), target)
    assert_matches(f(q, k, v), ref.attention(q, k, v))


@pytest.mark.parametrize("target", TARGETS)
def test_attention_batched(target):
    q, k, v = rand((2, 3, 4), seed=1), rand((2, 5, 4), seed=2), rand((2, 5, 3), seed=3)
    f = kernel(nn_kernel("nn.attention_batched(q, k, v)",
                         "input q: tensor, input k: tensor, input v: tensor"), target)
    assert_matches(f(q, k, v), ref.attention_batched(q, k, v))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("t, s", [(1, 1), (7, 5), (4, 33)])
def test_causal_attention(target, dtype, t, s):
    q, k, v = rand((t, 8), dtype, 1), rand((s, 8), dtype, 2), rand((s, 3), dtype, 3)
    f = kernel(nn_kernel("nn.causal_attention(q, k, v)",
                         "input q: tensor, input k: tensor, input v: tensor"), target)
    y = f(q, k, v)
    assert_matches(y, ref.causal_attention(q, k, v))
    np.testing.assert_allclose(y[0], v[0], rtol=1e-3)  # query 0 sees key 0 only


@pytest.mark.parametrize("target", TARGETS)
def test_causal_attention_batched(target):
    q, k, v = rand((2, 5, 4), seed=1), rand((2, 3, 4), seed=2), rand((2, 3, 3), seed=3)
    f = kernel(nn_kernel("nn.causal_attention_batched(q, k, v)",
                         "input q: tensor, input k: tensor, input v: tensor"), target)
    assert_matches(f(q, k, v), ref.causal_attention_batched(q, k, v))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("batch", [(1,), (7,), (2, 3)], ids=str)
def test_mlp(target, batch):
    x = rand(batch + (5,), seed=1)
    w1, b1 = rand((5, 9), seed=2), rand((9,), seed=3)
    w2, b2 = rand((9, 3), seed=4), rand((3,), seed=5)
    f = kernel(nn_kernel("nn.mlp(x, w1, b1, w2, b2)",
                         "input x: tensor, input w1: tensor, input b1: tensor, "
                         "input w2: tensor, input b2: tensor"), target)
    assert_matches(f(x, w1, b1, w2, b2), ref.mlp(x, w1, b1, w2, b2))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
@pytest.mark.parametrize("shape", [(1,), (33,), (3, 7)], ids=str)
def test_linalg_norm(target, dtype, shape):
    x = rand(shape, dtype, 1, -5, 5)
    f = kernel("import linalg;\nkernel k(input x: tensor, output y: tensor) "
               "{ y = linalg.norm(x); }", target)
    assert_matches(f(x), ref.norm(x))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("c_shape", [(), (4,), (3, 4)], ids=str)
def test_linalg_gemm(target, c_shape):
    a, b, c = rand((3, 5), seed=1), rand((5, 4), seed=2), rand(c_shape, seed=3)
    src = """import linalg;
    kernel k(input a: tensor, input b: tensor, input c: tensor, input alpha: f32,
             output y: tensor, output z: tensor) {
        y = linalg.gemm(a, b, c, alpha, 0.5);   // weak beta keeps f32
        z = linalg.gemm(a, b, c, 2, 3);
    }"""
    alpha = np.float32(1.5)
    y, z = kernel(src, target)(a, b, c, alpha)
    assert_matches(y, ref.gemm(a, b, c, alpha, 0.5))
    assert_matches(z, ref.gemm(a, b, c, 2, 3))
