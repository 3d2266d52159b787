"""Hardening (issue 11): dynamic bounds, shape-product overflow, huge allocations.

Findings while checking what the backends do:
- dynamic index / slice-update bounds: checked by the interpreter and in native code
  (``loop.check`` -> error code -> WiaRuntimeError); dynamic slices clamp as NumPy's.
- the interpreter let NumPy's ``MemoryError`` escape for an allocation bigger than
  memory (fixed: it is a WiaRuntimeError naming the op).
- the CPU backend did not check the byte count of ``wia.alloc`` for overflow nor the
  pointer ``aligned_alloc`` returns, so a huge or overflowing shape killed the
  process (fixed: the byte count is computed with overflow checks and compared with
  the machine's memory before allocating; a null pointer is an error code).
"""

import numpy as np
import pytest

import wiadsl
from wiadsl.fuzz.worker import run_forked

HUGE = ("kernel k(input x: f32[N], output y: f32[100000, 100000, N]) "
        "{ y = broadcast_to(x, [100000, 100000, N]) * 2.0; }")
#: every extent static: the byte count is the compiler's, the check still the kernel's
HUGE_STATIC = ("kernel k(input x: f32[3], output y: f32[100000, 100000, 3]) "
               "{ y = broadcast_to(x, [100000, 100000, 3]) * 2.0; }")
OVERFLOW = ("kernel k(input x: f32[N], output y: f32[4611686018427387904, 4, N]) "
            "{ y = broadcast_to(x, [4611686018427387904, 4, N]) * 2.0; }")


def _outcome(src: str, target: str, *args: object) -> str:
    def go() -> str:
        try:
            wiadsl.jit(src, kernel="k", target=target)(*args)
        except wiadsl.WiaError as err:
            return type(err).__name__
        except Exception as exc:  # noqa: BLE001
            return f"{type(exc).__name__} (not a WiaError)"
        return "returned"
    died, value = run_forked(go)
    return "the process died" if died else str(value)


@pytest.mark.parametrize("target", ["interp", "cpu"])
def test_dynamic_index_out_of_range_is_a_runtime_error(target: str) -> None:
    src = "kernel k(input x: f32[4], input i: i64, output y: f32) { y = x[i]; }"
    fn = wiadsl.jit(src, kernel="k", target=target)
    assert fn(np.ones(4, np.float32), 3) == 1.0
    for bad in (4, -5, 2**40):
        with pytest.raises(wiadsl.WiaRuntimeError, match="out of range"):
            fn(np.ones(4, np.float32), bad)


@pytest.mark.parametrize("target", ["interp", "cpu"])
def test_dynamic_slice_update_index_is_checked(target: str) -> None:
    src = "kernel k(input x: f32[4], input i: i64, output y: f32[4]) { y = x; y[i] = 2.0; }"
    fn = wiadsl.jit(src, kernel="k", target=target)
    with pytest.raises(wiadsl.WiaRuntimeError, match="out of range"):
        fn(np.ones(4, np.float32), -9)


def test_interpreter_refuses_a_huge_allocation_with_a_wia_error() -> None:
    assert _outcome(HUGE, "interp", np.ones(3, np.float32)) == "WiaRuntimeError"


def test_interpreter_refuses_an_overflowing_shape() -> None:
    assert _outcome(OVERFLOW, "interp", np.ones(3, np.float32)) == "WiaRuntimeError"


@pytest.mark.parametrize("src", [HUGE, HUGE_STATIC, OVERFLOW], ids=["huge", "huge_static", "overflow"])
def test_cpu_refuses_huge_allocations_with_a_wia_error(src: str) -> None:
    assert _outcome(src, "cpu", np.ones(3, np.float32)) == "WiaRuntimeError"


def test_cpu_refuses_a_static_huge_allocation_before_allocating() -> None:
    """All extents static: the compiler folds the byte count, the kernel still refuses
    it before calling the allocator (not as a failed allocation)."""
    fn = wiadsl.jit(HUGE_STATIC, kernel="k", target="cpu")
    with pytest.raises(wiadsl.WiaRuntimeError, match="exceeds this machine's memory"):
        fn(np.ones(3, np.float32))
