"""``vector<NxT>`` types and the vector ops (ops_vector.py): text round trips,
strict verification (lanes and dtypes agree), and interpreter semantics."""

from __future__ import annotations

import numpy as np
import pytest

from wiadsl.diagnostics import WiaIRError, WiaRuntimeError
from wiadsl.dtypes import DType
from wiadsl.ir import parse_module, print_module, run_func, verify
from wiadsl.ir.types import ScalarType, VectorType, with_dtype

KERNEL = """
func @f(%a: tensor<?xf32>, %o: tensor<?xf32>, %off: index) -> (f32, f32, i32) {
^entry:
  %v = loop.vload %a, %off : (tensor<?xf32>, index) -> vector<8xf32>
  %z = arith.constant 0.0 : f32
  %zb = loop.broadcast %z : f32 -> vector<8xf32>
  %m = arith.max %v, %zb : vector<8xf32>
  %c = arith.cmpf ogt, %v, %zb : vector<8xf32>
  %s = arith.select %c, %m, %v : (vector<8xi1>, vector<8xf32>, vector<8xf32>) -> vector<8xf32>
  %k = arith.cast %s : vector<8xf32> -> vector<8xi32>
  %e = arith.exp %v : vector<8xf32>
  %sum = loop.vreduce %s {kind = "add"} : vector<8xf32> -> f32
  %mx = loop.vreduce %e {kind = "max"} : vector<8xf32> -> f32
  %ki = loop.vreduce %k {kind = "add"} : vector<8xi32> -> i32
  loop.vstore %s, %o, %off : (vector<8xf32>, tensor<?xf32>, index) -> ()
  %far = arith.constant 1000000 : index
  loop.prefetch %a, %far : (tensor<?xf32>, index) -> ()
  return %sum, %mx, %ki : f32, f32, i32
}
"""


def test_vector_type_prints_and_compares():
    t = VectorType(DType.F32, 8)
    assert str(t) == "vector<8xf32>" and t.element == ScalarType(DType.F32)
    assert with_dtype(t, DType.BOOL) == VectorType(DType.BOOL, 8)
    assert str(VectorType(DType.BOOL, 4)) == "vector<4xi1>"
    with pytest.raises(ValueError):
        VectorType(DType.F32, 0)


def test_text_round_trips():
    module = parse_module(KERNEL)
    verify(module)
    text = print_module(module)
    assert "loop.vload %a, %off : (tensor<?xf32>, index) -> vector<8xf32>" in text
    assert "arith.cmpf ogt, %v, %zb : vector<8xf32>" in text
    assert 'loop.vreduce %s {kind = "add"} : vector<8xf32> -> f32' in text
    assert print_module(parse_module(text)) == text


def test_interpreter_runs_lanes_like_numpy():
    a = np.array([-3, -2, -1, 0, 1, 2, 3, 4, 5, 6], np.float32)
    o = np.zeros(10, np.float32)
    s, mx, ki = run_func(parse_module(KERNEL), "f", [a, o, 2])
    lanes = a[2:10]
    want = np.where(lanes > 0, np.maximum(lanes, 0), lanes)
    assert s == np.float32(want.sum()) and ki == want.astype(np.int32).sum()
    assert mx == np.exp(lanes).max()


@pytest.mark.parametrize("off", [3, -1])
def test_vload_out_of_range_is_a_runtime_error(off):
    a, o = np.zeros(10, np.float32), np.zeros(10, np.float32)
    with pytest.raises(WiaRuntimeError, match="loop.vload"):
        run_func(parse_module(KERNEL), "f", [a, o, off])


def test_vstore_out_of_range_is_a_runtime_error():
    text = """
func @g(%o: tensor<5xf32>, %x: f32) {
^entry:
  %b = loop.broadcast %x : f32 -> vector<4xf32>
  %c2 = arith.constant 2 : index
  loop.vstore %b, %o, %c2 : (vector<4xf32>, tensor<5xf32>, index) -> ()
  return
}
"""
    with pytest.raises(WiaRuntimeError, match="loop.vstore"):
        run_func(parse_module(text), "g", [np.zeros(5, np.float32), 1.0])


