"""Every tensor-level op on target="cpu" against the interpreter, on awkward shapes
(1, 7, 33, 129, empty), with broadcasting, dtypes and runtime errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from wiadsl.backends.llvm.backend import BACKEND
from wiadsl.diagnostics import WiaRuntimeError
from wiadsl.dtypes import DType
from wiadsl.ir import Builder, FuncOp, ModuleOp, ScalarType, TensorType, run_func, verify
from wiadsl.ir.ops import ELEMENTWISE_FNS

F32 = DType.F32


def dyn(t: Any) -> Any:
    """The type with every extent dynamic (what the frontend gives the backend)."""
    return TensorType(t.dtype, (None,) * t.rank) if isinstance(t, TensorType) else t


def build(name: str, inputs: list[np.ndarray], result: Any, attrs: dict | None = None,
          extra: list[Any] | None = None) -> ModuleOp:
    types = [dyn(TensorType(_dt(a), a.shape)) if np.ndim(a) else ScalarType(_dt(a)) for a in inputs]
    func = FuncOp("f", types, [result], attributes={"kernel": True, "outputs": ["out"]})
    b = Builder(func.entry)
    operands = list(func.args) + [b.constant(v, t) for v, t in (extra or [])]
    b.ret([b.value(name, operands, result, attrs)])
    module = ModuleOp([func])
    verify(module)
    return module


def _dt(a: np.ndarray) -> DType:
    from wiadsl.dtypes import from_numpy
    return from_numpy(np.asarray(a).dtype)  # type: ignore[return-value]


def check(module: ModuleOp, inputs: list[np.ndarray], level: int = 3) -> None:
    want = run_func(module, "f", inputs)[0]
    kernel = BACKEND.compile(module, "f", {"opt_level": level})
    got = kernel.run(inputs)[0]
    want, got = np.asarray(want), np.asarray(got)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape)
    if want.dtype.kind == "f":
        tol = 1e-2 if want.dtype.itemsize == 2 else 2e-5
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)


rng = np.random.default_rng(0)


def rand(shape: tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
    if np.dtype(dtype).kind == "b":
        return rng.random(shape) < 0.5
    if np.dtype(dtype).kind == "i":
        return rng.integers(-9, 10, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


UNARY = [f for f in ELEMENTWISE_FNS if f.arity == 1 and f.domain != "bits"]
BINARY = [f for f in ELEMENTWISE_FNS if f.arity == 2 and f.domain != "bits"]


@pytest.mark.parametrize("fn", UNARY, ids=[f.name for f in UNARY])
@pytest.mark.parametrize("n", [1, 7, 129])
def test_unary(fn, n):
    x = rand((n, 3))
    if fn.name in ("log", "sqrt", "rsqrt"):
        x = np.abs(x) + 0.1
    check(build(f"tensor.{fn.name}", [x], TensorType(F32, (None, None))), [x])


@pytest.mark.parametrize("fn", BINARY, ids=[f.name for f in BINARY])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_binary_broadcast(fn, dtype):
    a, b = rand((33, 1), dtype), rand((7,), dtype)
    if fn.name == "pow":
        a = np.abs(a) + (1 if a.dtype.kind == "i" else 0.5)
        b = np.abs(b) % 4
    dt = _dt(a)
    check(build(f"tensor.{fn.name}", [a, b], TensorType(dt, (None, None))), [a, b])


@pytest.mark.parametrize("dtype", [np.float64, np.float16, np.int8, np.int64])
def test_dtypes_chain(dtype):
    a, b = rand((4, 5), dtype), rand((4, 5), dtype)
    check(build("tensor.add", [a, b], TensorType(_dt(a), (None, None))), [a, b])
    check(build("tensor.mul", [a, b], TensorType(_dt(a), (None, None))), [a, b])


def test_int_pow_negative_is_a_runtime_error():
    a, b = np.array([2, 3], np.int64), np.array([1, -1], np.int64)
    kernel = BACKEND.compile(build("tensor.pow", [a, b], TensorType(DType.I64, (None,))), "f", {})
    with pytest.raises(WiaRuntimeError, match="negative integer powers"):
        kernel.run([a, b])


@pytest.mark.parametrize("src,dst", [(F32, DType.I8), (F32, DType.BF16), (F32, DType.F16),
                                     (DType.I32, F32), (F32, DType.BOOL), (DType.F64, DType.BF16)])
def test_casts(src, dst):
    x = (rand((7, 3), np.float64) * 40).astype(src.numpy)
    check(build("tensor.cast", [x], TensorType(dst, (None, None))), [x])


@pytest.mark.parametrize("kind", ["sum", "mean", "max", "min", "prod"])
@pytest.mark.parametrize("axes,keep", [([1], False), ([0], True), ([0, 1], False)])
def test_reductions(kind, axes, keep):
    x = rand((33, 7))
    rank = 2 - (0 if keep else len(axes))
    result = TensorType(F32, (None,) * rank) if rank else ScalarType(F32)
    check(build(f"tensor.reduce_{kind}", [x], result, {"axes": axes, "keepdims": keep}), [x])


@pytest.mark.parametrize("kind", ["argmax", "argmin"])
@pytest.mark.parametrize("axes", [[1], [0, 1]])
def test_argreductions_with_nan(kind, axes):
    x = rand((7, 33))
    x[3, 5] = np.nan
    result = TensorType(DType.I64, (None,)) if len(axes) == 1 else ScalarType(DType.I64)
    check(build(f"tensor.{kind}", [x], result, {"axes": axes}), [x])


def test_empty_max_is_a_runtime_error():
    x = np.zeros((0, 3), np.float32)
    kernel = BACKEND.compile(build("tensor.reduce_max", [x], TensorType(F32, (None,)), {"axes": [0]}), "f", {})
    with pytest.raises(WiaRuntimeError, match="empty"):
        kernel.run([x])


def test_zero_trip_sum():
    x = np.zeros((0, 3), np.float32)
    check(build("tensor.reduce_sum", [x], TensorType(F32, (None,)), {"axes": [0]}), [x])


@pytest.mark.parametrize("shapes", [((7, 5), (5, 33)), ((1, 129), (129, 1)), ((2, 3, 4), (4, 5)),
                                    ((5,), (5, 3)), ((3, 5), (5,)), ((129, 67), (67, 33)),
                                    ((4, 0), (0, 3))])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_matmul(shapes, dtype):
    from wiadsl.ir.ops_tensor import matmul_shape
    a, b = rand(shapes[0], dtype), rand(shapes[1], dtype)
    out = matmul_shape(a.shape, b.shape)
    result = TensorType(_dt(a), (None,) * len(out))
    check(build("tensor.matmul", [a, b], result), [a, b])


def test_matmul_inner_mismatch_is_a_runtime_error():
    a, b = rand((3, 4)), rand((5, 2))
    module = build("tensor.matmul", [a, rand((4, 2))], TensorType(F32, (None, None)))
    with pytest.raises(WiaRuntimeError, match="inner extents"):
        BACKEND.compile(module, "f", {}).run([a, b])


@pytest.mark.parametrize("stride,pad", [([1, 1], [1, 1]), ([2, 2], [0, 1])])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_conv2d(stride, pad, dtype):
    x, w = rand((2, 3, 9, 7), dtype), rand((4, 3, 3, 3), dtype)
    check(build("tensor.conv2d", [x, w], TensorType(_dt(x), (None,) * 4),
                {"stride": stride, "padding": pad}), [x, w])


@pytest.mark.parametrize("kind", ["max_pool", "avg_pool"])
def test_pools(kind):
    x = rand((2, 3, 7, 9))
    check(build(f"tensor.{kind}", [x], TensorType(F32, (None,) * 4),
                {"kernel": [2, 3], "stride": [2, 2]}), [x])


def test_transpose():
    x = rand((3, 7, 5))
    check(build("tensor.transpose", [x], TensorType(F32, (None,) * 3), {"perm": [2, 0, 1]}), [x])


def test_concat():
    a, b = rand((2, 7)), rand((5, 7))
    check(build("tensor.concat", [a, b], TensorType(F32, (None, None)), {"axis": 0}), [a, b])


def test_quantize_roundtrip():
    x = rand((33,)) * 50
    scale, zp = np.asarray(np.float32(0.5)), np.asarray(np.int64(3))
    for name, out in (("tensor.quantize", DType.I8), ("tensor.fake_quant", F32)):
        check(build(name, [x, scale, zp], TensorType(out, (None,))), [x, scale, zp])


def test_select_and_compare():
    c, a, b = rand((7, 1), np.bool_), rand((7, 5)), rand((5,))
    check(build("tensor.select", [c, a, b], TensorType(F32, (None, None))), [c, a, b])
    check(build("tensor.cmpf", [a, b], TensorType(DType.BOOL, (None, None)), {"predicate": "olt"}), [a, b])


def test_extract_wraps_and_checks():
    x = rand((4, 6))
    i, j = np.asarray(np.int64(-1)), np.asarray(np.int64(2))
    module = build("tensor.extract", [x, i, j], ScalarType(F32))
    check(module, [x, i, j])
    with pytest.raises(WiaRuntimeError, match="out of range for axis 1"):
        BACKEND.compile(module, "f", {}).run([x, i, np.asarray(np.int64(6))])


@pytest.mark.parametrize("parts", [(1, 5, 2), (-1, -8, -2), (5, 1, 1), (0, 100, 3)])
def test_extract_slice_python_semantics(parts):
    x = rand((9, 4))
    vals = [np.asarray(np.int64(p)) for p in parts]
    module = build("tensor.extract_slice", [x, *vals], TensorType(F32, (None, None)), {"layout": ["s:e:t"]})
    check(module, [x, *vals])


def test_insert_slice_broadcasts_and_casts():
    src, dest = rand((4,), np.float64), rand((6, 4))
    i = np.asarray(np.int64(2))
    module = build("tensor.insert_slice", [src, dest, i], TensorType(F32, (None, None)), {"layout": ["i"]})
    check(module, [src, dest, i])
