"""The reference interpreter against NumPy, op by op, plus control flow."""

from __future__ import annotations

import math

import numpy as np
import pytest
from ir_corpus import CASES, SEED
from ir_helpers import run_op, type_of

from wiadsl.diagnostics import WiaCallError, WiaRuntimeError
from wiadsl.dtypes import DType
from wiadsl.ir import INDEX, ScalarType, TensorType, parse_module, run_func, verify
from wiadsl.ir.numerics import round_bf16
from wiadsl.ir.ops import ELEMENTWISE_FNS

SIZES = [1, 7, 33]
F32, I64 = DType.F32, DType.I64
_erf = np.vectorize(math.erf)

# Independent NumPy spellings of each elementwise function (float inputs).
FLOAT_REFERENCE = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
    "rem": np.mod, "pow": np.power, "max": np.maximum, "min": np.minimum,
    "neg": lambda a: -a, "abs": np.abs, "exp": np.exp, "log": np.log, "sqrt": np.sqrt,
    "rsqrt": lambda a: 1 / np.sqrt(a), "tanh": np.tanh,
    "sigmoid": lambda a: 1 / (1 + np.exp(-a)), "relu": lambda a: np.where(a > 0, a, 0),
    "sin": np.sin, "cos": np.cos, "floor": np.floor, "ceil": np.ceil,
    "erf": lambda a: _erf(a.astype(np.float64)),
}


