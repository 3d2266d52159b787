"""Fuzz finding (seed 12): an f64 -> f16 cast killed the process on the CPU backend.

``fptrunc double to half`` becomes a call to ``__truncdfhf2``, which the JIT could
not resolve: the call jumped to address 0 (SIGSEGV). Reduced reproducer:

    kernel fz(input in0: f16[M, 3], input in1: f16, output out0: f16[M, 3]) {
        t6 = [1.25, 2.0, 2.0] @ [1.25, 2.0, 2.0];
        t7 = max(in0, t6);
        out0 = in0;
    }

The fix rounds f64 -> f32 to odd, then f32 -> f16: no library call, and no double
rounding (the values below include halfway cases that a plain f64 -> f32 -> f16
chain would get wrong).
"""

import numpy as np
import pytest

import wiadsl
from wiadsl.fuzz.worker import run_forked

pytest.importorskip("llvmlite")

VALUES = np.array([1.5, -2.0, 70000.0, -1e300, 1e-300, np.nan, np.inf, -np.inf, 0.0, -0.0,
                   1 + 2.0**-11 + 2.0**-40, 1 + 2.0**-11, -(1 + 3 * 2.0**-11 - 2.0**-40),
                   65519.99, 65520.0, 2.0**-25 + 2.0**-60, 6.1e-5, 0.1], dtype=np.float64)

REPRODUCER = """
kernel fz(input in0: f16[M, 3], output out0: f16[M, 3]) {
    t6 = [1.25, 2.0, 2.0] @ [1.25, 2.0, 2.0];
    t7 = max(in0, t6);
    out0 = in0;
}
"""


def _cast(level: int) -> np.ndarray:
    src = "kernel k(input x: f64[N], output y: f16[N]) { y = cast(x, f16); }"
    return wiadsl.jit(src, kernel="k", target="cpu", opt_level=level)(VALUES)


@pytest.mark.parametrize("level", [0, 3])
def test_f64_to_f16_cast_is_correctly_rounded(level: int) -> None:
    died, got = run_forked(lambda: _cast(level))
    assert not died, "casting f64 to f16 killed the process"
    with np.errstate(over="ignore"):
        want = VALUES.astype(np.float16)
    np.testing.assert_array_equal(got, want)  # bit-exact, NaN == NaN


def test_reduced_reproducer_runs() -> None:
    x = np.arange(15, dtype=np.float16).reshape(5, 3)

    def run() -> np.ndarray:
        return wiadsl.jit(REPRODUCER, kernel="fz", target="cpu", opt_level=0)(x)

    died, got = run_forked(run)
    assert not died
    np.testing.assert_array_equal(got, x)
