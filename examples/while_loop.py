"""Run examples/while_loop.wia (halve x until max |x| < 1, counting the steps).

Usage: python examples/while_loop.py [target]"""

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


def reference(x):
    h, n = x, 0
    while np.max(np.abs(h)) >= 1.0:
        h = h * np.float32(0.5)
        n += 1
    return h, n


for amplitude in (0.1, 1.0, 37.0, 1e6):  # 0.1: the loop body never runs
    x = (rng.standard_normal(11) * amplitude).astype(np.float32)
    y_ref, n_ref = reference(x)
    y, steps = mod.halve_until_small(x)
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y, y_ref)  # halving is exact in binary floats
    assert np.asarray(steps).dtype == np.int64 and int(steps) == n_ref, (steps, n_ref)
print("while_loop OK")
