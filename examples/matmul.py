"""Run examples/matmul.wia (C = A @ B, symbolic dims) and check it against NumPy.

Usage: python examples/matmul.py [target]"""

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

for m, k, n in [(4, 3, 5), (17, 33, 9), (1, 1, 1)]:
    A = rng.standard_normal((m, k)).astype(np.float32)
    B = rng.standard_normal((k, n)).astype(np.float32)
    C = mod.matmul(A, B)
    assert C.dtype == np.float32 and C.shape == (m, n)
    np.testing.assert_allclose(C, A @ B, **F32)

# the same kernel writing into a preallocated output (LANGUAGE.md §8)
A = rng.standard_normal((8, 6)).astype(np.float32)
B = rng.standard_normal((6, 7)).astype(np.float32)
buf = np.empty((8, 7), np.float32)
mod.matmul(A, B, C=buf)
np.testing.assert_allclose(buf, A @ B, **F32)
print("matmul OK")
