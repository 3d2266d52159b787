"""On a machine with a GPU: every op test and every example kernel runs on the device and
matches the interpreter; larger matmuls, convolutions and reductions match NumPy.

Skipped without a GPU; ``WIADSL_GPU_TARGET=ptxsim`` runs the same tests on the simulator
(a dry run, ``benchmarks/gpu.sh --sim``). The kernels of issue 22 are in test_gpu_kernels.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.reference.numpy_ref import round_to_tf32
from wiadsl.frontend.compile import compile_source
from wiadsl.signature import signature_of

from .corpus import OPS, SIZES, make_inputs
from .helpers import EXAMPLE_SHAPES, example_kernels, gpu_jit, jit_kernel

pytestmark = pytest.mark.gpu
EXAMPLES = example_kernels()


def _compare(got, want, name: str) -> None:
    """Outputs equal the interpreter's: floats to f32 (f16) rounding, the rest exactly."""
    for g, w in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,), strict=True):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, name
        if w.dtype.kind == "f":
            tol = 2e-3 if w.dtype == np.float16 else 2e-5
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol, err_msg=name)
        else:
            np.testing.assert_array_equal(g, w, err_msg=name)


@pytest.mark.parametrize("name", sorted(OPS))
def test_op_on_gpu(name: str) -> None:
    source, shapes = OPS[name]
    kernel = compile_source(source, "<ptx-corpus>").kernels[0]
    for m, n in SIZES + [(257, 1031)]:
        inputs = make_inputs(signature_of(kernel).inputs, shapes, m, n)
        want = jit_kernel(source, "k", "interp")(*inputs)
        got = gpu_jit(source)(*inputs)
        for g, w in zip(got if isinstance(got, tuple) else (got,),
                        want if isinstance(want, tuple) else (want,), strict=True):
            if np.asarray(w).dtype.kind == "f":
                np.testing.assert_allclose(g, w, rtol=2e-3, atol=2e-3, err_msg=name)
            else:
                np.testing.assert_array_equal(g, w, err_msg=name)


@pytest.mark.parametrize("path,kernel", EXAMPLES, ids=[k for _, k in EXAMPLES])
def test_example_on_gpu(path: str, kernel: str) -> None:
    """Each kernel of examples/*.wia on the shapes the simulator tests use."""
    source = Path(path).read_text()
    decl = next(k for k in compile_source(source, path).kernels if k.name == kernel)
    params = signature_of(decl).inputs
    shapes = {p.name: EXAMPLE_SHAPES[kernel].get(p.name, tuple(p.dims or ())) for p in params}
    inputs = make_inputs(params, shapes, 0, 0, seed=1)
    want = jit_kernel(source, kernel, "interp", path)(*inputs)
    _compare(gpu_jit(source, kernel, path)(*inputs), want, kernel)


def test_matmul_large_on_gpu() -> None:
    src = "kernel k(input a: f32[M, K], input b: f32[K, N], output y: f32[M, N]) { y = a @ b; }"
    rng = np.random.default_rng(0)
    a = rng.standard_normal((513, 300)).astype(np.float32)
    b = rng.standard_normal((300, 257)).astype(np.float32)
    np.testing.assert_allclose(gpu_jit(src)(a, b), a @ b, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("mkn", [(129, 47, 65), (256, 128, 192)])  # element path; cp.async path
def test_matmul_f16_mma_on_gpu(mkn) -> None:
    m, k, n = mkn
    src = "kernel k(input a: f16[M, K], input b: f16[K, N], output y: f16[M, N]) { y = a @ b; }"
    rng = np.random.default_rng(1)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    want = (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16)
    got = gpu_jit(src, arch="sm_80")(a, b)  # the mma.sync kernel, on any device from sm_80
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=2e-3, atol=2e-2)


@pytest.mark.parametrize("mkn", [(129, 200, 65), (1024, 512, 1024)])  # 64x64; 128x128 tiles
def test_matmul_i8_and_tf32_mma_on_gpu(mkn) -> None:
    """The sm_80 tensor-core kernels (B stored [K, N]: no wgmma form): i8 exact; tf32 with
    operands rounded to nearest (cvt.rna.tf32.f32) before mma.sync."""
    m, k, n = mkn
    rng = np.random.default_rng(3)
    i8 = ("kernel k(input a: i8[M, K], input b: i8[K, N], output y: i32[M, N])"
          " { y = cast(a, i32) @ cast(b, i32); }")
    qa, qb = rng.integers(-128, 128, (m, k)).astype(np.int8), rng.integers(-128, 128, (k, n)).astype(np.int8)
    np.testing.assert_array_equal(gpu_jit(i8, arch="sm_80")(qa, qb), qa.astype(np.int64) @ qb)
    f32 = "kernel k(input a: f32[M, K], input b: f32[K, N], output y: f32[M, N]) { y = a @ b; }"
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)

    got = gpu_jit(f32, arch="sm_80", allow_tf32=True)(a, b)
    np.testing.assert_allclose(got, round_to_tf32(a).astype(np.float64) @ round_to_tf32(b), rtol=1e-4, atol=1e-3)


def test_conv_and_large_reductions_on_gpu() -> None:
    conv = ("kernel k(input x: f32[2, 3, 31, 33], input w: f32[8, 3, 3, 3], output y: f32[2, 8, 31, 33])"
            " { y = conv2d(x, w, padding=1); }")
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3, 31, 33)).astype(np.float32)
    w = rng.standard_normal((8, 3, 3, 3)).astype(np.float32)
    np.testing.assert_allclose(gpu_jit(conv)(x, w), jit_kernel(conv, "k", "interp")(x, w),
                               rtol=1e-4, atol=1e-4)
    full = "kernel k(input a: f32[N], output s: f32, output i: i64) { s = reduce_sum(a); i = argmax(a); }"
    a = rng.standard_normal(1 << 20).astype(np.float32)
    s, i = gpu_jit(full)(a)
    np.testing.assert_allclose(s, a.astype(np.float64).sum(), rtol=1e-4, atol=1e-2)
    assert i == a.argmax()
