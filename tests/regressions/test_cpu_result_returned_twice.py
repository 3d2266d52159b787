"""Fuzz finding (seed 7000217, cpu): two outputs bound to the same buffer (one value,
or two slices that CSE merges) — the second result was copied from memory the first
had already freed, giving garbage."""

import numpy as np
import pytest

import wiadsl

ONE_VALUE = """kernel fz(input in0: f32[3, 4], output out0: f32[1, 4], output out1: f32[1, 4]) {
    t5 = in0[2:3:2, :];
    out0 = t5;
    out1 = t5;
}"""
TWO_SLICES = """kernel fz(input in0: f32[3, 4], output out0: f32[1, 4], output out1: f32[1, 4]) {
    out0 = in0[2:3, :];
    out1 = in0[2:3, :];
}"""
COMPUTED = """kernel fz(input x: f32[N], output a: f32[N], output b: f32[N], output c: f32[N]) {
    t = x * 2.0;
    a = t;
    b = t;
    c = t;
}"""


@pytest.mark.parametrize("src", [ONE_VALUE, TWO_SLICES], ids=["one_value", "two_slices"])
@pytest.mark.parametrize("level", [0, 3])
def test_both_outputs_hold_the_slice(src: str, level: int) -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    fn = wiadsl.jit(src, kernel="fz", target="cpu", opt_level=level)
    for _ in range(2):  # the second call takes the natively copied-out path
        out0, out1 = fn(x)
        np.testing.assert_array_equal(out0, x[2:3])
        np.testing.assert_array_equal(out1, x[2:3])
        out0[0, 0] = -1  # outputs must not share memory
        assert out1[0, 0] == 8


def test_three_outputs_of_one_computed_value() -> None:
    x = np.linspace(-1, 1, 7, dtype=np.float32)
    fn = wiadsl.jit(COMPUTED, kernel="fz", target="cpu")
    for _ in range(2):
        for out in fn(x):
            np.testing.assert_array_equal(out, x * 2)
