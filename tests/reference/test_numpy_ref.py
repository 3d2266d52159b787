"""Self-tests of tests/reference/numpy_ref.py against straightforward alternative
formulations (explicit loops, math module, textbook identities) on tiny inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.reference import numpy_ref as R

RNG = np.random.default_rng(1234)


def randf(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


# ------------------------------------------------------------------ elementwise


def test_unary_table_covers_language():
    names = "abs neg exp log sqrt rsqrt tanh sigmoid relu sin cos floor ceil erf".split()
    assert sorted(R.UNARY) == sorted(names)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_unary_keep_float_dtype(dtype):
    x = np.abs(randf(5, 3, dtype=dtype)) + 0.5
    for name, fn in R.UNARY.items():
        assert fn(x).dtype == dtype, name


def test_rsqrt_sigmoid_relu_erf_values():
    x = np.array([0.25, 1.0, 4.0, 100.0], np.float32)
    np.testing.assert_allclose(R.rsqrt(x), [2.0, 1.0, 0.5, 0.1], rtol=1e-6)
    y = np.array([-1000.0, -3.0, 0.0, 3.0, 1000.0], np.float32)
    with np.errstate(over="raise", invalid="raise"):
        s = R.sigmoid(y)
    expected = [1 / (1 + math.exp(-v)) if v > -700 else 0.0 for v in y.tolist()]
    np.testing.assert_allclose(s, expected, rtol=1e-6, atol=1e-30)
    assert s.dtype == np.float32
    np.testing.assert_array_equal(R.relu(np.array([-2, 0, 3], np.int32)), [0, 0, 3])
    assert R.relu(np.array([-2, 0, 3], np.int32)).dtype == np.int32
    z = np.linspace(-3, 3, 13)
    np.testing.assert_allclose(R.erf(z), [math.erf(v) for v in z], rtol=1e-15)
    assert R.erf(z.astype(np.float32)).dtype == np.float32
    # integer inputs: the float dtype NumPy's ufuncs give
    assert R.sigmoid(np.array([1, 2], np.int8)).dtype == np.float16
    assert R.erf(np.array([1, 2], np.int32)).dtype == np.float64
    assert R.rsqrt(np.array([4], np.int64)).dtype == np.float64


def test_binary_numpy_semantics():
    a = np.array([-7, 7, -7, 7], np.int32)
    b = np.array([2, -2, -2, 2], np.int32)
    np.testing.assert_array_equal(R.mod(a, b), [1, -1, -1, 1])  # sign of the divisor
    assert R.div(a, b).dtype == np.float64  # true division
    x = np.array([1.0, np.nan, 3.0], np.float32)
    y = np.array([2.0, 0.0, np.nan], np.float32)
    assert np.isnan(R.maximum(x, y)[1:]).all() and R.maximum(x, y)[0] == 2.0
    assert R.minimum(x, y)[0] == 1.0
    np.testing.assert_array_equal(R.where(np.array([True, False]), 1.0, 2.0), [1.0, 2.0])
    # weak Python scalars keep the tensor dtype (NEP 50)
    assert R.mul(x, 2.0).dtype == np.float32
    assert R.pow_(np.float32(2.0) * np.ones(2, np.float32), 3).dtype == np.float32


# ------------------------------------------------------------------ reductions


def test_reductions_axis_list_keepdims():
    x = randf(2, 3, 4)
    loop = np.zeros((1, 3, 1), np.float64)
    for j in range(3):
        for i in range(2):
            for k in range(4):
                loop[0, j, 0] += x[i, j, k]
    got = R.reduce_sum(x, axis=[0, 2], keepdims=True)
    assert got.shape == (1, 3, 1)
    np.testing.assert_allclose(got, loop, rtol=1e-5)
    assert R.reduce_sum(x).shape == ()
    assert R.reduce_max(x, axis=-1).shape == (2, 3)
    np.testing.assert_allclose(R.reduce_mean(x, axis=1), x.sum(axis=1) / 3, rtol=1e-5)
    np.testing.assert_allclose(R.reduce_prod(x, axis=[1]), x[:, 0] * x[:, 1] * x[:, 2], rtol=1e-5)
    assert R.reduce_min(x, axis=[0, 1, 2]) == x.min()


def test_reduce_sum_integer_accumulates_in_i64():
    x = np.full((300,), 100, np.int8)
    assert R.reduce_sum(x) == 30000
    assert R.reduce_sum(x).dtype == np.int64
    assert R.reduce_sum(np.array([True, True, False])) == 2


def test_argmax_argmin():
    x = np.array([[1.0, 5.0, 5.0], [7.0, -1.0, 0.0]], np.float32)
    np.testing.assert_array_equal(R.argmax(x, axis=1), [1, 0])  # first maximum
    np.testing.assert_array_equal(R.argmin(x, axis=0), [0, 1, 1])
    assert R.argmax(x) == 3  # flat index
    assert R.argmax(x, axis=[1], keepdims=True).shape == (2, 1)
    assert R.argmax(x, axis=1).dtype == np.int64
    with pytest.raises(ValueError):
        R.argmax(x, axis=[0, 1])


# ------------------------------------------------------------------ linear algebra


def test_matmul_transpose():
    a, b = randf(3, 4), randf(4, 5)
    loop = np.array(
        [[sum(a[i, k] * b[k, j] for k in range(4)) for j in range(5)] for i in range(3)]
    )
    np.testing.assert_allclose(R.matmul(a, b), loop, rtol=1e-5, atol=1e-6)
    x = randf(2, 3, 4)
    assert R.transpose(x).shape == (4, 3, 2)  # no perm: reverse all axes
    assert R.transpose(x, [0, 2, 1]).shape == (2, 4, 3)
    assert R.transpose(x, [1, 0, 2])[2, 1, 3] == x[1, 2, 3]


# ------------------------------------------------------------------ neural


def conv2d_loop(x, w, stride, padding):
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    sh, sw = stride
    ph, pw = padding
    ho = (h + 2 * ph - kh) // sh + 1
    wo = (wd + 2 * pw - kw) // sw + 1
    out = np.zeros((n, o, ho, wo), np.float64)
    for b in range(n):
        for oc in range(o):
            for i in range(ho):
                for j in range(wo):
                    acc = 0.0
                    for ic in range(c):
                        for di in range(kh):
                            for dj in range(kw):
                                yi, xj = i * sh + di - ph, j * sw + dj - pw
                                if 0 <= yi < h and 0 <= xj < wd:
                                    acc += float(x[b, ic, yi, xj]) * float(w[oc, ic, di, dj])
                    out[b, oc, i, j] = acc
    return out


@pytest.mark.parametrize("stride,padding", [(1, 0), (1, 1), (2, 1), ((2, 1), (0, 2))])
def test_conv2d_against_loops(stride, padding):
    x = randf(2, 3, 7, 6)
    w = randf(4, 3, 3, 2)
    got = R.conv2d(x, w, stride=stride, padding=padding)
    want = conv2d_loop(x, w, R._pair(stride), R._pair(padding))
    assert got.shape == want.shape
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_conv2d_rejects_channel_mismatch():
    with pytest.raises(ValueError):
        R.conv2d(randf(1, 2, 4, 4), randf(1, 3, 3, 3))


@pytest.mark.parametrize("kernel,stride", [(2, None), (3, None), (3, 2), ((2, 3), (1, 2))])
def test_pools_against_loops(kernel, stride):
    x = randf(2, 3, 7, 8)
    kh, kw = R._pair(kernel)
    sh, sw = R._pair(kernel if stride is None else stride)
    ho, wo = (7 - kh) // sh + 1, (8 - kw) // sw + 1
    mx = np.zeros((2, 3, ho, wo), np.float32)
    av = np.zeros((2, 3, ho, wo), np.float64)
    for i in range(ho):
        for j in range(wo):
            win = x[:, :, i * sh : i * sh + kh, j * sw : j * sw + kw]
            mx[:, :, i, j] = win.max(axis=(2, 3))
            av[:, :, i, j] = win.astype(np.float64).mean(axis=(2, 3))
    np.testing.assert_array_equal(R.max_pool(x, kernel=kernel, stride=stride), mx)
    got = R.avg_pool(x, kernel=kernel, stride=stride)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, av, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------ shape and dtype


def test_shape_builtins():
    x = randf(2, 3, 4)
    assert R.flatten(x).shape == (2, 12)
    np.testing.assert_array_equal(R.flatten(x)[1], x[1].ravel())
    assert R.reshape(x, [4, 6]).shape == (4, 6)
    assert R.broadcast_to(np.arange(3), [2, 3]).shape == (2, 3)
    assert R.concat([x, x], axis=1).shape == (2, 6, 4)
    assert R.zeros([2, 2]).dtype == np.float64
    assert R.zeros([2, 2], "f32").dtype == np.float32
    assert R.full([2], 1.5).dtype == np.float64 and R.full([2], 3).dtype == np.int64
    assert R.ones([3], "i32").dtype == np.int32
    np.testing.assert_array_equal(R.full([2], 7, "i8"), np.array([7, 7], np.int8))
    assert R.arange(4).dtype == np.int64
    np.testing.assert_array_equal(R.arange(1, 7, 2), [1, 3, 5])


def test_cast():
    x = np.array([-1.7, -0.5, 0.5, 1.7, 2.5], np.float32)
    np.testing.assert_array_equal(R.cast(x, "i32"), [-1, 0, 0, 1, 2])  # truncation
    assert R.cast(x, "f16").dtype == np.float16
    b = R.cast(np.array([1.0, 1.00390625, 1.01171875, 3.14159265, np.nan], np.float32), "bf16")
    assert b.dtype == np.float32
    # 1 + 2**-8 is halfway between 1 and 1 + 2**-7: ties to even -> 1.0
    # 1 + 3 * 2**-8 is halfway between 1 + 2**-7 and 1 + 2**-6: ties to even -> 1 + 2**-6
    np.testing.assert_array_equal(b[:4], [1.0, 1.0, 1.015625, 3.140625])
    assert np.isnan(b[4])
    assert R.cast(np.array([0, 2, -1]), "bool").tolist() == [False, True, True]


# ------------------------------------------------------------------ quantization


def test_quantize_rounding_zero_point_clamp():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 1000.0, -1000.0, 0.26], np.float32)
    q = R.quantize(x, np.float32(1.0), 0)
    assert q.dtype == np.int8
    np.testing.assert_array_equal(q, [0, 2, 2, 0, -2, 127, -128, 0])  # half to even
    q = R.quantize(x, np.float32(0.5), 3)  # x / 0.5 then + 3
    np.testing.assert_array_equal(q, [4, 6, 8, 2, 0, 127, -128, 4])
    # the division is done in x's dtype (f32), not in f64
    x2 = np.array([0.3], np.float32)
    s = np.float32(0.1)
    assert R.quantize(x2, s, 0)[0] == int(np.rint(np.float32(x2[0] / s)))


def test_dequantize_and_fake_quant():
    q = np.array([-128, -1, 0, 5, 127], np.int8)
    d = R.dequantize(q, np.float32(0.25), 1)
    assert d.dtype == np.float32
    np.testing.assert_array_equal(d, [(v - 1) * 0.25 for v in q.tolist()])
    x = randf(50)
    fq = R.fake_quant(x, np.float32(0.05), -2)
    assert fq.dtype == np.float32
    assert R.fake_quant(x.astype(np.float64), 0.05, 0).dtype == np.float64
    with pytest.raises(TypeError):
        R.quantize(np.array([1, 2]), 1.0, 0)
    inside = (x / 0.05 - 2 > -128) & (x / 0.05 - 2 < 127)
    assert np.all(np.abs(fq - x)[inside] <= 0.025 + 1e-6)


# ------------------------------------------------------------------ stdlib nn


def test_softmax_and_log_softmax():
    x = randf(3, 5) * 10
    direct = np.exp(x.astype(np.float64))
    direct /= direct.sum(axis=-1, keepdims=True)
    s = R.softmax(x)
    assert s.dtype == np.float32
    np.testing.assert_allclose(s, direct, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(s.sum(axis=-1), 1.0, rtol=1e-6)
    big = R.softmax(np.array([1000.0, 1001.0], np.float32))  # stable: no exp overflow
    np.testing.assert_allclose(big, [1 / (1 + math.e), math.e / (1 + math.e)], rtol=1e-6)
    np.testing.assert_allclose(R.log_softmax(x), np.log(direct), rtol=1e-5, atol=1e-5)
    assert np.isfinite(R.log_softmax(np.array([0.0, -1e4], np.float32))).all()
    np.testing.assert_allclose(R.softmax(x, axis=0).sum(axis=0), 1.0, rtol=1e-6)


def test_gelu_silu():
    x = np.linspace(-6, 6, 101)
    exact_erf_form = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x])
    np.testing.assert_allclose(R.gelu(x), exact_erf_form, atol=5e-4)
    tanh_form = np.array(
        [0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v**3))) for v in x]
    )
    np.testing.assert_allclose(R.gelu(x), tanh_form, rtol=1e-12, atol=1e-15)
    assert R.gelu(x.astype(np.float32)).dtype == np.float32
    np.testing.assert_allclose(R.silu(x), x / (1 + np.exp(-x)), rtol=1e-12)


def test_layer_norm_against_np_var():
    x, g, b = randf(4, 8), randf(8), randf(8)
    x64 = x.astype(np.float64)
    want = (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + 1e-5)
    want = want * g + b
    got = R.layer_norm(x, g, b)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(
        R.layer_norm(x, g, b, eps=0.1),
        (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + 0.1) * g + b,
        rtol=1e-4,
        atol=1e-5,
    )


def test_batch_norm_against_channel_loop():
    x = randf(2, 3, 4, 5)
    mean, g, b = randf(3), randf(3), randf(3)
    var = np.abs(randf(3)) + 0.1
    want = np.empty_like(x, dtype=np.float64)
    for c in range(3):
        want[:, c] = (x[:, c] - mean[c]) / math.sqrt(var[c] + 1e-5) * g[c] + b[c]
    got = R.batch_norm(x, mean, var, g, b)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    # the NHWC-transpose formulation used by stdlib/nn.wia gives the same
    xt = np.transpose(x, (0, 2, 3, 1))
    alt = np.transpose((xt - mean) * R.rsqrt(var + 1e-5) * g + b, (0, 3, 1, 2))
    np.testing.assert_allclose(got, alt, rtol=1e-6, atol=1e-6)


def test_attention_against_row_loop():
    q, k, v = randf(3, 4), randf(5, 4), randf(5, 2)
    want = np.zeros((3, 2))
    for t in range(3):
        s = np.array([np.dot(q[t].astype(np.float64), k[j]) / 2.0 for j in range(5)])
        p = np.exp(s - s.max())
        p /= p.sum()
        want[t] = p @ v
    got = R.attention(q, k, v)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    # the "d from reduce_sum of ones" scale used by stdlib/nn.wia
    d_col = np.sum(q * 0.0 + 1.0, axis=-1, keepdims=True)
    alt = R.softmax((q @ k.T) * R.rsqrt(d_col)) @ v
    np.testing.assert_allclose(got, alt, rtol=1e-5, atol=1e-6)
    qb, kb, vb = randf(2, 3, 4), randf(2, 5, 4), randf(2, 5, 2)
    gb = R.attention_batched(qb, kb, vb)
    for i in range(2):
        np.testing.assert_allclose(gb[i], R.attention(qb[i], kb[i], vb[i]), rtol=1e-6)


def test_mlp():
    x, w1, b1, w2, b2 = randf(2, 3), randf(3, 4), randf(4), randf(4, 2), randf(2)
    h = np.array(
        [
            [
                max(0.0, sum(float(x[i, k]) * float(w1[k, j]) for k in range(3)) + b1[j])
                for j in range(4)
            ]
            for i in range(2)
        ]
    )
    np.testing.assert_allclose(R.mlp(x, w1, b1, w2, b2), h @ w2 + b2, rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------------ stdlib linalg


def test_norm_and_gemm():
    x = randf(3, 4)
    np.testing.assert_allclose(R.norm(x), np.linalg.norm(x), rtol=1e-6)
    np.testing.assert_allclose(R.norm(x[0]), math.sqrt(sum(float(v) ** 2 for v in x[0])), rtol=1e-6)
    assert R.norm(x).dtype == np.float32
    a, b, c = randf(3, 4), randf(4, 2), randf(3, 2)
    np.testing.assert_allclose(R.gemm(a, b, c, 2.0, -0.5), 2 * (a @ b) - 0.5 * c, rtol=1e-6)
    assert R.gemm(a, b, c, 2.0, -0.5).dtype == np.float32
