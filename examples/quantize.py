"""Run examples/quantize.wia (int8 quantize/dequantize round trip, int8 matmul).

Usage: python examples/quantize.py [target]"""

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


def quantize(x, scale, zp):
    """x / scale in x's dtype, round half to even, + zp, clamp to [-128, 127], i8."""
    q = np.rint(x / np.float32(scale)).astype(np.float64) + int(zp)
    return np.clip(q, -128, 127).astype(np.int8)


def dequantize(q, scale, zp):
    return (q.astype(np.float32) - np.float32(zp)) * np.float32(scale)


# round trip; includes exact halves (0.5, 1.5, 2.5, -0.5, -1.5 after / scale: round half
# to even) and values that clamp
x = np.concatenate(
    [
        rng.standard_normal(60).astype(np.float32) * 2,
        np.array([0.125, 0.375, 0.625, -0.125, -0.375, 40.0, -40.0], np.float32),
    ]
)
scale, zp = np.float32(0.25), np.int32(3)  # a power of two: x / scale is exact
q, xr, fq = mod.roundtrip(x, scale, zp)
assert q.dtype == np.int8 and xr.dtype == np.float32 and fq.dtype == np.float32
np.testing.assert_array_equal(q, quantize(x, scale, zp))  # exact for ints
np.testing.assert_allclose(xr, dequantize(q, scale, zp), **F32)
np.testing.assert_allclose(fq, xr, **F32)

# exact int8 matmul accumulated in i32
qa = rng.integers(-128, 128, (9, 40), dtype=np.int8)
qb = rng.integers(-128, 128, (40, 5), dtype=np.int8)
C = mod.int8_matmul(qa, qb)
assert C.dtype == np.int32
np.testing.assert_array_equal(C, qa.astype(np.int32) @ qb.astype(np.int32))

# quantized linear layer
xm = rng.standard_normal((4, 16)).astype(np.float32)
wm = (rng.standard_normal((16, 3)) * 0.5).astype(np.float32)
sx, sw = np.float32(0.03), np.float32(0.02)
acc = quantize(xm, sx, 0).astype(np.int32) @ quantize(wm, sw, 0).astype(np.int32)
y = mod.qlinear(xm, wm, sx, sw)
assert y.dtype == np.float32
np.testing.assert_allclose(y, acc.astype(np.float32) * (sx * sw), **F32)
np.testing.assert_allclose(y, xm @ wm, atol=0.1)  # close to the float layer
print("quantize OK")