def _inputs(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    a = rng.uniform(0.5, 3.0, size=(n, 1)).astype(np.float32)
    b = rng.uniform(0.5, 3.0, size=(n,)).astype(np.float32)
    return a, b


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("fn", [f for f in ELEMENTWISE_FNS if f.name in FLOAT_REFERENCE],
                         ids=lambda f: f.name)
def test_tensor_elementwise_broadcast(fn, n: int) -> None:
    a, b = _inputs(n, np.random.default_rng(n))
    args = [a, b][: fn.arity]
    shape = np.broadcast_shapes(*(x.shape for x in args))
    out = run_op(f"tensor.{fn.name}", args, TensorType(F32, shape))
    expected = FLOAT_REFERENCE[fn.name](*args)
    assert out.dtype == np.float32 and out.shape == shape
    np.testing.assert_allclose(out, expected, rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize("fn", [f for f in ELEMENTWISE_FNS if f.name in FLOAT_REFERENCE],
                         ids=lambda f: f.name)
def test_arith_elementwise_scalar(fn) -> None:
    args = [np.float64(1.75), np.float64(0.625)][: fn.arity]
    out = run_op(f"arith.{fn.name}", args, ScalarType(DType.F64))
    assert isinstance(out, np.float64)
    assert out == pytest.approx(float(FLOAT_REFERENCE[fn.name](*args)), rel=1e-12)


@pytest.mark.parametrize("name,ref", [("div", np.floor_divide), ("rem", np.remainder),
                                      ("pow", np.power), ("max", np.maximum)])
def test_integer_floor_semantics(name: str, ref) -> None:
    a = np.array([-7, 7, -7, 7, 0], np.int32)
    b = np.array([2, -2, -2, 2, 3], np.int32) if name != "pow" else np.array([3, 2, 1, 0, 4], np.int32)
    out = run_op(f"tensor.{name}", [a, b], TensorType(DType.I32, (5,)))
    np.testing.assert_array_equal(out, ref(a, b))
    assert out.dtype == np.int32


def test_integer_pow_negative_exponent_is_runtime_error() -> None:
    with pytest.raises(WiaRuntimeError):
        run_op("arith.pow", [np.int64(2), np.int64(-1)], ScalarType(I64))


def test_bool_logic_and_bitwise_ints() -> None:
    a, b = np.array([True, True, False]), np.array([True, False, False])
    i1 = TensorType(DType.BOOL, (3,))
    np.testing.assert_array_equal(run_op("tensor.and", [a, b], i1), a & b)
    np.testing.assert_array_equal(run_op("tensor.or", [a, b], i1), a | b)
    np.testing.assert_array_equal(run_op("tensor.not", [a], i1), ~a)
    assert run_op("arith.and", [np.int32(12), np.int32(10)], ScalarType(DType.I32)) == 8


def test_index_arithmetic() -> None:
    out = run_op("arith.mul", [3, 4], INDEX, input_types=[INDEX, INDEX])
    assert out == 12 and isinstance(out, np.int64)


@pytest.mark.parametrize("pred,ref", [("oeq", np.equal), ("one", None), ("une", np.not_equal),
                                      ("olt", np.less), ("ole", np.less_equal),
                                      ("ogt", np.greater), ("oge", np.greater_equal)])
def test_cmpf_predicates_with_nan(pred: str, ref) -> None:
    a = np.array([1.0, 2.0, np.nan, 3.0], np.float32)
    b = np.float32(2.0)
    out = run_op("tensor.cmpf", [a, b], TensorType(DType.BOOL, (4,)), {"predicate": pred})
    expected = (a != b) & ~np.isnan(a) if ref is None else ref(a, b)
    np.testing.assert_array_equal(out, expected)


def test_cmpi_and_select() -> None:
    a = np.arange(7, dtype=np.int64)
    c = run_op("tensor.cmpi", [a, np.int64(3)], TensorType(DType.BOOL, (7,)), {"predicate": "sge"})
    np.testing.assert_array_equal(c, a >= 3)
    out = run_op("tensor.select", [c, a, np.int64(-1)], TensorType(I64, (7,)))
    np.testing.assert_array_equal(out, np.where(a >= 3, a, -1))
    s = run_op("arith.select", [np.bool_(False), np.float32(1), np.float32(2)], ScalarType(F32))
    assert s == 2.0 and isinstance(s, np.float32)


def test_casts_and_bf16_rounding() -> None:
    x = np.array([1.7, -1.7, 300.5, 1.0 + 2.0 ** -9], np.float32)
    np.testing.assert_array_equal(run_op("tensor.cast", [x], TensorType(DType.I32, (4,))),
                                  x.astype(np.int32))
    bf = run_op("tensor.cast", [x], TensorType(DType.BF16, (4,)))
    assert bf.dtype == np.float32
    np.testing.assert_array_equal(bf, [1.703125, -1.703125, 300.0, 1.0])
    assert run_op("arith.cast", [5], ScalarType(I64), input_types=[INDEX]) == 5
    # bf16 arithmetic rounds after every op: 1 + 2^-9 is not representable.
    one = np.float32(1.0)
    out = run_op("arith.add", [one, np.float32(2.0 ** -9)], ScalarType(DType.BF16),
                 input_types=[ScalarType(DType.BF16)] * 2)
    assert out == 1.0


def test_round_bf16_ties_to_even() -> None:
    x = np.array([1 + 2 ** -8, 1 + 3 * 2 ** -8, np.inf, np.nan], np.float32)
    out = round_bf16(x)
    assert out[0] == 1.0 and out[1] == 1 + 2 ** -6 and np.isinf(out[2]) and np.isnan(out[3])


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("kind", ["sum", "mean", "max", "min", "prod", "argmax", "argmin"])
def test_reductions(kind: str, n: int) -> None:
    x = np.random.default_rng(n).uniform(0.5, 1.5, size=(3, n)).astype(np.float32)
    name = f"tensor.{kind}" if kind.startswith("arg") else f"tensor.reduce_{kind}"
    ref = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min, "prod": np.prod,
           "argmax": np.argmax, "argmin": np.argmin}[kind]
    dtype = I64 if kind.startswith("arg") else F32
    out = run_op(name, [x], TensorType(dtype, (3,)), {"axes": [1]})
    np.testing.assert_allclose(out, ref(x, axis=1), rtol=1e-5)
    full = run_op(name, [x], TensorType(dtype, (1, 1)), {"axes": [0, 1], "keepdims": True})
    np.testing.assert_allclose(full, ref(x, axis=None, keepdims=True), rtol=1e-5)
    scalar = run_op(name, [x], ScalarType(dtype), {"axes": [-2, -1]})
    assert isinstance(scalar, np.generic) and scalar.dtype == dtype.numpy


def test_reduce_max_of_empty_is_runtime_error() -> None:
    x = np.zeros((0,), np.float32)
    with pytest.raises(WiaRuntimeError, match="tensor.reduce_max"):
        run_op("tensor.reduce_max", [x], ScalarType(F32), {"axes": [0]},
               input_types=[TensorType(F32, (None,))])


@pytest.mark.parametrize("sa,sb", [((7,), (7,)), ((3, 7), (7,)), ((7,), (7, 33)),
                                   ((2, 1, 3, 7), (5, 7, 1)), ((1, 7), (7, 1))])
def test_matmul(sa, sb) -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal(sa).astype(np.float32)
    b = rng.standard_normal(sb).astype(np.float32)
    ref = np.matmul(a, b)
    out = run_op("tensor.matmul", [a, b], type_of(ref))
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


def test_transpose() -> None:
    x = np.arange(2 * 7 * 3, dtype=np.int64).reshape(2, 7, 3)
    out = run_op("tensor.transpose", [x], TensorType(I64, (3, 2, 7)), {"perm": [2, 0, 1]})
    np.testing.assert_array_equal(out, x.transpose(2, 0, 1))


def _conv_reference(x, w, s, p):
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p))).astype(np.float64)
    n, _, h, wd = xp.shape
    o, _, kh, kw = w.shape
    ho, wo = (h - kh) // s + 1, (wd - kw) // s + 1
    out = np.zeros((n, o, ho, wo))
    for i in range(ho):
        for j in range(wo):
            patch = xp[:, :, i * s:i * s + kh, j * s:j * s + kw]
            out[:, :, i, j] = np.einsum("nchw,ochw->no", patch, w)
    return out


