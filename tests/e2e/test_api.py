"""The Python API of LANGUAGE.md §8: Modules, kernels, arguments by position or name,
scalars, multiple outputs, output buffers, ``tensor`` specialization, call errors."""

from __future__ import annotations

import numpy as np
import pytest

import wiadsl
from tests.e2e.harness import TARGETS, assert_matches, jit, kernel, rand

MATMUL = """
kernel matmul(input A: f32[M, K], input B: f32[K, N], output C: f32[M, N]) {
    C = A @ B;  // matrix product
}
"""

TWO = """
kernel stats(input x: f32[N], input scale: f32, output total: f32, output scaled: f32[N],
             output n: i64) {
    total = reduce_sum(x);
    scaled = x * scale;
    n = N;
}
kernel fixed(input x: i32[3, 4], input flag: bool, output y: i32[4, 3]) {
    y = transpose(x);
    if flag { y = y * 2; }
}
"""


@pytest.mark.parametrize("target", TARGETS)
def test_module_has_one_attribute_per_kernel(target):
    mod = jit(TWO, target)
    assert set(mod.kernels) == {"stats", "fixed"}
    assert callable(mod.stats) and callable(mod.fixed)
    only = jit(TWO, target, kernel="fixed")
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    assert_matches(only(x, True), x.T * 2)
    assert_matches(mod.fixed(x, False), x.T)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("m, k, n", [(1, 1, 1), (7, 33, 1), (3, 5, 7)])
def test_matmul_on_random_shapes(target, m, k, n):
    a, b = rand((m, k), seed=m), rand((k, n), seed=n)
    assert_matches(kernel(MATMUL, target)(a, b), a @ b)


@pytest.mark.parametrize("target", TARGETS)
def test_inputs_by_position_or_by_name(target):
    f = kernel(MATMUL, target)
    a, b = rand((2, 3)), rand((3, 4), seed=1)
    want = a @ b
    assert_matches(f(a, B=b), want)
    assert_matches(f(B=b, A=a), want)


@pytest.mark.parametrize("target", TARGETS)
def test_outputs_in_declaration_order_with_scalars(target):
    x = rand((7,))
    total, scaled, n = kernel(TWO, target, "stats")(x, 0.5)
    assert_matches(total, np.sum(x))
    assert_matches(scaled, x * np.float32(0.5))
    assert_matches(n, np.int64(7))
    assert isinstance(total, np.floating) and isinstance(n, np.integer)  # NumPy scalars


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("scale", [2, 2.5, np.float32(2.5), True],
                         ids=["int", "float", "np.f32", "bool"])
def test_python_and_numpy_scalar_arguments(target, scale):
    x = rand((5,))
    _, scaled, _ = kernel(TWO, target, "stats")(x, scale)
    assert_matches(scaled, x * np.float32(scale))


@pytest.mark.parametrize("target", TARGETS)
def test_output_buffer_is_written_and_returned(target):
    f = kernel(MATMUL, target)
    a, b = rand((3, 5)), rand((5, 2), seed=1)
    buf = np.full((3, 2), np.nan, np.float32)
    out = f(a, b, C=buf)
    assert out is buf
    assert_matches(buf, a @ b)


@pytest.mark.parametrize("target", TARGETS)
def test_some_output_buffers_of_several(target):
    x = rand((4,))
    buf = np.zeros(4, np.float32)
    total, scaled, n = kernel(TWO, target, "stats")(x, 3.0, scaled=buf)
    assert scaled is buf
    assert_matches(buf, x * np.float32(3))
    assert_matches(total, np.sum(x))


@pytest.mark.parametrize("target", TARGETS)
def test_non_contiguous_inputs_are_read_correctly(target):
    big = rand((6, 10), seed=3)
    a = big[::2, 1::3]      # strided view [3, 3]
    b = big.T[:3, :4]       # Fortran-ordered view [3, 4]
    assert_matches(kernel(MATMUL, target)(a, b), a @ b)


@pytest.mark.parametrize("target", TARGETS)
def test_inputs_are_not_modified(target):
    src = "kernel k(input x: f32[N], output y: f32[N]) { y = x; y[0] = 5.0; }"
    x = rand((3,))
    before = x.copy()
    y = kernel(src, target)(x)
    assert_matches(x, before)
    assert y[0] == 5.0


@pytest.mark.parametrize("target", TARGETS)
def test_tensor_params_specialize_per_dtype_and_rank(target):
    src = """kernel k(input x: tensor, input s: tensor, output y: tensor, output r: tensor) {
        y = x * s + 1;
        r = reduce_sum(x, axis=-1);
    }"""
    f = kernel(src, target)
    for x, s in [(rand((7,), np.float32), np.float32(2)), (rand((3, 5), np.float16), 2.0),
                 (rand((2, 3, 4), np.int8, 0, -5, 5), np.int8(3)),
                 (rand((7,), np.float32, 9), np.float32(-1)),
                 (rand((1,), np.float64), np.float64(0.5))]:
        y, r = f(x, s)
        s_ref = s if isinstance(s, np.generic) else np.asarray(s)  # a Python float: f64 0-d
        assert_matches(y, x * s_ref + 1)
        assert_matches(r, np.sum(x, axis=-1))


@pytest.mark.parametrize("target", TARGETS)
def test_tensor_output_takes_the_type_of_its_value(target):
    src = "kernel k(input x: f16[N], output y: tensor, output c: tensor) " \
          "{ y = x / 2; c = reduce_max(x) > 0.0; }"
    x = rand((7,), np.float16)
    y, c = kernel(src, target)(x)
    assert_matches(y, x / 2)
    assert_matches(c, np.max(x) > 0)