@pytest.mark.parametrize("kind,dtype,values,want", [
    ("max", "f32", [1.0, np.nan, 3.0, 2.0], np.nan),
    ("min", "f64", [4.0, -2.5, 3.0, 7.0], -2.5),
    ("mul", "i64", [2, 3, -4, 5], -120),
    ("max", "i8", [-7, 12, 3, -128], 12),
    ("add", "i1", [False, True, False, False], True),
    ("mul", "i1", [True, True, False, True], False),
])
def test_vreduce_kinds(kind, dtype, values, want):
    text = f"""
func @r(%a: tensor<4x{dtype}>) -> {dtype} {{
^entry:
  %c0 = arith.constant 0 : index
  %v = loop.vload %a, %c0 : (tensor<4x{dtype}>, index) -> vector<4x{dtype}>
  %r = loop.vreduce %v {{kind = "{kind}"}} : vector<4x{dtype}> -> {dtype}
  return %r : {dtype}
}}
"""
    np_dtype = {"f32": np.float32, "f64": np.float64, "i64": np.int64, "i8": np.int8, "i1": np.bool_}[dtype]
    (got,) = run_func(parse_module(text), "r", [np.array(values, np_dtype)])
    np.testing.assert_array_equal(got, np.array(want, np_dtype))


BAD = [
    ("%r = arith.add %v, %w : (vector<8xf32>, vector<4xf32>) -> vector<8xf32>", "types must be equal"),
    ("%r = arith.cmpf olt, %v, %v : (vector<8xf32>, vector<8xf32>) -> i1", "result must be vector<8xi1>"),
    ("%r = arith.select %c1, %v, %v : (vector<4xi1>, vector<8xf32>, vector<8xf32>) -> vector<8xf32>",
     "condition must be"),
    ("%r = arith.cast %v : vector<8xf32> -> vector<4xi32>", "same lanes"),
    ("%r = arith.cast %v : vector<8xf32> -> f32", "same lanes"),
    ("%r = loop.vload %buf, %i : (tensor<?xf32>, index) -> vector<8xf64>", "vector of f32"),
    ("%r = loop.vload %buf, %i : (tensor<?xf32>, index) -> f32", "must be a vector"),
    ("%r = loop.broadcast %x : f64 -> vector<8xf32>", "broadcasts a f32"),
    ("%r = loop.vreduce %v {kind = \"sum\"} : vector<8xf32> -> f32", "kind"),
    ("%r = loop.vreduce %v {kind = \"add\"} : vector<8xf32> -> f64", "result must be f32"),
    ("%r = arith.exp %k : vector<8xi32>", "does not accept"),
]


@pytest.mark.parametrize("line,message", BAD)
def test_verifier_is_strict(line, message):
    text = f"""
func @bad(%buf: tensor<?xf32>, %i: index, %x: f64, %v: vector<8xf32>, %w: vector<4xf32>,
          %c1: vector<4xi1>, %k: vector<8xi32>) {{
^entry:
  {line}
  return
}}
"""
    with pytest.raises(WiaIRError, match=message):
        verify(parse_module(text))


def test_vstore_dtype_must_match():
    text = """
func @bad(%buf: tensor<?xf32>, %i: index, %v: vector<8xf64>) {
^entry:
  loop.vstore %v, %buf, %i : (vector<8xf64>, tensor<?xf32>, index) -> ()
  return
}
"""
    with pytest.raises(WiaIRError, match="stores f32 vectors"):
        verify(parse_module(text))


def test_bad_vector_type_text():
    with pytest.raises(WiaIRError, match="vector"):
        parse_module("func @f(%v: vector<0xf32>) {\n^e:\n  return\n}")
