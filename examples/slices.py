"""Run examples/slices.wia (slice updates in loops, steps, negative indices).

Usage: python examples/slices.py [target]"""

import pathlib
import sys

import numpy as np

PATH = pathlib.Path(__file__).resolve().with_suffix(".wia")
sys.path.insert(0, str(PATH.parent.parent))  # run from a source checkout too
import wiadsl  # noqa: E402

TARGET = {"target": sys.argv[1]} if len(sys.argv) > 1 else {}  # default: the default target
mod = wiadsl.jit(PATH.read_text(), filename=str(PATH), **TARGET)
rng = np.random.default_rng(0)
F32 = {"rtol": 1e-4, "atol": 1e-5}

M, N = 7, 5
A = rng.standard_normal((M, N)).astype(np.float32)
s = rng.standard_normal(M).astype(np.float32)

np.testing.assert_array_equal(mod.row_scale(A, s), A * s[:, None])
np.testing.assert_allclose(mod.cumsum_rows(A), np.cumsum(A, axis=0), **F32)
want = A.copy()
want[::2] = -A[::2]
np.testing.assert_array_equal(mod.every_other(A), want)

B = rng.standard_normal((6, 8)).astype(np.float32)
E, L, U, R, c = mod.views(B)
np.testing.assert_array_equal(E, B[::2, :])
np.testing.assert_array_equal(L, B[-1, :] - B[0, :])
u = B.copy()
u[1:-1:2, 0] = 0.0
u[:, -1] = B[:, 0]
u[0:2, 2:4] = B[4:6, 5:7]
np.testing.assert_array_equal(U, u)
np.testing.assert_array_equal(R, B[::-1, ::-1])
assert np.asarray(c).dtype == np.float32 and np.asarray(c) == B[-2, -3]
print("slices OK")
