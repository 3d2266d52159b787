"""Every builtin of LANGUAGE.md §7 end to end, against tests/reference/numpy_ref.py."""

from __future__ import annotations

import numpy as np
import pytest

from tests.e2e.harness import ODD_SHAPES_2D, TARGETS, assert_matches, kernel, rand
from tests.reference import numpy_ref as ref

UNARY_DOMAIN = {  # (low, high) of the inputs each function is tested on
    "log": (0.05, 5), "sqrt": (0.0, 5), "rsqrt": (0.05, 5), "exp": (-5, 5),
}


def generic(body: str, inputs: str = "input x: tensor") -> str:
    return f"kernel k({inputs}, output y: tensor) {{ y = {body}; }}"


# ------------------------------------------------------------------ elementwise


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("shape", ODD_SHAPES_2D, ids=str)
@pytest.mark.parametrize("fn", sorted(ref.UNARY))
def test_unary_builtin_f32(target, fn, shape):
    x = rand(shape, np.float32, 1, *UNARY_DOMAIN.get(fn, (-4, 4)))
    assert_matches(kernel(generic(f"{fn}(x)"), target)(x), ref.UNARY[fn](x))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", [np.float16, np.float64, np.int32, np.int8])
@pytest.mark.parametrize("fn", sorted(ref.UNARY))
def test_unary_builtin_other_dtypes(target, fn, dtype):
    low, high = UNARY_DOMAIN.get(fn, (-4, 4))
    x = rand((3, 7), dtype, 2, max(low, 1) if np.dtype(dtype).kind == "i" and low > 0 else low,
             high)
    assert_matches(kernel(generic(f"{fn}(x)"), target)(x), ref.UNARY[fn](x))


def test_sigmoid_does_not_overflow_for_large_inputs():
    x = np.array([-1000.0, -80.0, 0.0, 80.0, 1000.0], np.float32)
    assert_matches(kernel(generic("sigmoid(x)"), "interp")(x), ref.sigmoid(x))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("fn", ["max", "min"])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float16])
def test_max_min_are_elementwise_and_broadcast(target, fn, dtype):
    a, b = rand((4, 1), dtype, 1, -5, 5), rand((1, 7), dtype, 2, -5, 5)
    f = kernel(generic(f"{fn}(a, b)", "input a: tensor, input b: tensor"), target)
    assert_matches(f(a, b), ref.BINARY[fn](a, b))


def test_max_propagates_nan_like_numpy():
    a = np.array([np.nan, 1.0, 2.0], np.float32)
    b = np.array([0.0, np.nan, 1.0], np.float32)
    f = kernel(generic("max(a, b)", "input a: tensor, input b: tensor"), "interp")
    assert_matches(f(a, b), np.maximum(a, b))


@pytest.mark.parametrize("target", TARGETS)
def test_where_broadcasts_condition_and_branches(target):
    c = rand((5, 1), np.bool_, 3)
    a, b = rand((1, 7), np.float32, 1), rand((7,), np.float16, 2)
    f = kernel(generic("where(c, a, b)", "input c: tensor, input a: tensor, input b: tensor"),
               target)
    assert_matches(f(c, a, b), ref.where(c, a, b))


@pytest.mark.parametrize("target", TARGETS)
def test_where_with_a_scalar_condition_and_weak_branch(target):
    src = """kernel k(input x: f16[N], input flag: bool, output y: f16[N]) {
        y = where(flag, x, 0.0);
    }"""
    x = rand((7,), np.float16)
    f = kernel(src, target)
    assert_matches(f(x, True), x)
    assert_matches(f(x, False), np.zeros(7, np.float16))


# ------------------------------------------------------------------ reductions

