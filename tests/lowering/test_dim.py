"""Lowering of ``dim(x, axis)`` (LANGUAGE.md §7): a static extent is an i64 constant,
a symbolic or call-time one is ``tensor.dim`` read as i64; negative axes count from
the end, and a func reads the extents of whatever it is called with."""

from __future__ import annotations

from tests.lowering.helpers import NUM, check


def test_static_extent_is_a_constant_and_dynamic_one_reads_tensor_dim():
    check("""
    kernel k(input x: f32[M, 4], output n: i64, output m: i64) {
        n = dim(x, -1); m = dim(x, 0);
    }""", f"""
    CHECK-LABEL: func @k(%x: tensor<?x4xf32>)
    CHECK-NEXT:  ^entry:
    CHECK-NEXT:  %n = arith.constant 4 : i64
    CHECK-NEXT:  {NUM} = tensor.dim %x {{axis = 0}} : tensor<?x4xf32> -> index
    CHECK-NEXT:  %m = arith.cast {NUM} : index -> i64
    CHECK-NEXT:  return %n, %m
    """)


def test_dim_in_a_func_with_a_default_axis():
    check("""
    func scaled(x, axis=-1) { return x / sqrt(dim(x, axis)); }
    kernel k(input x: f32[T, 8], output a: f32[T, 8], output b: f32[T, 8]) {
        a = scaled(x); b = scaled(x, axis=0);
    }""", f"""
    CHECK-LABEL: func @scaled(%x: tensor<?x8xf32>)
    CHECK:       {NUM} = arith.constant 8.0 : f64
    CHECK-NOT:   tensor.dim
    CHECK:       tensor.div %x
    CHECK-LABEL: func @scaled.1(%x: tensor<?x8xf32>)
    CHECK:       {NUM} = tensor.dim %x {{axis = 0}} : tensor<?x8xf32> -> index
    CHECK-NEXT:  {NUM} = arith.cast {NUM} : index -> i64
    CHECK-NEXT:  {NUM} = arith.cast {NUM} : i64 -> f64
    CHECK-NEXT:  {NUM} = arith.sqrt {NUM} : f64
    """)


def test_dim_sizes_a_tensor_with_the_dim_name():
    check("""
    kernel k(input x: f32[M, N], output z: f32[N]) { z = zeros([dim(x, 1)], f32); }
    """, f"""
    CHECK:       {NUM} = tensor.dim %x {{axis = 1}}
    CHECK:       %z = tensor.full {NUM}, {NUM} : (f32, index) -> tensor<?xf32>
    """)
