"""Run examples/conditional.wia (the seed's conditional_compute) on both branches.

Usage: python examples/conditional.py [target]"""

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


def reference(x, threshold):
    return x * x if np.sum(np.abs(x)) > threshold else x


x = rng.standard_normal((4, 6)).astype(np.float32)
l1 = float(np.sum(np.abs(x)))
for threshold in (np.float32(l1 / 2), np.float32(l1 * 2)):  # compute branch, then skip
    y = mod.conditional_compute(x, threshold)
    assert y.dtype == np.float32 and y.shape == x.shape
    np.testing.assert_allclose(y, reference(x, threshold), **F32)
print("conditional OK")
