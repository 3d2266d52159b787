"""Fuzz finding (seed 1000029, systolic): a value also used by an unused broadcasting
op comes back with the broadcast shape.

``t3 = in1 * t2`` (shape [1, M, 3], never used) makes the systolic backend's run of
``out0 = t2 + 0.5`` produce a [1, M, 3] array: "'tensor.add' produced
float16[1, 4, 3], which does not match its type tensor<?x3xf16>". The interpreter,
the pipeline pass by pass and the CPU backend all give [M, 3].
"""

import numpy as np

import wiadsl

REPRODUCER = """
kernel fz(input in0: f16[M, 3], input in1: f16[1, M, 3], output out0: f16[M, 3]) {
    t2 = abs(in0);
    t3 = in1 * t2;
    out0 = t2 + 0.5;
}
"""


def _inputs() -> tuple[np.ndarray, np.ndarray]:
    x = np.linspace(-2, 2, 12).astype(np.float16).reshape(4, 3)
    return x, np.ones((1, 4, 3), np.float16)


def test_interpreter_and_cpu_agree() -> None:
    x, y = _inputs()
    want = np.abs(x) + np.float16(0.5)
    np.testing.assert_array_equal(wiadsl.jit(REPRODUCER, kernel="fz")(x, y), want)


def test_systolic_matches_the_interpreter() -> None:
    x, y = _inputs()
    got = wiadsl.jit(REPRODUCER, kernel="fz", target="systolic")(x, y)
    np.testing.assert_array_equal(got, np.abs(x) + np.float16(0.5))
