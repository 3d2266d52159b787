"""Run examples/power_iteration.wia (a for loop with a loop-carried vector).

Usage: python examples/power_iteration.py [target]"""

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

N, ITERS = 8, 100
# a symmetric matrix with known, well-separated eigenvalues (dominant: 10)
Qm, _ = np.linalg.qr(rng.standard_normal((N, N)))
eig = np.array([10.0, 4.0, 3.0, 2.0, 1.0, -1.0, -2.0, 0.5])
A = (Qm @ np.diag(eig) @ Qm.T).astype(np.float32)
v0 = rng.standard_normal(N).astype(np.float32)

# the same iteration in NumPy, in f32
x = v0 / np.sqrt(np.sum(v0 * v0))
for _ in range(ITERS):
    x = A @ x
    x = x / np.sqrt(np.sum(x * x))
lam_ref = x @ (A @ x)

lam, v = mod.power_iteration(A, v0)
lam = np.asarray(lam)
assert lam.shape == () and lam.dtype == np.float32
assert v.dtype == np.float32 and v.shape == (N,)
np.testing.assert_allclose(lam, lam_ref, **F32)
np.testing.assert_allclose(v, x, **F32)
np.testing.assert_allclose(lam, 10.0, rtol=1e-4)  # the true dominant eigenvalue
np.testing.assert_allclose(A @ v, lam * v, rtol=1e-3, atol=1e-4)
print("power_iteration OK")
