"""Fuzz finding (seed 6000000002171): ``cast(cast(t, f64), i8)`` of an i32 ``t`` outside
i8's range gave the wrapped value after -O1 and on every optimized target, the
saturated one unoptimized. Canonicalization folded the pair into one i32 -> i8 cast,
which wraps, where LANGUAGE.md's float -> int cast saturates. Reduced reproducer:

    kernel fz(input in0: f64[1], output out1: i64) {
        t1 = cast(9223372036854775807, i64);
        t2 = quantize(in0, 2.0, 127) @ cast(quantize(in0, 0.25, 10), i32);
        t3 = cast(t2, f64);
        t1 -= cast(t3, i8);
        out1 = t1;
    }
"""

import numpy as np
import pytest

import wiadsl

SRC = """
kernel through_f64(input x: i32[N], output y: i8[N]) { y = cast(cast(x, f64), i8); }
kernel through_f32(input x: i8[N], output y: i32[N]) { y = cast(cast(x, f32), i32); }
"""
X = np.array([300, -300, 127, -128, 5, -5, 2**31 - 1, -2**31, 0], np.int32)


@pytest.mark.parametrize("target", ["interp", "cpu"])
def test_an_integer_through_a_float_saturates(target):
    mod = wiadsl.jit(SRC, target=target)
    np.testing.assert_array_equal(mod.through_f64(X), np.clip(X, -128, 127).astype(np.int8))
    small = np.arange(-128, 128, dtype=np.int8)
    np.testing.assert_array_equal(mod.through_f32(small), small.astype(np.int32))
