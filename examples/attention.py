"""Run examples/attention.wia (nn.attention, an explicit version, a batched one).

Usage: python examples/attention.py [target]"""

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


def attention(q, k, v):
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v


T, S, D, E = 6, 9, 16, 8
Q = rng.standard_normal((T, D)).astype(np.float32)
K = rng.standard_normal((S, D)).astype(np.float32)
V = rng.standard_normal((S, E)).astype(np.float32)
want = attention(Q, K, V)
for name in ("attn", "attn_explicit"):
    out = getattr(mod, name)(Q, K, V)
    assert out.dtype == np.float32 and out.shape == (T, E), name
    np.testing.assert_allclose(out, want, **F32, err_msg=name)

Qb = rng.standard_normal((3, T, D)).astype(np.float32)
Kb = rng.standard_normal((3, S, D)).astype(np.float32)
Vb = rng.standard_normal((3, S, E)).astype(np.float32)
out = mod.attn_batched(Qb, Kb, Vb)
assert out.dtype == np.float32 and out.shape == (3, T, E)
np.testing.assert_allclose(out, attention(Qb, Kb, Vb), **F32)
print("attention OK")
