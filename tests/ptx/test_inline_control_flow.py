"""Functions with control flow (``if``, loops) are inlined into PTX kernels.

The planner sees the inlined kernel's blocks like any other control flow; two
inlined copies of one function have blocks with the same hints (``then``,
``else``), which the plan must keep apart. The reference interpreter is the oracle.
"""

from __future__ import annotations

import numpy as np
import pytest

from .helpers import jit_kernel

pytest.importorskip("wiadsl.backends.ptx.sim")

SOURCE = """
func clamp_or_shift(x, limit) {
    if reduce_sum(x) > limit { return x - limit; } else { return x + 1.0; }
}
func halve_and_add(x, n) {
    acc = x;
    for i in range(n) { acc = acc * 0.5 + x; }
    return acc;
}
kernel k(input x: f32[N], input n: i64, output y: f32[N], output z: f32[N]) {
    y = clamp_or_shift(x, 2.0);
    z = halve_and_add(y, n) + clamp_or_shift(y, 0.0);
}
"""


@pytest.mark.parametrize("size", [0, 1, 7, 33, 129])
@pytest.mark.parametrize("trips", [0, 1, 3])
def test_multi_block_functions_match_interpreter(size: int, trips: int) -> None:
    x = np.random.default_rng(size).standard_normal(size).astype(np.float32)
    want = jit_kernel(SOURCE, "k", "interp")(x, np.int64(trips))
    got = jit_kernel(SOURCE, "k", "ptxsim")(x, np.int64(trips))
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_both_branches_of_each_inlined_copy_run() -> None:
    # sum 3 > 2 takes `then` in the first copy; y = x - 2 sums to -3 < 0: `else` in the second
    x = np.ones(3, np.float32)
    y, z = jit_kernel(SOURCE, "k", "ptxsim")(x, np.int64(0))
    np.testing.assert_array_equal(y, x - 2)
    np.testing.assert_array_equal(z, (x - 2) + (x - 2 + 1))
