"""IR-text tests: canonicalize, cse, dce, simplify-cfg, sccp, licm, inline."""

from __future__ import annotations

from .helpers import check

F = "tensor<4xf32>"


def test_canonicalize_identities_and_folding() -> None:
    check(f"""func @f(%x: {F}, %i: i64) -> ({F}, i64) {{
^entry:
  %one = arith.constant 1.0 : f32
  %m = tensor.mul %x, %one : ({F}, f32) -> {F}
  %n = tensor.neg %m : {F}
  %nn = tensor.neg %n : {F}
  %d = arith.sub %i, %i : i64
  %c2 = arith.constant 2 : i64
  %c3 = arith.constant 3 : i64
  %s = arith.add %c2, %c3 : i64
  %r = arith.add %d, %s : i64
  return %nn, %r : {F}, i64
}}""", "canonicalize", """
CHECK: ^entry:
CHECK-NEXT: %[[C:.*]] = arith.constant 5 : i64
CHECK-NOT: tensor.mul
CHECK-NOT: tensor.neg
CHECK: return %x, {{%\\w+}} : tensor<4xf32>, i64""".replace("%[[C:.*]]", "{{%\\w+}}"))


def test_canonicalize_keeps_float_plus_zero() -> None:
    # x + 0.0 is not x for x = -0.0: exactness wins.
    check("""func @f(%x: f32) -> f32 {
^entry:
  %z = arith.constant 0.0 : f32
  %a = arith.add %x, %z : f32
  return %a : f32
}""", "canonicalize", "CHECK: arith.add %x")


def test_transpose_chain_and_reshape_chain() -> None:
    check("""func @f(%x: tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<4x6xf32>) {
^entry:
  %t = tensor.transpose %x {perm = [2, 0, 1]} : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
  %u = tensor.transpose %t {perm = [1, 2, 0]} : tensor<4x2x3xf32> -> tensor<2x3x4xf32>
  %r = tensor.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %s = tensor.reshape %r : tensor<6x4xf32> -> tensor<4x6xf32>
  return %u, %s : tensor<2x3x4xf32>, tensor<4x6xf32>
}""", "canonicalize", """
CHECK-NOT: transpose
CHECK: %s = tensor.reshape %x : tensor<2x3x4xf32> -> tensor<4x6xf32>
CHECK-NEXT: return %x, %s""")


def test_cast_chain_and_scalar_broadcast() -> None:
    check("""func @f(%x: tensor<3xf32>, %s: f32) -> (tensor<3xf32>, tensor<3xf32>) {
^entry:
  %a = tensor.cast %x : tensor<3xf32> -> tensor<3xf64>
  %b = tensor.cast %a : tensor<3xf64> -> tensor<3xf32>
  %c = arith.constant 3 : index
  %bs = tensor.broadcast_to %s, %c : (f32, index) -> tensor<?xf32>
  %y = tensor.add %x, %bs : (tensor<3xf32>, tensor<?xf32>) -> tensor<3xf32>
  return %b, %y : tensor<3xf32>, tensor<3xf32>
}""", "canonicalize", """
CHECK-NOT: tensor.cast
CHECK: %y = tensor.add %x, %s : (tensor<3xf32>, f32) -> tensor<3xf32>
CHECK: return %x, %y""")


def test_cast_chain_keeps_a_saturating_float_to_int_cast() -> None:
    """i32 -> f64 is exact, but f64 -> i8 saturates where i32 -> i8 would wrap
    (cast(cast(300, f64), i8) is 127): that pair stays two casts. An integer type
    that holds every i32 (i64) takes one cast, as does an i8 source into i32
    (found by the fuzzer, seed 6000000002171)."""
    check("""func @f(%x: i32, %y: i8) -> (i8, i64, i32) {
^entry:
  %a = arith.cast %x : i32 -> f64
  %b = arith.cast %a : f64 -> i8
  %c = arith.cast %a : f64 -> i64
  %d = arith.cast %y : i8 -> f32
  %e = arith.cast %d : f32 -> i32
  return %b, %c, %e : i8, i64, i32
}""", "canonicalize", """
CHECK: %a = arith.cast %x : i32 -> f64
CHECK-NEXT: %b = arith.cast %a : f64 -> i8
CHECK-NEXT: {{%\\w+}} = arith.cast %x : i32 -> i64
CHECK-NEXT: {{%\\w+}} = arith.cast %y : i8 -> i32""")


def test_cse_respects_attributes_and_dominance() -> None:
    check("""func @f(%x: tensor<2x3xf32>, %c: i1) -> tensor<2xf32> {
^entry:
  %a = tensor.reduce_sum %x {axes = [1]} : tensor<2x3xf32> -> tensor<2xf32>
  %b = tensor.reduce_sum %x {axes = [1]} : tensor<2x3xf32> -> tensor<2xf32>
  %k = tensor.reduce_max %x {axes = [1]} : tensor<2x3xf32> -> tensor<2xf32>
  cond_br %c, ^l, ^r
^l:
  %p = tensor.add %a, %k : tensor<2xf32>
  br ^j(%p : tensor<2xf32>)
^r:
  %q = tensor.add %a, %k : tensor<2xf32>
  br ^j(%q : tensor<2xf32>)
^j(%o: tensor<2xf32>):
  %z = tensor.add %b, %o : tensor<2xf32>
  return %z : tensor<2xf32>
}""", "cse", """
CHECK: %a = tensor.reduce_sum
CHECK-NOT: %b = tensor.reduce_sum
CHECK: %k = tensor.reduce_max
CHECK: %p = tensor.add %a, %k
CHECK: %q = tensor.add %a, %k
CHECK: %z = tensor.add %a, %o""")


