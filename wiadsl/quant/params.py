"""Quantization parameters and the NumPy reference numerics of LANGUAGE.md §7.

Reference formulas (the oracle of every backend and of tests/quant):
- ``quantize(x, s, zp)    = clip(rint(x / s) + zp, -128, 127) -> i8``, computed in
  x's float dtype (``s`` has that dtype; rint rounds half to even);
- ``dequantize(q, s, zp)  = (f32(q) - f32(zp)) * f32(s)`` in f32;
- ``fake_quant(x, s, zp)  = dequantize(quantize(x, s, zp), s, zp)``.
This is the seed's (§5.7) ``round(x / scale) + zero_point``, clamp, then
``(quantized - zero_point) * scale``, with one precision: ties round to even.

Parameter choice (``choose``): an observed range [lo, hi] (widened to contain 0,
so that 0.0 is exactly representable) maps to
- symmetric: ``s = max(|lo|, |hi|) / 127``, ``zp = 0`` (range [-127, 127] used);
- asymmetric: ``s = (hi - lo) / 255``, ``zp = -128 - rint(lo / s)`` clipped to i8.
Invariants: ``s`` is a positive normal f32 (a zero range gives ``s = TINY_SCALE``),
``zp`` is an integer in [-128, 127]; per-channel parameters are arrays along one
axis, per-tensor ones are 0-d.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: the scale of an all-zero tensor (any positive value quantizes 0.0 to zp exactly)
TINY_SCALE = np.float32(2.0 ** -32)


@dataclass(frozen=True)
class QuantParams:
    """Scale and zero point; ``axis`` is the channel axis (None: per tensor)."""

    scale: np.ndarray       #: f32, 0-d or 1-d (one per channel)
    zero_point: np.ndarray  #: int32, same shape as ``scale``
    axis: int | None = None

    def broadcast_shape(self, rank: int) -> tuple[int, ...]:
        """The shape that broadcasts ``scale`` along ``axis`` of a rank-``rank`` tensor."""
        if self.axis is None:
            return ()
        shape = [1] * (rank - self.axis % rank)
        shape[0] = int(self.scale.shape[0])
        return tuple(shape)

    def scale_for(self, rank: int) -> np.ndarray:
        return self.scale.reshape(self.broadcast_shape(rank))

    def zero_point_for(self, rank: int) -> np.ndarray:
        return self.zero_point.reshape(self.broadcast_shape(rank))


def choose(lo: np.ndarray | float, hi: np.ndarray | float, symmetric: bool) -> tuple[np.ndarray, np.ndarray]:
    """(scale f32, zero point int32) for ranges [lo, hi] (scalars or per-channel arrays)."""
    lo = np.minimum(np.asarray(lo, np.float64), 0.0)
    hi = np.maximum(np.asarray(hi, np.float64), 0.0)
    if symmetric:
        scale = np.maximum(np.abs(lo), np.abs(hi)) / 127.0
        zp = np.zeros_like(scale)
    else:
        scale = (hi - lo) / 255.0
        safe = np.where(scale > 0, scale, 1.0)
        zp = np.clip(-128.0 - np.rint(lo / safe), -128, 127)
    scale = np.maximum(scale.astype(np.float32), TINY_SCALE)  # also: ranges below f32's reach
    return scale, zp.astype(np.int32)


def weight_params(w: np.ndarray, axis: int | None, method: str = "minmax",
                  percentile: float = 99.99) -> QuantParams:
    """Symmetric parameters of a constant weight, per channel along ``axis`` or per tensor."""
    a = np.abs(np.asarray(w, np.float64))
    if axis is None:
        flat = a.reshape(1, -1)
    else:
        flat = np.moveaxis(a, axis, 0).reshape(a.shape[axis], -1)
    if method == "percentile":
        bound = np.percentile(flat, percentile, axis=1)
    else:
        bound = flat.max(axis=1) if flat.shape[1] else np.zeros(flat.shape[0])
    scale, zp = choose(-bound, bound, symmetric=True)
    if axis is None:
        return QuantParams(scale.reshape(()), zp.reshape(()), None)
    return QuantParams(scale, zp, axis)


# ------------------------------------------------------------ reference numerics

def quantize(x: np.ndarray, scale: np.ndarray | float, zp: np.ndarray | int) -> np.ndarray:
    """LANGUAGE.md §7 ``quantize``: in x's float dtype, ties to even, clamp, i8."""
    x = np.asarray(x)
    dt = x.dtype if x.dtype.kind == "f" else np.dtype(np.float32)
    with np.errstate(all="ignore"):
        t = np.rint((x.astype(dt) / np.asarray(scale).astype(dt)).astype(dt))
        q = (t + np.asarray(zp).astype(dt)).astype(dt)
        return np.clip(q, -128, 127).astype(np.int8)


def dequantize(q: np.ndarray, scale: np.ndarray | float, zp: np.ndarray | int) -> np.ndarray:
    """LANGUAGE.md §7 ``dequantize``: ``(q - zp) * scale`` in f32."""
    f32 = np.float32
    return ((np.asarray(q).astype(f32) - np.asarray(zp).astype(f32)) * np.asarray(scale).astype(f32)).astype(f32)


def fake_quant(x: np.ndarray, scale: np.ndarray | float, zp: np.ndarray | int) -> np.ndarray:
    """The seed's ``forward_with_fake_quant``: dequantize(quantize(x))."""
    return dequantize(quantize(x, scale, zp), scale, zp)
