"""Fuzz finding (seed 9100000000537, ptxsim): ``in0 % (1/3)`` in f64 gave 0 where NumPy
gives ~1/3 for every negative ``in0``. The emitted PTX was right; the simulator ran
``fma.rn.f64`` as ``a * b + c`` (two roundings), so the remainder's sign test saw 0."""

from fractions import Fraction

import numpy as np

import wiadsl
from wiadsl.backends.ptx.sim.fmath import fma_f64

SRC = """kernel fz(input in0: i8[K], output out0: f64[K]) {
    t1 = 1;
    t1 /= t1 + t1 + 1;
    out0 = in0 % t1;
}"""


def test_float_remainder_by_a_third_matches_numpy() -> None:
    x = np.arange(-128, 128, dtype=np.int8)
    got = wiadsl.jit(SRC, kernel="fz", target="ptxsim")(x)
    np.testing.assert_array_equal(got, np.remainder(x.astype(np.float64), 1 / 3))


def test_fma_f64_rounds_once() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(500), rng.standard_normal(500)
    c = -(a * b) * (1 + rng.standard_normal(500) * 1e-12)  # heavy cancellation
    got = fma_f64(a, b, c)
    want = [float(Fraction(x) * Fraction(y) + Fraction(z)) for x, y, z in zip(a, b, c, strict=True)]
    np.testing.assert_array_equal(got, np.array(want))
    assert fma_f64(np.array([384.0]), np.array([1 / 3]), np.array([-128.0]))[0] < 0
    assert np.isnan(fma_f64(np.array([np.inf]), np.array([0.0]), np.array([1.0])))[0]
