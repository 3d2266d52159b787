"""Fuzz finding (issue 17 run, seeds 17000000000116 and ...150; target ``passes``): after
``fuse``, the interpreter computed a cast inside a fused body with NumPy's ``astype``
(300.7 -> i8 wrapped to 44, 9.2e18 -> i32 to 0) while the stand-alone ``arith.cast``
saturates (LANGUAGE.md §3: 127, 2147483647; NaN -> 0). The fused body now runs the
language's cast (``numerics.cast_values``), as ``CastOp.evaluate`` does."""

from __future__ import annotations

import numpy as np

from tests.e2e.numerics import assert_same_bits
from wiadsl.ir import parse_module, run_func, verify

FUSED = """func @k(%x: tensor<?xf64>) -> tensor<?xf64> attributes {kernel, outputs = ["y"], arg_dims = [["N"]]} {
^entry:
  %y = tensor.fused_elementwise %x {kernel = "cast_add_fused"} : tensor<?xf64> {
  ^bb0(%0: f64):
    %1 = arith.cast %0 : f64 -> i8
    %2 = arith.cast %1 : i8 -> f64
    %3 = arith.add %0, %2 : f64
    yield %3 : f64
  }
  return %y : tensor<?xf64>
}"""

UNFUSED = """func @k(%x: tensor<?xf64>) -> tensor<?xf64> attributes {kernel, outputs = ["y"], arg_dims = [["N"]]} {
^entry:
  %1 = tensor.cast %x : tensor<?xf64> -> tensor<?xi8>
  %2 = tensor.cast %1 : tensor<?xi8> -> tensor<?xf64>
  %y = tensor.add %x, %2 : tensor<?xf64>
  return %y : tensor<?xf64>
}"""

X = np.array([300.7, -1e10, np.nan, 5.5, -128.9, 127.9, 1e300, -0.0])


def test_a_cast_in_a_fused_body_saturates_as_the_unfused_cast() -> None:
    fused, unfused = parse_module(FUSED), parse_module(UNFUSED)
    verify(fused)
    verify(unfused)
    want = X + np.array([127, -128, 0, 5, -128, 127, 127, 0], np.float64)
    (got,) = run_func(fused, "k", [X.copy()])
    (ref,) = run_func(unfused, "k", [X.copy()])
    assert_same_bits(np.asarray(ref), want, "unfused")
    assert_same_bits(np.asarray(got), want, "fused")