@pytest.mark.parametrize("s,p,size", [(1, 0, 7), (2, 1, 7), (1, 2, 1), (3, 1, 33)])
def test_conv2d(s: int, p: int, size: int) -> None:
    rng = np.random.default_rng(size)
    x = rng.standard_normal((2, 3, size, size)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    ref = _conv_reference(x, w, s, p)
    out = run_op("tensor.conv2d", [x, w], TensorType(F32, ref.shape),
                 {"stride": [s, s], "padding": [p, p]})
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("k,s,size", [(2, 2, 7), (3, 1, 7), (1, 1, 1), (2, 3, 33)])
def test_pools(kind: str, k: int, s: int, size: int) -> None:
    x = np.random.default_rng(size).standard_normal((1, 2, size, size)).astype(np.float32)
    ho = (size - k) // s + 1
    ref = np.zeros((1, 2, ho, ho), np.float32)
    for i in range(ho):
        for j in range(ho):
            window = x[:, :, i * s:i * s + k, j * s:j * s + k]
            ref[:, :, i, j] = window.max(axis=(2, 3)) if kind == "max" else window.mean(axis=(2, 3))
    out = run_op(f"tensor.{kind}_pool", [x], TensorType(F32, ref.shape),
                 {"kernel": [k, k], "stride": [s, s]})
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)


def test_shape_ops() -> None:
    x = np.arange(28, dtype=np.float32).reshape(7, 4)
    dyn = TensorType(F32, (None, 4))
    out = run_op("tensor.reshape", [x, 14], TensorType(F32, (None, 2)),
                 input_types=[dyn, INDEX])
    np.testing.assert_array_equal(out, x.reshape(14, 2))
    with pytest.raises(WiaRuntimeError, match="cannot reshape"):
        run_op("tensor.reshape", [x, 5], TensorType(F32, (None, 2)), input_types=[dyn, INDEX])
    out = run_op("tensor.broadcast_to", [x[0], 3], TensorType(F32, (None, 4)),
                 input_types=[TensorType(F32, (4,)), INDEX])
    np.testing.assert_array_equal(out, np.broadcast_to(x[0], (3, 4)))
    out = run_op("tensor.concat", [x, x[:2]], TensorType(F32, (9, 4)), {"axis": 0})
    np.testing.assert_array_equal(out, np.concatenate([x, x[:2]]))
    out = run_op("tensor.full", [np.float32(2.5), 33], TensorType(F32, (None,)),
                 input_types=[ScalarType(F32), INDEX])
    np.testing.assert_array_equal(out, np.full(33, 2.5, np.float32))
    out = run_op("tensor.arange", [7], TensorType(I64, (None,)), {"start": 0, "step": 1},
                 input_types=[INDEX])
    np.testing.assert_array_equal(out, np.arange(7))
    out = run_op("tensor.dim", [x], INDEX, {"axis": 0}, input_types=[dyn])
    assert out == 7


def test_extract_and_insert() -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    out = run_op("tensor.extract", [x, np.int64(-1), np.int64(2)], ScalarType(F32))
    assert out == x[-1, 2] and isinstance(out, np.float32)
    with pytest.raises(WiaRuntimeError, match="'tensor.extract': index 4 is out of range for "
                                              "axis 1 with extent 4"):
        run_op("tensor.extract", [x, np.int64(0), np.int64(4)], ScalarType(F32))
    out = run_op("tensor.insert", [np.float64(9.7), x, np.int64(1), np.int64(-1)],
                 TensorType(F32, (3, 4)))
    expected = x.copy()
    expected[1, -1] = 9.7
    np.testing.assert_array_equal(out, expected)
    assert x[1, -1] == 7  # functional: the input is untouched


