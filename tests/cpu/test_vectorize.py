"""The ``vectorize`` and ``prefetch`` loop passes through the native CPU backend
(``loop_pipeline``): kernels on odd and empty sizes against NumPy and the
interpreter, and the generated assembly uses vector code in the host's registers
(ymm on an AVX2 host)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import wiadsl
from wiadsl.backends.llvm.backend import BACKEND
from wiadsl.backends.llvm.compile import build, lower_kernel
from wiadsl.backends.llvm.target import host, target_machine
from wiadsl.diagnostics import WiaRuntimeError
from wiadsl.ir import parse_module, print_module, run_func

VEC = "vectorize{width=8}"
BOTH = "vectorize{width=8},prefetch{distance=64}"

CHAIN = """
func @f(%a: tensor<?x?xf32>, %b: tensor<?x?xf32>) -> tensor<?x?xf32> attributes {kernel, outputs = ["y"]} {
^entry:
  %0 = tensor.mul %a, %b : tensor<?x?xf32>
  %1 = tensor.exp %0 : tensor<?x?xf32>
  %2 = tensor.tanh %1 : tensor<?x?xf32>
  %3 = tensor.sigmoid %2 : tensor<?x?xf32>
  %c = arith.constant 0.25 : f32
  %m = tensor.cmpf olt, %3, %c : (tensor<?x?xf32>, f32) -> tensor<?x?xi1>
  %4 = tensor.select %m, %a, %3 : (tensor<?x?xi1>, tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
  %5 = tensor.relu %4 : tensor<?x?xf32>
  return %5 : tensor<?x?xf32>
}
"""

SOFTMAX = """
func @f(%x: tensor<?x?xf32>) -> tensor<?x?xf32> attributes {kernel, outputs = ["y"]} {
^entry:
  %m = tensor.reduce_max %x {axes = [1], keepdims} : tensor<?x?xf32> -> tensor<?x1xf32>
  %d = tensor.sub %x, %m : (tensor<?x?xf32>, tensor<?x1xf32>) -> tensor<?x?xf32>
  %e = tensor.exp %d : tensor<?x?xf32>
  %s = tensor.reduce_sum %e {axes = [1], keepdims} : tensor<?x?xf32> -> tensor<?x1xf32>
  %y = tensor.div %e, %s : (tensor<?x?xf32>, tensor<?x1xf32>) -> tensor<?x?xf32>
  return %y : tensor<?x?xf32>
}
"""

ROW_DOT = """
func @f(%x: tensor<?x?xf32>, %w: tensor<?x?xf32>) -> tensor<?xf32> attributes {kernel, outputs = ["y"]} {
^entry:
  %p = tensor.mul %x, %w : tensor<?x?xf32>
  %s = tensor.reduce_sum %p {axes = [1]} : tensor<?x?xf32> -> tensor<?xf32>
  return %s : tensor<?xf32>
}
"""


def reduce_text(op: str, dtype: str) -> str:
    return f"""
func @f(%x: tensor<?x?x{dtype}>) -> tensor<?x{dtype}> attributes {{kernel, outputs = ["y"]}} {{
^entry:
  %m = tensor.{op} %x {{axes = [1]}} : tensor<?x?x{dtype}> -> tensor<?x{dtype}>
  return %m : tensor<?x{dtype}>
}}
"""


rng = np.random.default_rng(11)
SIZES = [1, 7, 33, 129, 0]


def native(text: str, args, pipeline: str):
    return BACKEND.compile(parse_module(text), "f", {"loop_pipeline": pipeline}).run(args)[0]


@pytest.mark.parametrize("pipeline", [VEC, BOTH])
@pytest.mark.parametrize("n", SIZES)
def test_elementwise_chain(n, pipeline):
    a, b = (rng.standard_normal((3, n)).astype(np.float32) for _ in range(2))
    got = native(CHAIN, [a, b], pipeline)
    want = run_func(parse_module(CHAIN), "f", [a, b])[0]
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("pipeline", [BOTH, "vectorize{width=8,interleave=4}"])
@pytest.mark.parametrize("op,np_op", [("reduce_sum", np.sum), ("reduce_max", np.max),
                                      ("reduce_min", np.min)])
@pytest.mark.parametrize("n", [1, 7, 33, 129])
def test_float_row_reductions(op, np_op, n, pipeline):
    x = rng.standard_normal((5, n)).astype(np.float32)
    got = native(reduce_text(op, "f32"), [x], pipeline)
    np.testing.assert_allclose(got, np_op(x, axis=1), rtol=1e-5, atol=1e-5)


def test_row_max_propagates_nan_and_sums_of_empty_rows_are_zero():
    x = rng.standard_normal((3, 40)).astype(np.float32)
    x[1, 37] = np.nan
    got = native(reduce_text("reduce_max", "f32"), [x], VEC)
    assert np.isnan(got[1]) and got[0] == x[0].max() and got[2] == x[2].max()
    empty = np.zeros((4, 0), np.float32)
    np.testing.assert_array_equal(native(reduce_text("reduce_sum", "f32"), [empty], VEC), np.zeros(4))
    with pytest.raises(WiaRuntimeError, match="empty"):
        native(reduce_text("reduce_max", "f32"), [empty], VEC)


@pytest.mark.parametrize("op,np_op", [("reduce_sum", np.sum), ("reduce_max", np.max),
                                      ("reduce_min", np.min), ("reduce_prod", np.prod)])
@pytest.mark.parametrize("dtype,np_dtype", [("i32", np.int32), ("i64", np.int64), ("f64", np.float64)])
def test_other_dtypes(op, np_op, dtype, np_dtype):
    x = rng.integers(-3, 4, (3, 45)).astype(np_dtype)
    got = native(reduce_text(op, dtype), [x], VEC)
    want = np_op(x, axis=1).astype(np_dtype)
    if dtype == "f64":
        np.testing.assert_allclose(got, want, rtol=1e-12)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("n", SIZES[:-1])
def test_softmax(n):
    x = rng.standard_normal((6, n)).astype(np.float32)
    got = native(SOFTMAX, [x], BOTH)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(got, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("n", SIZES)
def test_row_dot_products(n):
    x, w = (rng.standard_normal((4, n)).astype(np.float32) for _ in range(2))
    got = native(ROW_DOT, [x, w], BOTH)
    np.testing.assert_allclose(got, (x * w).sum(axis=1), rtol=1e-5, atol=1e-5)


def test_jit_source_with_the_loop_pipeline_option():
    src = """
kernel k(input x: f32[N, M], input w: f32[M], output y: f32[N, M], output s: f32[N]) {
    y = relu(x * w - 0.5);
    s = reduce_sum(x * x, axis=1);
}
"""
    x = rng.standard_normal((7, 33)).astype(np.float32)
    w = rng.standard_normal(33).astype(np.float32)
    kernel = wiadsl.jit(src, kernel="k", target="cpu", loop_pipeline=BOTH)
    y, s = kernel(x, w)
    np.testing.assert_allclose(y, np.maximum(x * w - 0.5, 0), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(s, (x * x).sum(axis=1), rtol=1e-5, atol=1e-5)


def assembly(text: str, shapes, pipeline: str) -> tuple[str, str]:
    lowered = lower_kernel(parse_module(text), "f", shapes, pipeline)
    return target_machine(jit=False).emit_assembly(build(lowered)), print_module(lowered.loop_ir)


def vector_registers(features: set[str]) -> str:
    """A regex of the x86 registers the width-8 f32 vectors (256 bits) may live in on a
    host with ``features``: ymm with AVX; also zmm with AVX-512 (LLVM may widen them);
    xmm halves without AVX."""
    if "+avx512f" in features:
        return r"[yz]mm"
    if "+avx" in features:
        return r"ymm"
    return r"xmm"


def test_vector_registers_follow_the_host_features():
    assert vector_registers({"+avx", "+avx2"}) == "ymm"
    assert re.fullmatch(vector_registers({"+avx2", "+avx512f"}), "zmm")
    assert vector_registers({"+sse4.2"}) == "xmm"


@pytest.mark.skipif(not host().triple.startswith("x86_64"), reason="x86 assembly")
def test_assembly_uses_ymm_vectors_and_prefetches():
    """Vector code in the registers the host has (ymm on an AVX2 host, and no zmm
    without AVX-512), a vector add in the reduction, prefetches."""
    features = set(host().features.split(","))
    regs = vector_registers(features)
    asm, loop_ir = assembly(reduce_text("reduce_sum", "f32"), [(64, 1024)], BOTH)
    assert "loop.vreduce" in loop_ir and "loop.prefetch" in loop_ir
    assert re.search(rf"v?addps\s+[^\n]*{regs}", asm)
    assert "prefetcht0" in asm
    if "+avx512f" not in features:
        assert "zmm" not in asm  # no AVX-512: no 512-bit registers
    asm, loop_ir = assembly(CHAIN, [(16, 256), (16, 256)], VEC)
    assert "loop.vstore" in loop_ir
    assert re.search(rf"v?mov[au]ps\s+%{regs}", asm)
