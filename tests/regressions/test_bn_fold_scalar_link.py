"""Fuzz finding (seed 11000075, cpu -O3): bn-fold of a product of constants followed by
a scalar shift (``matmul(c, c) - 1.5``) emitted ``tensor.neg`` on a scalar, and the
IR failed verification. A scalar link is now a 1-element vector."""

import numpy as np

import wiadsl

REPRODUCER = """
kernel fz(input x: f32[2], output y: f32[3, 3]) {
    t = full([1, 3], 2, f32);
    y = matmul(transpose(t), t) - 1.5 + x[0];
}
"""


def test_scalar_shift_after_a_constant_product_folds() -> None:
    x = np.array([0.25, 0.0], np.float32)
    want = np.full((3, 3), 4.0 - 1.5 + 0.25, np.float32)
    for level in (0, 3):
        got = wiadsl.jit(REPRODUCER, kernel="fz", target="cpu", opt_level=level)(x)
        np.testing.assert_allclose(got, want)
