"""Fuzz finding (issue 17, round 2; seeds 6000043, 3000029, CPU -O3): a dead integer
tensor ``**`` with a negative exponent raised at -O0/-O1 but not at -O3.

The IR pipeline keeps the dead op (it may trap), but -O3 fuses ``cast`` and ``**`` into
a ``fused_elementwise`` whose body the CPU lowering cloned without the exponent check a
stand-alone ``tensor.pow`` gets; the buffer it filled was never read, so LLVM deleted
the loop and nothing was raised. The body's ``arith.pow`` now lowers checked.
"""

from __future__ import annotations

import numpy as np
import pytest

import wiadsl
from wiadsl.diagnostics import WiaRuntimeError

SRC = """kernel fz(input in0: i32[K, N], input in2: f32[K, N], output out0: f32[K, N]) {
    t2 = cast(in0, i64) ** -2;
    out0 = in2;
}"""

#: Dead powers with a run-time exponent: in a fused chain, and in a fused reduction.
RUNTIME_SRC = "kernel g(input a: i32[N], input s: i32, output y: i32[N]) {{ {dead} y = a; }}"
DEAD = ["t = a ** s + a;", "r = reduce_max((a + 1) ** s);"]

TARGETS = [("interp", {}), ("cpu", {"opt_level": 0}), ("cpu", {"opt_level": 1}),
           ("cpu", {"opt_level": 3})]


@pytest.mark.parametrize(("target", "options"), TARGETS)
def test_dead_negative_power_raises_at_every_level(target: str, options: dict) -> None:
    k = wiadsl.jit(SRC, kernel="fz", target=target, **options)
    x = np.array([[3.0]], np.float32)
    with pytest.raises(WiaRuntimeError, match="negative integer powers"):
        k(np.array([[-1]], np.int32), x)
    with pytest.raises(WiaRuntimeError, match="negative integer powers"):
        k(np.zeros((2, 3), np.int32), np.zeros((2, 3), np.float32))


@pytest.mark.parametrize("dead", DEAD)
@pytest.mark.parametrize(("target", "options"), TARGETS)
def test_dead_fused_power_with_runtime_exponent_raises(target: str, options: dict, dead: str) -> None:
    k = wiadsl.jit(RUNTIME_SRC.format(dead=dead), kernel="g", target=target, **options)
    a = np.arange(-2, 3, dtype=np.int32)
    np.testing.assert_array_equal(k(a, np.int32(2)), a)
    with pytest.raises(WiaRuntimeError, match="negative integer powers"):
        k(a, np.int32(-1))