def test_dce_unreachable_and_block_args() -> None:
    check("""func @f(%x: f32) -> f32 {
^entry:
  %dead = arith.exp %x : f32
  br ^a(%x, %x : f32, f32)
^a(%u: f32, %unused: f32):
  return %u : f32
^island:
  br ^a(%x, %x : f32, f32)
}""", "dce", """
CHECK-NOT: arith.exp
CHECK: br ^a(%x : f32)
CHECK: ^a(%u: f32):
CHECK-NOT: ^island""")


def test_simplify_cfg_merges_and_bypasses() -> None:
    check("""func @f(%x: f32, %c: i1) -> f32 {
^entry:
  cond_br %c, ^fwd, ^b
^fwd:
  br ^j(%x : f32)
^b:
  %y = arith.neg %x : f32
  br ^j(%y : f32)
^j(%v: f32):
  br ^tail
^tail:
  %r = arith.exp %v : f32
  return %r : f32
}""", "simplify-cfg", """
CHECK: cond_br %c, ^j(%x : f32), ^b
CHECK: ^j(%v: f32):
CHECK-NEXT: %r = arith.exp %v
CHECK-NOT: ^tail""")


def test_sccp_through_block_arguments() -> None:
    check("""func @f(%x: f32) -> f32 {
^entry:
  %c1 = arith.constant 1 : i64
  br ^h(%c1 : i64)
^h(%i: i64):
  %k = arith.constant 1 : i64
  %t = arith.cmpi eq, %i, %k : i64
  cond_br %t, ^yes, ^no
^yes:
  return %x : f32
^no:
  %n = arith.neg %x : f32
  return %n : f32
}""", "sccp", """
CHECK: br ^h
CHECK: ^h(%i: i64):
CHECK: br ^yes
CHECK-NOT: ^no""")


def test_licm_hoists_invariants_only() -> None:
    check("""func @f(%n: i64, %a: f32) -> f32 {
^entry:
  %z = arith.constant 0 : i64
  %zf = arith.constant 0.0 : f32
  br ^h(%z, %zf : i64, f32)
^h(%i: i64, %acc: f32):
  %c = arith.cmpi slt, %i, %n : i64
  cond_br %c, ^body, ^exit
^body:
  %inv = arith.exp %a : f32
  %acc2 = arith.add %acc, %inv : f32
  %one = arith.constant 1 : i64
  %i2 = arith.add %i, %one : i64
  br ^h(%i2, %acc2 : i64, f32)
^exit:
  return %acc : f32
}""", "licm", """
CHECK: ^entry:
CHECK: %inv = arith.exp %a
CHECK: %one = arith.constant 1
CHECK: br ^h
CHECK: ^body:
CHECK-NOT: arith.exp
CHECK: %acc2 = arith.add %acc, %inv""")


def test_inline_multi_block_callee_and_removal() -> None:
    out = check("""func @main(%x: f32) -> f32 attributes {kernel} {
^entry:
  %y = func.call @absf(%x) : (f32) -> f32
  %z = arith.exp %y : f32
  return %z : f32
}

func @absf(%v: f32) -> f32 {
^entry:
  %zero = arith.constant 0.0 : f32
  %c = arith.cmpf olt, %v, %zero : f32
  cond_br %c, ^neg, ^pos(%v : f32)
^neg:
  %n = arith.neg %v : f32
  br ^pos(%n : f32)
^pos(%r: f32):
  return %r : f32
}""", "inline", """
CHECK: func @main
CHECK: cond_br %c, ^neg, ^pos(%x : f32)
CHECK: ^neg:
CHECK-NEXT: %n = arith.neg %x
CHECK: ^pos(%r: f32):
CHECK-NEXT: br ^{{\\w+}}(%r : f32)
CHECK: arith.exp
CHECK-NOT: func @absf""")
    assert "func.call" not in out


def test_dce_keeps_unused_ops_that_may_fail() -> None:
    # A run-time error is part of the program's meaning: -O0 and -O3 must fail alike.
    # Static shapes and constant indices decide the checks at compile time instead.
    check("""func @f(%x: tensor<?x?xf32>, %s: tensor<3x4xf32>, %i: i64, %k: i64) -> f32 {
^entry:
  %c1 = arith.constant 1 : i64
  %c9 = arith.constant 9 : i64
  %empty_max = tensor.reduce_max %x {axes = [1]} : tensor<?x?xf32> -> tensor<?xf32>
  %empty_sum = tensor.reduce_sum %x {axes = [1]} : tensor<?x?xf32> -> tensor<?xf32>
  %static_max = tensor.reduce_max %s {axes = [1]} : tensor<3x4xf32> -> tensor<3xf32>
  %dyn_index = tensor.extract %s, %i, %i : (tensor<3x4xf32>, i64, i64) -> f32
  %in_range = tensor.extract %s, %c1, %c1 : (tensor<3x4xf32>, i64, i64) -> f32
  %out_of_range = tensor.extract %s, %c9, %c1 : (tensor<3x4xf32>, i64, i64) -> f32
  %neg_pow = arith.pow %k, %k : i64
  %pos_pow = arith.pow %k, %c1 : i64
  %r = tensor.extract %s, %c1, %c1 : (tensor<3x4xf32>, i64, i64) -> f32
  return %r : f32
}""", "dce", """
CHECK: %empty_max = tensor.reduce_max
CHECK-NOT: reduce_sum
CHECK-NOT: %static_max
CHECK: %dyn_index = tensor.extract
CHECK-NOT: %in_range
CHECK: %out_of_range = tensor.extract
CHECK: %neg_pow = arith.pow
CHECK-NOT: %pos_pow
CHECK: return""")
