"""Issue 17, item 8: a flat 5,000-term chain was refused as "nesting too deep", and
once accepted, every stage that recursed once per operand (checker, lowering, the
loop level's fused expressions) overflowed Python's stack. It now compiles and runs.
"""

import numpy as np
import pytest

import wiadsl

TERMS = 5000
SOURCE = ("kernel k(input a: f32[N], output y: f32[N]) {\n    y = "
          + " + ".join(["a", "a * 0.5"] * (TERMS // 2)) + ";\n}\n")


@pytest.mark.parametrize("target, options", [("interp", {}), ("cpu", {"opt_level": 0})])
def test_a_5000_term_chain_runs(target: str, options: dict) -> None:
    a = np.array([0.0, 1.0, -2.0, 0.25], dtype=np.float32)
    y = wiadsl.jit(SOURCE, kernel="k", target=target, **options)(a)
    np.testing.assert_allclose(y, a * 1.5 * (TERMS // 2), rtol=1e-4)
