"""Fuzz seed 41000000002701: ``licm`` hoisted an integer power (it raises for a
negative exponent) out of an ``if`` inside a ``while`` loop into the loop's
preheader, so at -O2/-O3 the kernel raised "integers to negative integer powers
are not allowed" where the branch is not taken and the program raises nothing.

Cause: ``licm.cannot_fail`` took every static-shape elementwise op (and every
``arith`` op) for one that cannot fail; it now asks ``may_trap`` first. The test
runs the reduced program at every -O level and as IR after each pass (the
interpreter), with the branch taken and not taken."""

from __future__ import annotations

import numpy as np
import pytest

import wiadsl
from wiadsl.diagnostics import WiaRuntimeError
from wiadsl.passes import optimize

SRC = """
kernel k(input x: f64[1], input e: i32[3], output y: i32) {
    i = 0;
    t = 0;
    while i < 1 {
        if reduce_max(x) >= 2.0 {
            t = reduce_sum(cast(3, i64) ** e);
        }
        i = i + 1;
    }
    y = cast(t, i32) + 1;
}
"""
NEGATIVE = np.array([1, -2, 0], np.int32)


@pytest.mark.parametrize("level", [0, 1, 2, 3])
def test_untaken_branch_does_not_raise(level: int) -> None:
    k = wiadsl.jit(SRC, kernel="k", target="cpu", opt_level=level)
    assert k(np.array([0.0]), NEGATIVE) == 1
    with pytest.raises(WiaRuntimeError, match="negative integer powers"):
        k(np.array([5.0]), NEGATIVE)
    assert k(np.array([5.0]), np.array([1, 2, 0], np.int32)) == 3 + 9 + 1 + 1


def test_licm_keeps_a_trapping_power_in_its_branch() -> None:
    from wiadsl.ir import Interpreter
    module = optimize(wiadsl.jit(SRC, kernel="k").ir_for(), 3)
    func = next(iter(module))
    out = Interpreter(module).call(func, [np.array([0.0]), NEGATIVE])
    assert int(np.asarray(out[0])) == 1
