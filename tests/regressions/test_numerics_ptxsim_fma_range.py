"""The simulator's ``fma.rn.f64`` rounds once at the ends of the exponent range too.

Found with the exact PTX float remainder (issue 17): ``fmod(DBL_MAX, 5.5)`` came out
2 instead of 3 in the simulator, because its Dekker product split overflowed for
products near 2^1023 (and its error term underflows for products below ~2^-916),
while the hardware ``fma`` is exact everywhere.
"""

from fractions import Fraction

import numpy as np

from wiadsl.backends.ptx.sim.fmath import fma_f64


def _exact(a: float, b: float, c: float) -> float:
    v = Fraction(a) * Fraction(b) + Fraction(c)
    try:
        return float(v)
    except OverflowError:
        return float("inf") if v > 0 else float("-inf")


def test_fma_f64_is_exact_near_overflow_and_underflow() -> None:
    rng = np.random.default_rng(1)
    n = 400
    # exponents of a*b in [996, 1020] (near overflow) or [-1000, -930] (error term tiny)
    total = np.where(rng.random(n) < 0.5, rng.integers(996, 1021, n), rng.integers(-1000, -929, n))
    ea = total // 2 + rng.integers(-40, 40, n)
    a = rng.uniform(1, 2, n) * 2.0 ** ea * rng.choice([-1, 1], n)
    b = rng.uniform(1, 2, n) * 2.0 ** (total - ea)
    c = -(a * b) * (1 + rng.standard_normal(n) * 1e-9)  # cancellation: the low bits count
    got = fma_f64(a, b, c)
    want = np.array([_exact(x, y, z) for x, y, z in zip(a, b, c, strict=True)])
    np.testing.assert_array_equal(got, want)


def test_fma_f64_remainder_step_at_dbl_max() -> None:
    # one exact reduction step of fmod(DBL_MAX, 5.5): r - q*y' with y' = 5.5 * 2^972
    r, yp = np.finfo(np.float64).max, 5.5 * 2.0 ** 972
    q = np.trunc(r / yp)
    got = fma_f64(np.array([-q]), np.array([yp]), np.array([r]))[0]
    assert got == _exact(-q, yp, r)
    assert np.signbit(fma_f64(np.array([-0.0]), np.array([1e-300]), np.array([-0.0]))[0])
