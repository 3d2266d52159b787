"""Run examples/layernorm_softmax.wia (nn.layer_norm + nn.softmax / log_softmax).

Usage: python examples/layernorm_softmax.py [target]"""

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


def layer_norm(x, g, b, eps):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


def log_softmax(z):
    s = z - z.max(axis=-1, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=-1, keepdims=True))


T, D = 5, 24
X = (rng.standard_normal((T, D)) * 3 + 1).astype(np.float32)
g = rng.uniform(0.5, 2.0, D).astype(np.float32)
b = rng.standard_normal(D).astype(np.float32)

Y = mod.ln_softmax(X, g, b)
assert Y.dtype == np.float32 and Y.shape == (T, D)
np.testing.assert_allclose(Y, np.exp(log_softmax(layer_norm(X, g, b, 1e-5))), **F32)

Y, P = mod.ln_log_softmax(X, g, b)
want = log_softmax(layer_norm(X, g, b, 1e-3))
np.testing.assert_allclose(Y, want, **F32)
np.testing.assert_allclose(P, np.exp(want), **F32)
np.testing.assert_allclose(P.sum(axis=-1), 1.0, rtol=1e-5)
print("layernorm_softmax OK")
