"""Lowering of func calls with defaults and keyword arguments (LANGUAGE.md §4):
defaults and constant keyword arguments fold into the instance as constants, and
calls that bind the same values share one instance."""

from __future__ import annotations

from tests.lowering.helpers import NUM, check

SHIFT = """
const SCALE = 2.0;
func shift(x, axis=-1, eps=1e-5, k=SCALE * 2.0) {
    return x * k - reduce_max(x, axis=axis, keepdims=true) + eps;
}
"""


def test_defaults_and_keywords_fold_into_the_instance():
    check(SHIFT + """
    kernel k(input x: f32[M, N], output a: f32[M, N], output b: f32[M, N],
             output c: f32[M, N]) {
        a = shift(x); b = shift(x, axis=0); c = shift(x, 0, k=3.0, eps=0.5);
    }""", f"""
    CHECK-LABEL: func @k(
    CHECK:      %a = func.call @shift(%x) : (tensor<?x?xf32>) -> tensor<?x?xf32>
    CHECK-NEXT: %b = func.call @shift.1(%x)
    CHECK-NEXT: %c = func.call @shift.2(%x)
    CHECK-LABEL: func @shift(%x: tensor<?x?xf32>)
    CHECK:       arith.constant 4.0 : f32
    CHECK:       tensor.reduce_max %x {{axes = [1], keepdims}}
    CHECK:       arith.constant 1e-05 : f32
    CHECK-LABEL: func @shift.1(%x: tensor<?x?xf32>)
    CHECK:       arith.constant 4.0 : f32
    CHECK:       tensor.reduce_max %x {{axes = [0], keepdims}}
    CHECK:       arith.constant 1e-05 : f32
    CHECK-LABEL: func @shift.2(%x: tensor<?x?xf32>)
    CHECK:       {NUM} = arith.constant 3.0 : f32
    CHECK:       tensor.reduce_max %x {{axes = [0], keepdims}}
    CHECK:       arith.constant 0.5 : f32
    CHECK-NOT:   func @shift.3
    """)


def test_a_default_and_the_same_value_passed_share_one_instance():
    check(SHIFT + """
    kernel k(input x: f32[M, N], output a: f32[M, N], output b: f32[M, N],
             output c: f32[M, N]) {
        a = shift(x); b = shift(x, -1); c = shift(x, eps=1e-5, axis=-1);
    }""", """
    CHECK:      %a = func.call @shift(%x)
    CHECK-NEXT: %b = func.call @shift(%x)
    CHECK-NEXT: %c = func.call @shift(%x)
    CHECK-NOT:  func @shift.1
    """)


def test_a_tensor_keyword_argument_is_passed():
    check("""
    func affine(x, scale=1.0, bias=0.0) { return x * scale + bias; }
    kernel k(input x: f32[N], input b: f32[N], output y: f32[N]) {
        y = affine(x, bias=b);
    }""", """
    CHECK:       %y = func.call @affine(%x, %b) : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
    CHECK-LABEL: func @affine(%x: tensor<?xf32>, %bias: tensor<?xf32>)
    CHECK:       arith.constant 1.0 : f32
    """)


def test_a_list_default_is_a_compile_time_axis_list():
    check("""
    func total(x, axes=[0, 2]) { return reduce_sum(x, axis=axes); }
    kernel k(input x: f32[A, B, C], output y: f32[B], output z: f32[C]) {
        y = total(x); z = total(x, axes=[0, 1]);
    }""", """
    CHECK:       %y = func.call @total(%x) : (tensor<?x?x?xf32>) -> tensor<?xf32>
    CHECK:       %z = func.call @total.1(%x)
    CHECK-LABEL: func @total(%x: tensor<?x?x?xf32>)
    CHECK:       tensor.reduce_sum %x {axes = [0, 2]}
    CHECK-LABEL: func @total.1(%x: tensor<?x?x?xf32>)
    CHECK:       tensor.reduce_sum %x {axes = [0, 1]}
    """)


def test_a_none_default_reduces_every_axis_and_is_never_passed():
    """``none`` folds like a constant: the default and an explicit none share an
    instance, which reduces every axis; an int axis makes another instance."""
    check("""
    func sum_sq(x, axis=none) { return reduce_sum(x * x, axis=axis); }
    kernel k(input x: f32[A, B], output y: f32, output z: f32, output r: f32[A]) {
        y = sum_sq(x); z = sum_sq(x, axis=none); r = sum_sq(x, 1);
    }""", """
    CHECK:       %y = func.call @sum_sq(%x) : (tensor<?x?xf32>) -> f32
    CHECK-NEXT:  %z = func.call @sum_sq(%x) : (tensor<?x?xf32>) -> f32
    CHECK-NEXT:  %r = func.call @sum_sq.1(%x) : (tensor<?x?xf32>) -> tensor<?xf32>
    CHECK-LABEL: func @sum_sq(%x: tensor<?x?xf32>)
    CHECK:       tensor.reduce_sum {{.*}} {axes = [0, 1]}
    CHECK-LABEL: func @sum_sq.1(%x: tensor<?x?xf32>)
    CHECK:       tensor.reduce_sum {{.*}} {axes = [1]}
    CHECK-NOT:   func @sum_sq.2
    """)
