"""The pure typing rules: NEP 50 promotion, broadcasting, matmul, reductions, layout,
conv/pool extents, construction, indexing."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from wiadsl.dtypes import DType
from wiadsl.frontend import shaperules as sr
from wiadsl.frontend import typerules as tr
from wiadsl.frontend.typerules import UNKNOWN, RuleError, ShapeRuleError, ValueType

F16, F32, F64, I8, I32, I64, B = (DType.F16, DType.F32, DType.F64, DType.I8, DType.I32,
                                  DType.I64, DType.BOOL)


def v(dtype: DType, *shape: object, weak: bool = False) -> ValueType:
    return ValueType(dtype, tuple(shape), weak)  # type: ignore[arg-type]


def weak(dtype: DType) -> ValueType:
    return ValueType(dtype, (), True)


# ------------------------------------------------------------------ promotion

@pytest.mark.parametrize("op, a, b, expected", [
    ("*", v(F16, "N"), weak(F64), v(F16, "N")),             # x * 2.0 keeps f16
    ("+", v(F32, "N"), weak(I64), v(F32, "N")),             # x + N keeps f32
    ("+", v(I8, "N"), weak(I64), v(I8, "N")),               # x + 1 keeps i8
    ("*", v(I32, "N"), weak(F64), v(F64, "N")),             # int tensor * 2.0 -> f64
    ("+", v(I8, 4), v(I32, 4), v(I32, 4)),
    ("+", v(F16, 4), v(I32, 4), v(F64, 4)),                 # NumPy: f16 + i32 -> f64
    ("+", v(DType.BF16, 4), v(F16, 4), v(F32, 4)),
    ("/", v(I32, 4), v(I32, 4), v(F64, 4)),                 # true_divide
    ("/", v(I8, 4), weak(I64), v(F64, 4)),
    ("/", v(F16, 4), weak(I64), v(F16, 4)),
    ("/", weak(I64), weak(I64), weak(F64)),
    ("%", v(I32, 4), weak(I64), v(I32, 4)),
    ("**", v(F32, 4), weak(I64), v(F32, 4)),
    ("%", v(B, 4), v(B, 4), v(I8, 4)),
    ("+", v(B, 4), v(B, 4), v(B, 4)),
    ("<", v(F32, 4), weak(F64), v(B, 4)),
    ("==", v(I32, 4), v(F32, 4), v(B, 4)),
    ("&&", v(B, 4), weak(B), v(B, 4)),
    ("max", v(I8, 4), v(F32, 4), v(F32, 4)),
    ("+", v(F32), v(F64), v(F64)),                          # declared scalars are strong
])
def test_binary_promotion(op: str, a: ValueType, b: ValueType, expected: ValueType) -> None:
    assert tr.binary(op, a, b) == expected


@pytest.mark.parametrize("op, a, b", [("-", v(B, 4), v(B, 4)), ("&&", v(F32), v(B)),
                                      ("||", v(B), v(I32))])
def test_binary_rejects(op: str, a: ValueType, b: ValueType) -> None:
    with pytest.raises(RuleError):
        tr.binary(op, a, b)


_NP = {F16: np.float16, F32: np.float32, F64: np.float64, I8: np.int8, I32: np.int32,
       I64: np.int64, B: np.bool_}


@given(st.sampled_from(list(_NP)), st.sampled_from(list(_NP)),
       st.sampled_from(["+", "*", "/", "<"]))
def test_strong_promotion_matches_numpy(a: DType, b: DType, op: str) -> None:
    x, y = np.ones(2, _NP[a]), np.ones(2, _NP[b])
    expected = {"+": np.add, "*": np.multiply, "/": np.true_divide, "<": np.less}[op](x, y).dtype
    assert tr.binary(op, v(a, 2), v(b, 2)).dtype.numpy == expected  # type: ignore[union-attr]


@pytest.mark.parametrize("op, x, expected", [
    ("exp", v(F16, 3), v(F16, 3)), ("exp", v(I32, 3), v(F64, 3)), ("sqrt", v(I8, 3), v(F16, 3)),
    ("log", v(I64, 3), v(F64, 3)), ("tanh", weak(I64), weak(F64)), ("abs", v(I32, 3), v(I32, 3)),
    ("neg", v(I8, 3), v(I8, 3)), ("relu", v(I32, 3), v(I32, 3)), ("floor", v(I32, 3), v(I32, 3)),
    ("!", v(B, 3), v(B, 3)),
])
def test_unary(op: str, x: ValueType, expected: ValueType) -> None:
    assert tr.unary(op, x) == expected


def test_unary_rejects() -> None:
    with pytest.raises(RuleError):
        tr.unary("neg", v(B, 3))
    with pytest.raises(RuleError):
        tr.unary("!", v(F32, 3))


def test_unknown_propagates() -> None:
    assert tr.binary("+", UNKNOWN, v(F32, 3)) is UNKNOWN
    assert sr.matmul(v(F32, 3, 4), UNKNOWN) is UNKNOWN
    assert sr.reduce("reduce_sum", UNKNOWN, 0) is UNKNOWN


# ------------------------------------------------------------------ broadcasting

@pytest.mark.parametrize("a, b, expected", [
    ((3, 1), (4,), (3, 4)), (("M", 1), ("N",), ("M", "N")), (("M",), (1,), ("M",)),
    ((), ("M", "N"), ("M", "N")), ((None,), (3,), (3,)), ((2, 1, 5), (4, 1), (2, 4, 5)),
])
def test_broadcast(a: tuple, b: tuple, expected: tuple) -> None:
    cons: list[tr.ShapeConstraint] = []
    assert tr.binary("+", v(F32, *a), v(F32, *b), cons=cons).shape == expected  # type: ignore[union-attr]
    assert cons == []


def test_broadcast_static_mismatch_names_both_sides() -> None:
    with pytest.raises(ShapeRuleError, match=r"shape mismatch in '\+': a is f32\[3\], b is f32\[4\]"):
        tr.binary("+", v(F32, 3), v(F32, 4), labels=("a", "b"))


def test_broadcast_symbolic_records_constraint() -> None:
    cons: list[tr.ShapeConstraint] = []
    t = tr.binary("+", v(F32, "M"), v(F32, "N"), ("a", "b"), cons)
    assert t == v(F32, None)
    assert [(c.left, c.right, c.kind) for c in cons] == [("M", "N", "broadcast")]
    assert cons[0].holds({"M": 3, "N": 3}) and cons[0].holds({"M": 1, "N": 5})
    assert cons[0].holds({"M": 2, "N": 5}) is False
    assert cons[0].holds({"M": 2}) is None


def test_broadcast_symbolic_against_int() -> None:
    cons: list[tr.ShapeConstraint] = []
    assert tr.binary("*", v(F32, "M"), v(F32, 4), cons=cons) == v(F32, 4)
    assert cons[0].kind == "broadcast"


# ------------------------------------------------------------------ matmul

@pytest.mark.parametrize("a, b, expected", [
    (("M", "K"), ("K", "N"), ("M", "N")), (("M", "K"), ("K",), ("M",)),
    (("K",), ("K", "N"), ("N",)), (("K",), ("K",), ()),
    (("B", "M", "K"), ("K", "N"), ("B", "M", "N")), ((2, 1, 3, 4), (5, 4, 6), (2, 5, 3, 6)),
])
def test_matmul_shapes(a: tuple, b: tuple, expected: tuple) -> None:
    assert sr.matmul(v(F32, *a), v(F32, *b)) == v(F32, *expected)


def test_matmul_matches_numpy_shapes() -> None:
    for a, b in [((3, 4), (4,)), ((4,), (4, 2)), ((2, 3, 4), (2, 4, 5)), ((7, 1, 3, 4), (6, 4, 2))]:
        got = sr.matmul(v(F32, *a), v(F32, *b)).shape  # type: ignore[union-attr]
        assert got == (np.ones(a) @ np.ones(b)).shape


def test_matmul_mismatch_message() -> None:
    with pytest.raises(ShapeRuleError) as e:
        sr.matmul(v(F32, 3, 4), v(F32, 5), ("A", "x"))
    assert e.value.message == "shape mismatch in '@': A is f32[3, 4], x is f32[5]"


def test_matmul_symbolic_inner_is_a_constraint() -> None:
    cons: list[tr.ShapeConstraint] = []
    assert sr.matmul(v(F32, "M", "K"), v(F32, "N"), ("A", "x"), cons) == v(F32, "M")
    assert [(c.left, c.right, c.kind) for c in cons] == [("K", "N", "equal")]
    assert cons[0].reason == "shape mismatch in '@': A is f32[M, K], x is f32[N]"


def test_matmul_dtype_and_scalar() -> None:
    assert sr.matmul(v(I8, 2, 3), v(I32, 3, 2)) == v(I32, 2, 2)
    with pytest.raises(ShapeRuleError):
        sr.matmul(v(F32), v(F32, 3))


# ------------------------------------------------------------------ reductions

@pytest.mark.parametrize("op, x, axis, keep, expected", [
    ("reduce_sum", v(F32, "M", "N"), None, False, v(F32)),
    ("reduce_sum", v(F32, "M", "N"), 1, False, v(F32, "M")),
    ("reduce_sum", v(F32, "M", "N"), -1, True, v(F32, "M", 1)),
    ("reduce_max", v(F16, 2, 3, 4), (0, 2), False, v(F16, 3)),
    ("reduce_sum", v(I8, 4), None, False, v(I64)),
    ("reduce_sum", v(B, 4), None, False, v(I64)),
    ("reduce_prod", v(I32, 4), 0, False, v(I64)),
    ("reduce_mean", v(I32, 4), None, False, v(F64)),
    ("reduce_mean", v(F16, 4), None, False, v(F16)),
    ("reduce_min", v(I8, 4, 5), 0, True, v(I8, 1, 5)),
    ("argmax", v(F32, "M", "N"), 1, False, v(I64, "M")),
    ("argmin", v(F32, "M", "N"), None, False, v(I64)),
])
def test_reduce(op: str, x: ValueType, axis: object, keep: bool, expected: ValueType) -> None:
    assert sr.reduce(op, x, axis, keep) == expected  # type: ignore[arg-type]


def test_reduce_dtypes_match_numpy() -> None:
    for dt in (I8, I32, I64, B, F16, F32):
        a = np.ones(3, _NP[dt])
        assert sr.reduce("reduce_sum", v(dt, 3)).dtype.numpy == a.sum().dtype  # type: ignore[union-attr]
        assert sr.reduce("reduce_mean", v(dt, 3)).dtype.numpy == a.mean().dtype  # type: ignore[union-attr]


@pytest.mark.parametrize("axis", [2, -3, (0, 0)])
def test_reduce_bad_axis(axis: object) -> None:
    with pytest.raises(ShapeRuleError):
        sr.reduce("reduce_sum", v(F32, "M", "N"), axis)  # type: ignore[arg-type]


def test_argmax_takes_one_axis() -> None:
    with pytest.raises(RuleError):
        sr.reduce("argmax", v(F32, 3, 4), (0, 1))


# ------------------------------------------------------------------ neural

@pytest.mark.parametrize("x, w, stride, padding, expected", [
    ((1, 3, 16, 16), (8, 3, 3, 3), 1, 1, (1, 8, 16, 16)),
    ((2, 3, 16, 16), (8, 3, 3, 3), 1, 0, (2, 8, 14, 14)),
    ((1, 3, 17, 16), (4, 3, 3, 3), 2, 0, (1, 4, 8, 7)),
    (("N", 3, "H", "W"), (8, 3, 3, 3), 1, 1, ("N", 8, None, None)),
])
def test_conv2d_extents(x: tuple, w: tuple, stride: int, padding: int, expected: tuple) -> None:
    assert sr.conv2d(v(F32, *x), v(F32, *w), stride, padding) == v(F32, *expected)


def test_conv2d_errors() -> None:
    with pytest.raises(ShapeRuleError, match="input channels"):
        sr.conv2d(v(F32, 1, 3, 8, 8), v(F32, 4, 2, 3, 3))
    with pytest.raises(ShapeRuleError, match="empty"):
        sr.conv2d(v(F32, 1, 3, 2, 2), v(F32, 4, 3, 3, 3))
    with pytest.raises(ShapeRuleError, match="stride"):
        sr.conv2d(v(F32, 1, 3, 8, 8), v(F32, 4, 3, 3, 3), stride=0)


@pytest.mark.parametrize("op, x, kernel, stride, expected", [
    ("max_pool", (1, 8, 16, 16), 2, None, v(F32, 1, 8, 8, 8)),
    ("max_pool", (1, 8, 7, 7), 3, 2, v(F32, 1, 8, 3, 3)),
    ("avg_pool", (1, 8, "H", 4), 2, None, v(F32, 1, 8, None, 2)),
])
def test_pool_extents(op: str, x: tuple, kernel: int, stride: int | None,
                      expected: ValueType) -> None:
    assert sr.pool(op, v(F32, *x), kernel, stride) == expected


def test_avg_pool_of_ints_is_f64() -> None:
    assert sr.pool("avg_pool", v(I32, 1, 1, 4, 4)) == v(F64, 1, 1, 2, 2)


# ------------------------------------------------------------------ layout and construction

def test_transpose() -> None:
    assert sr.transpose(v(F32, "M", "N")) == v(F32, "N", "M")
    assert sr.transpose(v(F32, 1, 2, 3, 4), (0, 2, 3, 1)) == v(F32, 1, 3, 4, 2)
    with pytest.raises(ShapeRuleError):
        sr.transpose(v(F32, 2, 3), (0, 0))
    with pytest.raises(ShapeRuleError):
        sr.transpose(v(F32, 2, 3), (0, 1, 2))


def test_reshape() -> None:
    assert sr.reshape(v(F32, 4, 6), (2, 12)) == v(F32, 2, 12)
    assert sr.reshape(v(F32, 4, 6), (-1, 3)) == v(F32, 8, 3)
    assert sr.reshape(v(F32, "M", "N"), ("N", "M")) == v(F32, "N", "M")
    assert sr.reshape(v(F32, "M", 4), (-1, 2)) == v(F32, None, 2)
    assert sr.reshape(v(F32, "M", 4), (4, -1)) == v(F32, 4, "M")
    with pytest.raises(ShapeRuleError, match="24 elements"):
        sr.reshape(v(F32, 4, 6), (5, 5))
    with pytest.raises(ShapeRuleError):
        sr.reshape(v(F32, 4, 6), (-1, 5))


def test_flatten_keeps_axis_0() -> None:
    assert sr.flatten(v(F32, 1, 16, 8, 8)) == v(F32, 1, 1024)
    assert sr.flatten(v(F32, "B", "C")) == v(F32, "B", "C")
    assert sr.flatten(v(F32, "B", "C", 2)) == v(F32, "B", None)


def test_broadcast_to_and_concat() -> None:
    assert sr.broadcast_to(v(F32, 1, "N"), ("M", "N")) == v(F32, "M", "N")
    with pytest.raises(ShapeRuleError):
        sr.broadcast_to(v(F32, 3), (2, 4))
    assert sr.concat([v(F32, 2, 3), v(F16, 4, 3)], 0, ["a", "b"]) == v(F32, 6, 3)
    assert sr.concat([v(F32, "M", 3), v(F32, "M", 3)], -1, ["a", "b"]) == v(F32, "M", 6)
    with pytest.raises(ShapeRuleError):
        sr.concat([v(F32, 2, 3), v(F32, 2, 4)], 0, ["a", "b"])


def test_construction() -> None:
    assert sr.filled("zeros", ("M", 4), F32) == v(F32, "M", 4)
    assert sr.full((3,), weak(F64), None) == v(F64, 3)
    assert sr.full((3,), weak(F64), I32) == v(I32, 3)
    assert sr.arange(weak(I64), 5) == v(I64, 5)
    assert sr.arange(weak(I64), "N") == v(I64, "N")
    assert tr.cast(v(F32, 3, weak=True), F16) == v(F16, 3)


def test_quantization() -> None:
    assert sr.quantize("quantize", v(F32, "N"), v(F32), v(I32)) == v(I8, "N")
    assert sr.quantize("dequantize", v(I8, "N"), v(F32), v(I32)) == v(F32, "N")
    assert sr.quantize("fake_quant", v(F16, "N"), weak(F64), weak(I64)) == v(F16, "N")
    with pytest.raises(RuleError):
        sr.quantize("dequantize", v(F32, 3), v(F32), v(I32))


def test_where() -> None:
    assert tr.where(v(B, "N"), v(F32, "N"), weak(F64)) == v(F32, "N")
    with pytest.raises(RuleError):
        tr.where(v(F32, "N"), v(F32, "N"), v(F32, "N"))


# ------------------------------------------------------------------ indexing

def test_index() -> None:
    x = v(F32, 6, 8)
    assert sr.index(x, [sr.IndexAt(0), sr.IndexAt(None)]) == v(F32)
    assert sr.index(x, [sr.IndexAt(-1)]) == v(F32, 8)
    assert sr.index(x, [sr.SliceOf(None, None, 2)]) == v(F32, 3, 8)
    assert sr.index(x, [sr.SliceOf(1, -1, 2), sr.SliceOf()]) == v(F32, 2, 8)
    assert sr.index(x, [sr.SliceOf(None, None, -1)]) == v(F32, 6, 8)
    assert sr.index(v(F32, "M"), [sr.SliceOf()]) == v(F32, "M")
    assert sr.index(v(F32, "M"), [sr.SliceOf(0, 2)]) == v(F32, None)
    assert sr.index(x, [sr.SliceOf(None, None, None, dynamic=True)]) == v(F32, None, 8)
    with pytest.raises(ShapeRuleError, match="out of range"):
        sr.index(x, [sr.IndexAt(6)])
    with pytest.raises(ShapeRuleError, match="out of range"):
        sr.index(x, [sr.IndexAt(0), sr.IndexAt(-9)])
    with pytest.raises(ShapeRuleError, match="too many"):
        sr.index(v(F32, 3), [sr.IndexAt(0), sr.IndexAt(0)])


def test_slice_update() -> None:
    t = v(F32, 6, 8)
    assert sr.slice_update(t, [sr.IndexAt(0)], weak(F64)) == t
    assert sr.slice_update(t, [sr.SliceOf(0, 2), sr.SliceOf(2, 4)], v(F64, 2, 2)) == t
    with pytest.raises(ShapeRuleError):
        sr.slice_update(t, [sr.IndexAt(0)], v(F32, 3))


# ------------------------------------------------------------------ joins and outputs

def test_join() -> None:
    assert tr.join(weak(F64), v(F32)) == v(F32)
    assert tr.join(weak(I64), weak(F64)) == weak(F64)
    assert tr.join(v(F32, "M"), v(F32, 3)) == v(F32, None)
    with pytest.raises(RuleError):
        tr.join(v(F32), v(F64))
    with pytest.raises(RuleError):
        tr.join(weak(F64), v(I32))


def test_assignable() -> None:
    tr.assignable(weak(I64), v(I64), "output 'n'", None)
    tr.assignable(weak(F64), v(F32), "output 'x'", None)
    with pytest.raises(RuleError, match="use cast"):
        tr.assignable(v(F64, 3), v(F32, 3), "output 'y'", None)
    cons: list[tr.ShapeConstraint] = []
    tr.assignable(v(F32, "K"), v(F32, "N"), "output 'y'", cons)
    assert [(c.left, c.right) for c in cons] == [("K", "N")]