@pytest.mark.parametrize("layout,parts,index", [
    (["i"], [-1], np.s_[-1]),
    (["s:e", "::t"], [1, 100, -1], np.s_[1:100, ::-1]),
    ([":", "s:e:t"], [-1, 0, -2], np.s_[:, -1:0:-2]),
    (["s:", "i"], [-5, 2], np.s_[-5:, 2]),
])
def test_extract_slice(layout, parts, index) -> None:
    x = np.arange(7 * 5, dtype=np.int32).reshape(7, 5)
    ref = x[index]
    types = [type_of(x)] + [ScalarType(I64)] * len(parts)
    dyn = TensorType(DType.I32, (None,) * ref.ndim)
    out = run_op("tensor.extract_slice", [x, *map(np.int64, parts)], dyn, {"layout": layout},
                 input_types=types)
    np.testing.assert_array_equal(out, ref)


def test_insert_slice_casts_and_broadcasts() -> None:
    dest = np.zeros((7, 5), np.int32)
    src = np.array([1.9, -2.9, 3.5, 4.0, 5.0], np.float32)
    out = run_op("tensor.insert_slice", [src, dest, np.int64(1), np.int64(2)],
                 TensorType(DType.I32, (7, 5)), {"layout": ["s::t"]})
    ref = dest.copy()
    ref[1::2] = src.astype(np.int32)
    np.testing.assert_array_equal(out, ref)
    with pytest.raises(WiaRuntimeError, match="slice step is zero"):
        run_op("tensor.insert_slice", [src, dest, np.int64(1), np.int64(0)],
               TensorType(DType.I32, (7, 5)), {"layout": ["s::t"]})
    with pytest.raises(WiaRuntimeError, match="index 7 is out of range for axis 0"):
        run_op("tensor.insert_slice", [src, dest, np.int64(7)],
               TensorType(DType.I32, (7, 5)), {"layout": ["i"]})


def test_quantization() -> None:
    x = np.array([0.5, 1.5, 2.5, -0.5, 1000.0, -1000.0, 0.26], np.float32)
    scale, zp = np.float32(1.0), np.int64(1)
    q = run_op("tensor.quantize", [x, scale, zp], TensorType(DType.I8, (7,)))
    np.testing.assert_array_equal(q, [1, 3, 3, 1, 127, -128, 1])
    d = run_op("tensor.dequantize", [q, np.float32(0.5), zp], TensorType(F32, (7,)))
    np.testing.assert_array_equal(d, (q.astype(np.float32) - 1) * 0.5)
    f = run_op("tensor.fake_quant", [x, np.float32(0.5), zp], TensorType(F32, (7,)))
    np.testing.assert_array_equal(f, (np.clip(np.rint(x / 0.5) + 1, -128, 127) - 1) * 0.5)


def test_seed_example() -> None:
    module = parse_module(SEED)
    verify(module)
    x = np.array([1.0, -2.0, 3.0], np.float32)
    (low,) = run_func(module, "conditional_compute", [x, np.float32(1.0)])
    np.testing.assert_array_equal(low, x * x)
    (high,) = run_func(module, "conditional_compute", [x, np.float32(100.0)])
    np.testing.assert_array_equal(high, x)


@pytest.mark.parametrize("n", [0, 1, 7, 33])
def test_counted_loop_and_zero_trip(n: int) -> None:
    module = parse_module(CASES["cf.loop"])
    (out,) = run_func(module, "count", [n])
    assert out == sum(range(n)) and isinstance(out, np.int64)


def test_a_step_limit_stops_a_loop_that_runs_past_it() -> None:
    from wiadsl.ir.interpreter import StepLimitReached

    module = parse_module(CASES["cf.loop"])
    ops = sum(len(b.ops) for b in module["count"].blocks)  # 9: 3 trips run 21
    (out,) = run_func(module, "count", [3], max_steps=ops * 4)
    assert out == 3
    with pytest.raises(StepLimitReached):
        run_func(module, "count", [1000], max_steps=ops * 4)


def test_calls_with_multiple_results() -> None:
    (out,) = run_func(parse_module(CASES["func.call"]), "caller", [np.float32(3.0)])
    assert out == 3.0 and isinstance(out, np.float32)


def test_constants_module() -> None:
    outs = run_func(parse_module(CASES["arith.constant"]), "consts", [])
    assert [type(o) for o in outs] == [np.float32, np.int64, np.bool_, np.int64, np.float32,
                                       np.float16]
    assert outs[4] == round_bf16(np.float32(0.1))
    outs = run_func(parse_module(CASES["tensor.constant"]), "tc", [])
    assert outs[2].shape == (0, 2) and outs[1].dtype == np.bool_


def test_bad_arguments() -> None:
    module = parse_module(SEED)
    with pytest.raises(WiaCallError, match="takes 2 arguments, got 1"):
        run_func(module, "conditional_compute", [np.zeros(3)])
    with pytest.raises(WiaCallError, match="argument x of @conditional_compute"):
        run_func(module, "conditional_compute", [np.zeros((3, 3)), 1.0])
