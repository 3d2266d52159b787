"""Fuzz finding (ptxsim): an integer to a negative power with constant operands, in a loop
run zero times or a branch not taken, raised WiaRuntimeError on ptxsim although it never
runs (the interpreter and the CPU backend return). The PTX planner folded host-scalar ops
with literal operands at plan time (``op.evaluate``), so the op's error was raised while
planning, whatever path the run takes. A fold that fails is now a 'scalar' step in the op's
own plan block: the error happens exactly when the op runs (loop run once, branch taken)."""

import numpy as np
import pytest

import wiadsl
from wiadsl.diagnostics import WiaRuntimeError

LOOP = """kernel fz(input in0: f32, input in1: i8, output out0: f32) {
    for ix1 in range(N) {
        cv2 = 3037000500 ** -1;
    }
    out0 = in0;
}"""

BRANCH = """kernel fz(input in0: i32[3], input in1: i64, input in2: f32[1, 41], input in3: f32[41, 63], output out0: f32[41, 63]) {
    if reduce_min(in2) >= 2.0 {
        t6 = 9223372036854775807 ** -1;
    } else {}
    out0 = in3;
}"""

TARGETS = ("interp", "ptxsim")
MESSAGE = "integers to negative integer powers are not allowed"


def test_loop_run_zero_times_does_not_trap() -> None:
    src = LOOP.replace("range(N)", "range(0)")
    for target in TARGETS:
        got = wiadsl.jit(src, kernel="fz", target=target)(np.float32(1.5), np.int8(3))
        np.testing.assert_array_equal(np.asarray(got), np.float32(1.5))


@pytest.mark.parametrize("n", [1, 3])
def test_loop_that_runs_traps(n: int) -> None:
    src = LOOP.replace("range(N)", f"range({n})")
    for target in TARGETS:
        with pytest.raises(WiaRuntimeError, match=MESSAGE):
            wiadsl.jit(src, kernel="fz", target=target)(np.float32(1.5), np.int8(3))


def _branch_args(in2: float) -> tuple[np.ndarray, ...]:
    in3 = np.arange(41 * 63, dtype=np.float32).reshape(41, 63)
    return (np.arange(3, dtype=np.int32), np.int64(7), np.full((1, 41), in2, np.float32), in3)


def test_branch_not_taken_does_not_trap_and_taken_does() -> None:
    for target in TARGETS:
        k = wiadsl.jit(BRANCH, kernel="fz", target=target)
        args = _branch_args(1.5)
        np.testing.assert_array_equal(k(*args), args[3])
        with pytest.raises(WiaRuntimeError, match=MESSAGE):
            k(*_branch_args(2.0))
        np.testing.assert_array_equal(k(*args), args[3])  # the same kernel still runs
