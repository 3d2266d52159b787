"""Fuzz seed 42000000001034: ``x < t`` with ``t`` a constant that rounds to -inf in
f16 (``-1e10``) and ``x`` of a dynamic shape crashed the canonicalizer
("'NoneType' object cannot be interpreted as an integer"): ``InfCompare`` made an
all-false constant of the result's shape, which has a ``?`` extent. It now leaves
dynamic shapes alone; a static one still folds to a constant."""

from __future__ import annotations

import numpy as np
import pytest

import wiadsl
from wiadsl.passes import optimize

SRC = """
kernel fz(input in0: f64[3], input in1: f16[1, M, 3], output out0: f32[1, 3]) {
    t2 = -10000000000.0;
    out0 = min(reduce_min(where(in1 < t2, in1, t2), axis=1), cast(in0, bf16));
}
kernel static(input x: f16[2, 3], output y: bool[2, 3]) { y = x < -10000000000.0; }
"""


@pytest.mark.parametrize("target", ["interp", "cpu", "ptxsim"])
def test_compare_with_minus_inf_of_a_dynamic_shape(target: str) -> None:
    k = wiadsl.jit(SRC, kernel="fz", target=target)
    for m in (1, 4):
        got = k(np.array([1.0, 2.0, 3.0]), np.ones((1, m, 3), np.float16))
        np.testing.assert_array_equal(got, np.full((1, 3), -np.inf, np.float32))


def test_static_shapes_still_fold() -> None:
    text = str(optimize(wiadsl.jit(SRC, kernel="static").ir_for(), 2))
    assert "cmpf" not in text and "tensor.constant" in text
