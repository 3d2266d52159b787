"""Simulated results vs the reference interpreter (NumPy) on odd sizes and several arrays.

int8 paths must be bit-exact; float paths agree within summation-order rounding.
Every test also checks that the work really ran on the array (stats), so a silent
host fallback fails.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import wiadsl

from .conftest import both

ARRAYS = [(8, 8), (32, 32), (128, 128)]
DATAFLOWS = ["ws", "os", "is"]
SIZES = [(7, 33, 129), (129, 7, 33), (33, 129, 7)]

MATMUL = """
kernel f32mm(input A: f32[M, K], input B: f32[K, N], output C: f32[M, N]) { C = A @ B; }
kernel i8mm(input A: i8[M, K], input B: i8[K, N], output C: i8[M, N]) { C = A @ B; }
kernel i32mm(input A: i8[M, K], input B: i8[K, N], output C: i32[M, N]) {
    C = cast(A, i32) @ cast(B, i32);
}
kernel bf16mm(input A: bf16[M, K], input B: bf16[K, N], output C: bf16[M, N]) { C = A @ B; }
kernel bmm(input A: f32[P, M, K], input B: f32[K, N], output C: f32[P, M, N]) { C = A @ B; }
kernel bmm2(input A: i8[P, M, K], input B: i8[P, K, N], output C: i8[P, M, N]) { C = A @ B; }
kernel vecmat(input v: f32[K], input B: f32[K, N], output y: f32[N]) { y = v @ B; }
kernel matvec(input A: f32[M, K], input v: f32[K], output y: f32[M]) { y = A @ v; }
"""


def _ints(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.integers(-128, 128, shape).astype(np.int8)


@pytest.mark.parametrize("array", ARRAYS)
@pytest.mark.parametrize("dataflow", DATAFLOWS)
@pytest.mark.parametrize("mkn", SIZES)
def test_matmul_int8_exact_and_f32_close(array, dataflow, mkn, rng):
    m, k, n = mkn
    a, b = _ints(rng, (m, k)), _ints(rng, (k, n))
    out, ref, stats = both(MATMUL, "i32mm", a, b, array=array, dataflow=dataflow)
    assert np.array_equal(out, ref) and out.dtype == np.int32
    assert stats["sections"] == {"array": 1} and stats["macs"] == m * k * n
    out, ref, _ = both(MATMUL, "i8mm", a, b, array=array, dataflow=dataflow)
    assert np.array_equal(out, ref)  # int32 accumulation, wrapped to int8 like NumPy
    fa, fb = rng.standard_normal((m, k), np.float32), rng.standard_normal((k, n), np.float32)
    out, ref, _ = both(MATMUL, "f32mm", fa, fb, array=array, dataflow=dataflow)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dataflow", DATAFLOWS)
def test_f32_overflow_is_inf_without_a_warning(dataflow):
    """Sums past f32's range are inf, and inf x 0 is nan, as IEEE arithmetic in the array
    gives them (NumPy's values): no NumPy RuntimeWarning out of the simulator (a program
    run with warnings as errors stopped inside it)."""
    a = np.full((7, 5), 3e38, np.float32)
    a[:, 0] = np.inf
    b = np.ones((5, 3), np.float32)
    b[0, 2] = 0  # inf x 0 in the third column
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = wiadsl.jit(MATMUL, "f32mm", target="systolic", dataflow=dataflow)(a, b)
    with np.errstate(all="ignore"):
        want = a @ b
    np.testing.assert_array_equal(out, want)
    assert np.isposinf(out[:, :2]).all() and np.isnan(out[:, 2]).all()


@pytest.mark.parametrize("dataflow", DATAFLOWS)
def test_bf16_matmul_within_bf16_rounding(dataflow, rng):
    a = rng.standard_normal((33, 129), np.float32)
    b = rng.standard_normal((129, 7), np.float32)
    out, ref, stats = both(MATMUL, "bf16mm", a, b, array=(32, 32), dataflow=dataflow)
    assert stats["sections"] == {"array": 1}
    np.testing.assert_allclose(out, ref, rtol=2 ** -7, atol=0.05)
    bits = np.asarray(out, np.float32).view(np.uint32)
    assert not (bits & 0xFFFF).any()  # results are bf16 values


@pytest.mark.parametrize("dataflow", DATAFLOWS)
def test_batched_and_vector_matmuls(dataflow, rng):
    a, b = rng.standard_normal((3, 7, 33), np.float32), rng.standard_normal((33, 9), np.float32)
    out, ref, stats = both(MATMUL, "bmm", a, b, array=(8, 8), dataflow=dataflow)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    assert stats["macs"] == 3 * 7 * 33 * 9
    qa, qb = _ints(rng, (2, 7, 33)), _ints(rng, (2, 33, 9))
    out, ref, _ = both(MATMUL, "bmm2", qa, qb, array=(8, 8), dataflow=dataflow)
    assert np.array_equal(out, ref)
    v = rng.standard_normal(33, np.float32)
    out, ref, _ = both(MATMUL, "vecmat", v, b, array=(8, 8), dataflow=dataflow)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    out, ref, _ = both(MATMUL, "matvec", a[0], v, array=(8, 8), dataflow=dataflow)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


CONV = """
kernel conv(input x: f32[N, C, H, W], input w: f32[O, C, 3, 3], output y: f32[N, O, P, Q]) {
    y = conv2d(x, w, stride=2, padding=1);
}
kernel qconv(input x: i8[N, C, H, W], input w: i8[O, C, 3, 3], output y: i32[N, O, P, Q]) {
    y = conv2d(cast(x, i32), cast(w, i32), padding=1);
}
kernel conv_relu(input x: f32[N, C, H, W], input w: f32[O, C, 3, 3], output y: f32[N, O, P, Q]) {
    y = relu(conv2d(x, w, padding=1));
}
"""


@pytest.mark.parametrize("array", ARRAYS)
@pytest.mark.parametrize("dataflow", DATAFLOWS)
def test_conv2d_as_im2col_gemm(array, dataflow, rng):
    x = rng.standard_normal((2, 7, 9, 11), np.float32)
    w = rng.standard_normal((33, 7, 3, 3), np.float32)
    out, ref, stats = both(CONV, "conv", x, w, array=array, dataflow=dataflow)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    assert stats["sections"] == {"array": 1}
    qx, qw = _ints(rng, (1, 7, 9, 11)), _ints(rng, (33, 7, 3, 3))
    out, ref, _ = both(CONV, "qconv", qx, qw, array=array, dataflow=dataflow)
    assert np.array_equal(out, ref)
    out, ref, stats = both(CONV, "conv_relu", x, w, array=array, dataflow=dataflow)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    assert stats["sections"] == {"array": 1} and stats["vec_cycles"] > 0
