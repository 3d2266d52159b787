"""Run examples/quantized_mlp.wia in int8 (wiadsl.quant.quantize) and check it against a
NumPy integer reference (bit-exact) and against the f32 network (close).

Usage: python examples/quantized_mlp.py [target]"""

import math
import pathlib
import sys

import numpy as np

PATH = pathlib.Path(__file__).resolve().with_suffix(".wia")
sys.path.insert(0, str(PATH.parent.parent))  # run from a source checkout too
import wiadsl  # noqa: E402
from wiadsl.quant import params as qp  # noqa: E402
from wiadsl.quant import quantize  # noqa: E402

TARGET = {"target": sys.argv[1]} if len(sys.argv) > 1 else {}  # default: the default target
mod = wiadsl.jit(PATH.read_text(), filename=str(PATH), **TARGET)
rng = np.random.default_rng(0)
f32 = np.float32

B, IN, H, OUT = 32, 64, 128, 10
w1 = (rng.standard_normal((IN, H)) / math.sqrt(IN)).astype(f32)
b1 = (rng.standard_normal(H) * 0.1).astype(f32)
w2 = (rng.standard_normal((H, OUT)) / math.sqrt(H)).astype(f32)
b2 = (rng.standard_normal(OUT) * 0.1).astype(f32)
calibration = [(rng.standard_normal((B, IN)).astype(f32), w1, b1, w2, b2) for _ in range(4)]

qmlp = quantize(mod.mlp, calibration)   # min-max calibration, per-channel weights
print(qmlp.report.render())
act1, act2 = qmlp.report.activations    # the activation (scale, zero point) per layer


def layer(qx, act, w):
    """int8 x int8 -> int32 with the zero-point correction, then dequantize in f32."""
    sw = (np.abs(w).max(axis=0) / f32(127)).astype(f32)       # per output channel
    qw = qp.quantize(w, sw, 0)
    acc = qx.astype(np.int32) @ qw.astype(np.int32) - qw.astype(np.int32).sum(axis=0) * np.int32(act.zero_point)
    return acc.astype(f32) * (sw * f32(act.scale)).astype(f32)


def reference(x):
    qx = qp.quantize(x, f32(act1.scale), act1.zero_point)
    h = np.maximum(layer(qx, act1, w1) + b1, f32(0))
    qh = qp.quantize(h, f32(act2.scale), act2.zero_point)       # the fused requantize
    return layer(qh, act2, w2) + b2


for sample in calibration[:2]:
    y = qmlp(*sample)
    assert y.dtype == np.float32 and y.shape == (B, OUT)
    np.testing.assert_array_equal(y, reference(sample[0]))      # bit-exact
    y32 = mod.mlp(*sample)
    np.testing.assert_allclose(y, y32, atol=0.05 * np.abs(y32).max())   # close to f32
assert qmlp.report.outputs[0].max_rel < 0.05
print("quantized_mlp OK")
