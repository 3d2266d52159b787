"""Run examples/causal_attention.wia (nn.causal_attention, an explicit version, a batched one).

Query i attends to keys j <= i. Usage: python examples/causal_attention.py [target]"""

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


def causal_attention(q, k, v):
    t, s = q.shape[-2], k.shape[-2]
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    scores = np.where(np.arange(s) <= np.arange(t)[:, None], scores, -np.inf)
    p = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v


for T, S in ((6, 9), (9, 6)):  # fewer queries than keys, and more
    D, E = 16, 8
    Q = rng.standard_normal((T, D)).astype(np.float32)
    K = rng.standard_normal((S, D)).astype(np.float32)
    V = rng.standard_normal((S, E)).astype(np.float32)
    want = causal_attention(Q, K, V)
    for name in ("attn_causal", "attn_causal_explicit"):
        out = getattr(mod, name)(Q, K, V)
        assert out.dtype == np.float32 and out.shape == (T, E), name
        np.testing.assert_allclose(out, want, **F32, err_msg=name)
    # row 0 sees key 0 only: its output is V's first row
    np.testing.assert_allclose(want[0], V[0], **F32)

Qb = rng.standard_normal((3, 6, 16)).astype(np.float32)
Kb = rng.standard_normal((3, 9, 16)).astype(np.float32)
Vb = rng.standard_normal((3, 9, 8)).astype(np.float32)
out = mod.attn_causal_batched(Qb, Kb, Vb)
assert out.dtype == np.float32 and out.shape == (3, 6, 8)
np.testing.assert_allclose(out, causal_attention(Qb, Kb, Vb), **F32)
print("causal_attention OK")
