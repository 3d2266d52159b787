"""Run examples/cnn.wia (the seed's forward_pass: conv/bn/relu/pool x2, fc, softmax).

Usage: python examples/cnn.py [target]"""

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


def conv2d(x, w, padding):
    """NCHW x OIHW cross-correlation, stride 1, zero padding."""
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    kh, kw = w.shape[2:]
    win = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(2, 3))
    return np.einsum("nchwij,ocij->nohw", win, w)


def batch_norm(x, mean, var, gamma, beta, eps=1e-5):
    c = (-1, 1, 1)
    return (x - mean.reshape(c)) / np.sqrt(var.reshape(c) + eps) * gamma.reshape(c) + beta.reshape(
        c
    )


def max_pool2(x):
    n, c, h, w = x.shape
    return x.reshape(n, c, h // 2, 2, w // 2, 2).max(axis=(3, 5))


def softmax(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def bn_params(c):
    return (
        rng.standard_normal(c).astype(np.float32) * 0.1,  # running mean
        rng.uniform(0.5, 1.5, c).astype(np.float32),  # running var
        rng.uniform(0.8, 1.2, c).astype(np.float32),  # gamma
        rng.standard_normal(c).astype(np.float32) * 0.1,
    )  # beta


x = rng.standard_normal((1, 3, 16, 16)).astype(np.float32)
w1 = (rng.standard_normal((8, 3, 3, 3)) * 0.3).astype(np.float32)
bn1 = bn_params(8)
w2 = (rng.standard_normal((16, 8, 3, 3)) * 0.2).astype(np.float32)
bn2 = bn_params(16)
fc = (rng.standard_normal((1024, 10)) * 0.05).astype(np.float32)

h = np.maximum(batch_norm(conv2d(x, w1, 1), *bn1), 0)
h = max_pool2(h)
h = np.maximum(batch_norm(conv2d(h, w2, 1), *bn2), 0)
want = softmax(h.reshape(1, -1) @ fc)

y = mod.forward_pass(x, w1, *bn1, w2, *bn2, fc)
assert y.dtype == np.float32 and y.shape == (1, 10)
np.testing.assert_allclose(y, want, **F32)
np.testing.assert_allclose(y.sum(), 1.0, rtol=1e-5)
print("cnn OK")
