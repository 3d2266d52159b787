"""Run examples/block.wia (LANGUAGE.md §1's second program) on both branches of its if.

Usage: python examples/block.py [target]"""

import math
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


def gelu(h):
    return 0.5 * h * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * h**3)))


def reference(X, W, g, b):
    h = X @ W * g + b
    if np.max(np.abs(h)) > 100.0:
        h = h / np.max(np.abs(h))
    return gelu(h)


T, D = 7, 16
W = (rng.standard_normal((D, D)) / 4).astype(np.float32)
g = rng.uniform(0.5, 1.5, D).astype(np.float32)
b = (rng.standard_normal(D) * 0.1).astype(np.float32)
for amplitude in (1.0, 1000.0):  # small activations: no rescale; large: rescaled
    X = (rng.standard_normal((T, D)) * amplitude).astype(np.float32)
    Y = mod.block(X, W, g, b)
    assert Y.dtype == np.float32 and Y.shape == (T, D)
    np.testing.assert_allclose(Y, reference(X, W, g, b), **F32)
print("block OK")
