"""CuPy references for ``gpu_bench.py``: cuBLAS products, CuPy expressions, a fused kernel.

``REFERENCES[key](cupy, inputs)`` uploads a row's inputs and returns a ``Reference``:
its label, a ``step`` that queues one run on the device, and the array that step
writes. Products go to cuBLAS: ``@`` for f16 and f32 (CuPy's own cublas calls), and
``cublasGemmEx`` through CuPy's binding where ``@`` does not say what it computes
(bf16 storage, tf32 compute, int8 -> int32). The caller checks the reference's
result like its own before comparing times.

``cublasGemmEx`` is column-major; a row-major [M, N] = [M, K] x [K, N] is the column-
major [N, M] = [N, K] x [K, M] with the operands swapped, so row-major data is passed
as is. Types and compute modes are the cuBLAS header values (``cudaDataType_t``,
``cublasComputeType_t``); alpha and beta are host scalars of the compute type.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

# cudaDataType_t (library_types.h)
CUDA_R_32F, CUDA_R_8I, CUDA_R_32I, CUDA_R_16BF = 0, 3, 10, 14
# cublasComputeType_t (cublas_api.h)
CUBLAS_COMPUTE_32F, CUBLAS_COMPUTE_32I, CUBLAS_COMPUTE_32F_FAST_TF32 = 68, 72, 77
CUBLAS_OP_N, CUBLAS_OP_T = 0, 1
CUBLAS_GEMM_DEFAULT = -1


@dataclass
class Reference:
    label: str
    step: Callable[[], object]
    out: Any


def matmul(cp: Any, xs: dict[str, np.ndarray]) -> Reference:
    a, b = cp.asarray(xs["a"]), cp.asarray(xs["b"])
    out = cp.empty((a.shape[0], b.shape[1]), a.dtype)
    return Reference("cuBLAS (CuPy @)", lambda: cp.matmul(a, b, out=out), out)


def gemm_ex(cp: Any, a: Any, b: Any, nt: bool, types: tuple[int, int], compute: int,
            out_dtype: Any, scalar: type) -> Reference:
    """Row-major y[M, N] = a[M, K] @ (b[N, K]^T if ``nt`` else b[K, N]) by cublasGemmEx.

    Column-major, y^T[N, M] = op(b) x a^T: ``b`` ([K, N] row-major is [N, K] column-major
    with ld N, op N; [N, K] row-major is [K, N] column-major with ld K, op T) and ``a``
    ([M, K] row-major is a^T, [K, M] column-major with ld K, op N)."""
    from cupy.cuda import device
    from cupy_backends.cuda.libs import cublas

    m, k = a.shape
    n = b.shape[0] if nt else b.shape[1]
    out = cp.empty((m, n), out_dtype)
    alpha, beta = np.ones(1, scalar), np.zeros(1, scalar)  # host pointers, kept alive here
    handle = device.get_cublas_handle()
    in_type, out_type = types

    def step() -> None:
        cublas.gemmEx(handle, CUBLAS_OP_T if nt else CUBLAS_OP_N, CUBLAS_OP_N, n, m, k,
                      alpha.ctypes.data, b.data.ptr, in_type, k if nt else n,
                      a.data.ptr, in_type, k, beta.ctypes.data, out.data.ptr, out_type, n,
                      compute, CUBLAS_GEMM_DEFAULT)
    return Reference("cuBLAS (cublasGemmEx)", step, out)


def _bf16_bits(x: np.ndarray) -> np.ndarray:
    """bf16 values held in float32 -> their 16-bit patterns (exact: they are bf16 already)."""
    return (np.ascontiguousarray(x, np.float32).view(np.uint32) >> 16).astype(np.uint16)


def gemm_bf16(cp: Any, xs: dict[str, np.ndarray]) -> Reference:
    a, b = cp.asarray(_bf16_bits(xs["a"])), cp.asarray(_bf16_bits(xs["b"]))
    ref = gemm_ex(cp, a, b, False, (CUDA_R_16BF, CUDA_R_16BF), CUBLAS_COMPUTE_32F,
                  np.uint16, np.float32)
    return Reference(ref.label, ref.step, _Bf16Out(ref.out))


@dataclass
class _Bf16Out:
    """A bf16 result on the device; ``get`` gives it as float32 (for the check)."""

    bits: Any

    def get(self) -> np.ndarray:
        return (self.bits.get().astype(np.uint32) << 16).view(np.float32)


def gemm_tf32(cp: Any, xs: dict[str, np.ndarray]) -> Reference:
    return gemm_ex(cp, cp.asarray(xs["a"]), cp.asarray(xs["b"]), True, (CUDA_R_32F, CUDA_R_32F),
                   CUBLAS_COMPUTE_32F_FAST_TF32, np.float32, np.float32)


def gemm_i8(cp: Any, xs: dict[str, np.ndarray]) -> Reference:
    return gemm_ex(cp, cp.asarray(xs["a"]), cp.asarray(xs["b"]), True, (CUDA_R_8I, CUDA_R_32I),
                   CUBLAS_COMPUTE_32I, np.int32, np.int32)


def _softmax(cp: Any, x: Any) -> Any:
    e = cp.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def softmax(cp: Any, xs: dict[str, np.ndarray]) -> Reference:
    x = cp.asarray(xs["x"])
    out = cp.empty_like(x)
    return Reference("CuPy expression", lambda: cp.copyto(out, _softmax(cp, x)), out)


def layer_norm(cp: Any, xs: dict[str, np.ndarray]) -> Reference:
    x, g, b = (cp.asarray(xs[n]) for n in ("x", "g", "b"))
    out = cp.empty_like(x)

    def step() -> None:
        h = x.astype(cp.float32, copy=False)
        mean = h.mean(axis=-1, keepdims=True)
        var = ((h - mean) ** 2).mean(axis=-1, keepdims=True)
        cp.copyto(out, ((h - mean) / cp.sqrt(var + 1e-5) * g + b).astype(x.dtype))
    return Reference("CuPy expression", step, out)


def fused(cp: Any, xs: dict[str, np.ndarray]) -> Reference:
    a, b, c = (cp.asarray(xs[n]) for n in "abc")
    kernel = cp.ElementwiseKernel("float32 a, float32 b, float32 c", "float32 y",
                                  "y = fmaxf(a * b + c, 0.f)", "wiadsl_bench_fused")
    out = cp.empty_like(a)
    return Reference("CuPy ElementwiseKernel", lambda: kernel(a, b, c, out), out)


def _attention(cp: Any, xs: dict[str, np.ndarray], causal: bool) -> Reference:
    """Scores through cuBLAS (f16 in, f32 accumulation, f16 out), softmax in f32, P in f16
    @ V through cuBLAS: the unfused computation, T x S scores stored."""
    q, k, v = (cp.asarray(xs[n]) for n in "qkv")
    scale = 1.0 / math.sqrt(q.shape[-1])
    t, s = q.shape[-2], k.shape[-2]
    keep = cp.arange(s)[None, :] <= cp.arange(t)[:, None] if causal else None
    out = cp.empty_like(q)

    def step() -> None:
        scores = cp.matmul(q, k.swapaxes(-1, -2)).astype(cp.float32) * scale
        if keep is not None:
            scores = cp.where(keep, scores, -cp.inf)
        cp.matmul(_softmax(cp, scores).astype(q.dtype), v, out=out)
    return Reference("cuBLAS + CuPy softmax", step, out)


REFERENCES: dict[str, Callable[[Any, dict[str, np.ndarray]], Reference]] = {
    "matmul": matmul, "gemm_bf16": gemm_bf16, "gemm_tf32": gemm_tf32, "gemm_i8": gemm_i8,
    "softmax": softmax, "layer_norm": layer_norm, "fused": fused,
    "attention": lambda cp, xs: _attention(cp, xs, False),
    "attention_causal": lambda cp, xs: _attention(cp, xs, True),
}