REDUCTION_CALLS = [
    ("", {}), ("axis=0", {"axis": 0}), ("axis=1", {"axis": 1}), ("axis=-1", {"axis": -1}),
    ("axis=[0, 2]", {"axis": [0, 2]}), ("axis=1, keepdims=true", {"axis": 1, "keepdims": True}),
    ("keepdims=true", {"keepdims": True}),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("kwargs, ref_kwargs", REDUCTION_CALLS, ids=[c[0] or "all" for c in
                                                                       REDUCTION_CALLS])
@pytest.mark.parametrize("fn", ["reduce_sum", "reduce_mean", "reduce_max", "reduce_min",
                                "reduce_prod"])
def test_reductions_over_axes(target, fn, kwargs, ref_kwargs):
    x = rand((3, 1, 5), np.float32, 4, 0.5, 1.5)
    call = f"{fn}(x, {kwargs})" if kwargs else f"{fn}(x)"
    assert_matches(kernel(generic(call), target)(x), ref.REDUCTIONS[fn](x, **ref_kwargs))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("fn", ["reduce_sum", "reduce_max", "reduce_min", "reduce_prod",
                                "reduce_mean"])
@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.float16, np.bool_])
def test_reductions_of_other_dtypes_follow_numpy(target, fn, dtype):
    if dtype is np.bool_ and fn in ("reduce_prod", "reduce_mean"):
        pytest.skip("not defined on bool")
    x = rand((7, 3), dtype, 5, -3, 3)
    assert_matches(kernel(generic(f"{fn}(x, axis=0)"), target)(x),
                   ref.REDUCTIONS[fn](x, axis=0))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("fn", ["argmax", "argmin"])
@pytest.mark.parametrize("kwargs, ref_kwargs", [("", {}), ("axis=0", {"axis": 0}),
                                                ("axis=1", {"axis": 1}),
                                                ("axis=-1, keepdims=true",
                                                 {"axis": -1, "keepdims": True})],
                         ids=["flat", "axis0", "axis1", "keepdims"])
def test_argmax_argmin_first_index_as_i64(target, fn, kwargs, ref_kwargs):
    x = rand((5, 7), np.int32, 6, -3, 3)  # small range: many ties, first one wins
    call = f"{fn}(x, {kwargs})" if kwargs else f"{fn}(x)"
    assert_matches(kernel(generic(call), target)(x), ref.REDUCTIONS[fn](x, **ref_kwargs))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("n", [1, 7, 129])
def test_full_reduction_of_odd_lengths(target, n):
    x = rand((n,), np.float32, n)
    src = """kernel k(input x: f32[N], output s: f32, output m: f32, output i: i64) {
        s = reduce_sum(x); m = reduce_mean(x); i = argmax(x);
    }"""
    s, m, i = kernel(src, target)(x)
    assert_matches(s, np.sum(x))
    assert_matches(m, np.mean(x))
    assert_matches(i, np.argmax(x))


# ------------------------------------------------------------------ linear algebra


@pytest.mark.parametrize("target", TARGETS)
def test_matmul_builtin_equals_operator(target):
    a, b = rand((2, 3, 4), seed=1), rand((4, 5), seed=2)
    f = kernel(generic("matmul(a, b)", "input a: tensor, input b: tensor"), target)
    assert_matches(f(a, b), ref.matmul(a, b))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("call, perm", [("transpose(x)", None), ("transpose(x, [0, 2, 1])",
                                                                   [0, 2, 1]),
                                        ("transpose(x, [2, 0, 1])", [2, 0, 1]),
                                        ("transpose(x, [-1, 0, 1])", [2, 0, 1])])
def test_transpose(target, call, perm):
    x = rand((2, 3, 5), np.int32, 1, -9, 9)
    assert_matches(kernel(generic(call), target)(x), ref.transpose(x, perm))


