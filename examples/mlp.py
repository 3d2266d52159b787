"""Run examples/mlp.wia (nn.mlp with relu; an explicit gelu MLP).

Usage: python examples/mlp.py [target]"""

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


B, IN, H, OUT = 5, 12, 32, 7
x = rng.standard_normal((B, IN)).astype(np.float32)
w1 = (rng.standard_normal((IN, H)) / math.sqrt(IN)).astype(np.float32)
b1 = (rng.standard_normal(H) * 0.1).astype(np.float32)
w2 = (rng.standard_normal((H, OUT)) / math.sqrt(H)).astype(np.float32)
b2 = (rng.standard_normal(OUT) * 0.1).astype(np.float32)

y = mod.mlp_relu(x, w1, b1, w2, b2)
assert y.dtype == np.float32 and y.shape == (B, OUT)
np.testing.assert_allclose(y, np.maximum(x @ w1 + b1, 0) @ w2 + b2, **F32)

y = mod.mlp_gelu(x, w1, b1, w2, b2)
assert y.dtype == np.float32 and y.shape == (B, OUT)
np.testing.assert_allclose(y, gelu(x @ w1 + b1) @ w2 + b2, **F32)
print("mlp OK")