@pytest.mark.parametrize("target", TARGETS)
def test_bf16_parameters_take_float32_arrays(target):
    from tests.reference import numpy_ref as ref

    src = "kernel k(input x: bf16[N], output y: bf16[N]) { y = x * 3.0; }"
    x = ref.round_to_bf16(rand((9,)))
    assert_matches(kernel(src, target)(x), ref.round_to_bf16(x * np.float32(3)))


# ------------------------------------------------------------------ call errors

A, B = rand((2, 3)), rand((3, 4), seed=1)
CALL_ERRORS = [
    ((A,), {}, "missing input(s) 'B'"),
    ((A, B, A), {}, "takes 2 input(s) (A, B) but 3 positional"),
    ((A, B), {"D": A}, "unknown argument 'D'"),
    ((A, B), {"A": A}, "argument 'A' twice"),
    ((A.astype(np.float64), B), {}, "argument 'A': expected f32[M, K], got a float64 array"),
    ((A, B.astype(np.int32)), {}, "argument 'B': expected f32[K, N], got an int32 array"),
    ((A[0], B), {}, "argument 'A': expected f32[M, K] (rank 2), got a 1-D array"),
    ((A, 1.0), {}, "argument 'B': expected f32[K, N], got the scalar 1.0"),
    ((A, rand((4, 4))), {}, "dim 'K' is 3 from argument 'A' (axis 1) but 4 from argument 'B'"),
    ((A, B), {"C": np.zeros((2, 5), np.float32)},
     "dim 'N' is 4 from argument 'B' (axis 1) but 5 from argument 'C'"),
    ((A, B), {"C": np.zeros((2, 4))}, "output 'C': expected a buffer of f32[M, N]"),
    ((A, B), {"C": np.zeros((4, 2), np.float32).T}, "output 'C': the buffer must be"),
    ((A, B), {"C": [[0.0] * 4] * 2}, "output 'C': expected a NumPy array"),
    ((A.tolist(), B), {}, "argument 'A': expected a NumPy array or a scalar"),
    ((A.astype(np.complex64), B), {}, "argument 'A': dtype complex64 is not supported"),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("args, kwargs, message", CALL_ERRORS,
                         ids=[m for _, _, m in CALL_ERRORS])
def test_call_errors_name_the_argument(target, args, kwargs, message):
    with pytest.raises(wiadsl.WiaError) as info:
        kernel(MATMUL, target)(*args, **kwargs)
    assert isinstance(info.value, wiadsl.WiaCallError)
    assert message in str(info.value)


def test_read_only_output_buffer_is_rejected():
    buf = np.zeros((2, 4), np.float32)
    buf.flags.writeable = False
    with pytest.raises(wiadsl.WiaCallError, match="output 'C'"):
        kernel(MATMUL, "interp")(A, B, C=buf)


@pytest.mark.parametrize("args, message", [
    ((np.zeros((3, 4), np.int32), 1.5), "argument 'flag': expected bool"),
    ((np.zeros((3, 5), np.int32), True), "argument 'x': expected i32[3, 4], got shape (3, 5)"),
    ((np.zeros((3, 4), np.int32), 1.5 + 2j), "argument 'flag'"),
])
def test_fixed_extents_and_scalar_kinds_are_checked(args, message):
    with pytest.raises(wiadsl.WiaCallError) as info:
        kernel(TWO, "interp", "fixed")(*args)
    assert message in str(info.value)


def test_numpy_scalar_of_another_dtype_is_rejected():
    # NumPy scalars carry a dtype and are checked like 0-d arrays; Python numbers adapt
    with pytest.raises(wiadsl.WiaCallError, match="argument 'scale': expected f32"):
        kernel(TWO, "interp", "stats")(rand((3,)), np.float64(2.5))


@pytest.mark.parametrize("value, message", [(2.5, "expected i32, got 2.5"),
                                            (2**40, "out of range for i32")])
def test_integer_scalar_arguments_are_checked(value, message):
    src = "kernel k(input n: i32, output y: i32) { y = n; }"
    with pytest.raises(wiadsl.WiaCallError, match="argument 'n'") as info:
        kernel(src, "interp")(value)
    assert message in str(info.value)


def test_tensor_output_buffer_of_the_wrong_dtype_is_rejected():
    src = "kernel k(input x: f32[N], output y: tensor) { y = x * 2.0; }"
    with pytest.raises(wiadsl.WiaCallError, match="output 'y'"):
        kernel(src, "interp")(rand((3,)), y=np.zeros(3, np.float64))


def test_unknown_kernel_and_target_are_usage_errors():
    with pytest.raises(wiadsl.WiaUsageError, match="no kernel named 'nope'"):
        wiadsl.jit(MATMUL, kernel="nope")
    with pytest.raises(wiadsl.WiaUsageError, match="unknown target"):
        wiadsl.jit(MATMUL, target="tpu9000")


def test_source_errors_raise_at_jit_with_position():
    with pytest.raises(wiadsl.WiaError, match=r"prog.wia:2:\d+: error"):
        wiadsl.jit("kernel k(input x: f32[N], output y: f32[N]) {\n  y = x @ 1.0;\n}",
                   filename="prog.wia")


OUTPUT_ONLY_DIM = "kernel k(input x: f32[N], output y: f32[M]) { y = zeros([M], f32); }"


def test_reading_an_output_only_dim_fails_with_a_clear_message_at_the_call():
    with pytest.raises(wiadsl.WiaNameError, match="dim 'M' is declared only by outputs"):
        wiadsl.jit(OUTPUT_ONLY_DIM).k(rand((3,)))


def test_reading_an_output_only_dim_is_a_compile_error():
    with pytest.raises(wiadsl.WiaError):
        wiadsl.jit(OUTPUT_ONLY_DIM)