# ------------------------------------------------------------------ neural


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("x_shape, w_shape, stride, padding", [
    ((1, 3, 7, 7), (4, 3, 3, 3), 1, 0), ((2, 2, 8, 9), (3, 2, 3, 3), 2, 1),
    ((1, 1, 5, 5), (1, 1, 1, 1), 1, 0), ((1, 2, 6, 6), (2, 2, 5, 5), 1, 2),
], ids=str)
def test_conv2d(target, x_shape, w_shape, stride, padding):
    x, w = rand(x_shape, seed=1), rand(w_shape, seed=2)
    call = f"conv2d(x, w, stride={stride}, padding={padding})"
    f = kernel(generic(call, "input x: tensor, input w: tensor"), target)
    assert_matches(f(x, w), ref.conv2d(x, w, stride, padding))


@pytest.mark.parametrize("target", TARGETS)
def test_conv2d_default_stride_and_padding(target):
    x, w = rand((1, 2, 5, 6), seed=3), rand((3, 2, 2, 2), seed=4)
    f = kernel("kernel k(input x: f32[N, C, H, W], input w: f32[O, C, 2, 2], output y: tensor)"
               " { y = conv2d(x, w); }", target)
    assert_matches(f(x, w), ref.conv2d(x, w))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("fn", ["max_pool", "avg_pool"])
@pytest.mark.parametrize("args, k, s", [("", 2, None), (", kernel=3", 3, None),
                                        (", kernel=3, stride=1", 3, 1),
                                        (", stride=1", 2, 1)])
def test_pools(target, fn, args, k, s):
    x = rand((2, 3, 7, 9), seed=5)
    want = getattr(ref, fn)(x, k, s)
    assert_matches(kernel(generic(f"{fn}(x{args})"), target)(x), want)


@pytest.mark.parametrize("target", TARGETS)
def test_max_pool_of_integers_keeps_dtype(target):
    x = rand((1, 2, 4, 4), np.int8, 1, -100, 100)
    assert_matches(kernel(generic("max_pool(x)"), target)(x), ref.max_pool(x))


# ------------------------------------------------------------------ shape


@pytest.mark.parametrize("target", TARGETS)
def test_reshape_with_dims_and_literals(target):
    src = """kernel k(input x: f32[M, N], output y: tensor, output z: tensor) {
        y = reshape(x, [N, M]);
        z = reshape(x, [M * N]);
    }"""
    x = rand((3, 5))
    y, z = kernel(src, target)(x)
    assert_matches(y, ref.reshape(x, [5, 3]))
    assert_matches(z, ref.reshape(x, [15]))


@pytest.mark.parametrize("target", TARGETS)
def test_reshape_static_and_to_scalar(target):
    src = """kernel k(input x: i32[2, 6], input one: f32[1], output y: i32[3, 2, 2],
                      output s: f32) {
        y = reshape(x, [3, 2, 2]);
        s = reshape(one, []);
    }"""
    x = np.arange(12, dtype=np.int32).reshape(2, 6)
    y, s = kernel(src, target)(x, np.array([2.5], np.float32))
    assert_matches(y, x.reshape(3, 2, 2))
    assert_matches(s, np.float32(2.5))


def test_reshape_to_a_wrong_count_is_a_runtime_error():
    import wiadsl

    f = kernel("kernel k(input x: f32[N], output y: tensor) { y = reshape(x, [2, 3]); }",
               "interp")
    with pytest.raises(wiadsl.WiaError):
        f(rand((5,)))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("shape", [(4, 1), (2, 3, 4), (1, 2, 1, 3)], ids=str)
def test_flatten_keeps_axis_zero(target, shape):
    x = rand(shape, np.float16)
    assert_matches(kernel(generic("flatten(x)"), target)(x), ref.flatten(x))


@pytest.mark.parametrize("target", TARGETS)
def test_broadcast_to_dims(target):
    src = """kernel k(input x: f32[N], input m: f32[M, N], output y: f32[M, N],
                      output z: tensor) {
        y = broadcast_to(x, [M, N]);
        z = broadcast_to(x, [2, 1, N]);
    }"""
    x, m = rand((7,)), rand((3, 7))
    y, z = kernel(src, target)(x, m)
    assert_matches(y, ref.broadcast_to(x, (3, 7)))
    assert_matches(z, ref.broadcast_to(x, (2, 1, 7)))


@pytest.mark.parametrize("target", TARGETS)
def test_concat_along_axes(target):
    src = """kernel k(input a: tensor, input b: tensor, output y: tensor, output z: tensor) {
        y = concat([a, b, a]);
        z = concat([a, b], axis=-1);
    }"""
    a, b = rand((2, 3), np.float32, 1), rand((2, 3), np.float16, 2)
    y, z = kernel(src, target)(a, b)
    assert_matches(y, ref.concat([a, b, a], 0))
    assert_matches(z, ref.concat([a, b], -1))


@pytest.mark.parametrize("target", TARGETS)
def test_creation_builtins(target):
    src = """kernel k(input x: f32[M, N], output a: tensor, output b: tensor, output c: tensor,
                      output d: tensor, output e: tensor, output f: tensor) {
        a = zeros([M, N], f32);
        b = ones([3], i8);
        c = full([N, 2], 1.5, f16);
        d = arange(N);
        e = zeros([2]);
        f = full([M], 7);
    }"""
    a, b, c, d, e, f = kernel(src, target)(rand((3, 5)))
    assert_matches(a, ref.zeros((3, 5), "f32"))
    assert_matches(b, ref.ones((3,), "i8"))
    assert_matches(c, ref.full((5, 2), 1.5, "f16"))
    assert_matches(d, ref.arange(5))
    assert_matches(e, ref.zeros((2,)))
    assert_matches(f, ref.full((3,), 7))


@pytest.mark.parametrize("target", TARGETS)
def test_arange_of_zero_is_empty(target):
    src = "kernel k(input n: i64, output y: tensor) { y = arange(n); }"
    f = kernel(src, target)
    assert_matches(f(0), ref.arange(0))
    assert_matches(f(7), ref.arange(7))


# ------------------------------------------------------------------ quantization


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_quantize_dequantize_fake_quant(target, dtype):
    src = """kernel k(input x: tensor, input scale: tensor, input zp: tensor,
                      output q: tensor, output d: tensor, output f: tensor) {
        q = quantize(x, scale, zp);
        d = dequantize(q, scale, zp);
        f = fake_quant(x, scale, zp);
    }"""
    x = rand((33,), dtype, 7, -40, 40)
    x[:4] = [0.25, 0.75, -0.25, 1000.0]  # ties round to even; clamping
    scale, zp = np.asarray(0.5, dtype), np.int32(3)
    q, d, f = kernel(src, target)(x, scale, zp)
    assert_matches(q, ref.quantize(x, scale, zp))
    assert_matches(d, ref.dequantize(ref.quantize(x, scale, zp), scale, zp))
    assert_matches(f, ref.fake_quant(x, scale, zp))


@pytest.mark.parametrize("target", TARGETS)
def test_quantize_with_literal_scale_and_zero_point(target):
    src = """kernel k(input x: f32[N], output q: i8[N], output d: f32[N]) {
        q = quantize(x, 0.1, -2);
        d = dequantize(q, 0.1, -2);
    }"""
    x = rand((7,), np.float32, 8, -20, 20)
    q, d = kernel(src, target)(x)
    assert_matches(q, ref.quantize(x, np.float32(0.1), -2))
    assert_matches(d, ref.dequantize(ref.quantize(x, np.float32(0.1), -2), 0.1, -2))


@pytest.mark.parametrize("target", TARGETS)
def test_quantize_of_a_scalar(target):
    src = "kernel k(input x: f32, output q: i8) { q = quantize(x, 0.5, 1); }"
    f = kernel(src, target)
    for v in (2.25, -300.0, 0.75):
        assert_matches(f(np.float32(v)), ref.quantize(np.float32(v), np.float32(0.5), 1))
