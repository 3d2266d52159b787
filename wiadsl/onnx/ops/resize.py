"""ONNX Resize (and the older Upsample): nearest, linear and cubic, every coordinate
transformation mode, antialias, ``exclude_outside``, ``axes`` and the aspect-ratio
policies, for constant scales or sizes.

Resize is separable: each resized axis is one 1-D interpolation, and with constant
scales the interpolation's taps are constants. For an axis of input extent ``A`` and
output extent ``O`` the importer computes, in NumPy, an index table ``idx [O, n]``
(clamped to ``[0, A)``, as the spec pads with edge values) and a coefficient table
``coeff [O, n]`` (``axis_taps``, after the spec's reference implementation), and the
kernel computes ``sum_t take(x, idx[:, t], axis) * coeff[:, t]``: ``n`` gathers with
constant indices, each a strided slice or a broadcast repeat where the pattern allows
(``take_constant``: 2x nearest and linear upsampling, integer downsampling), and one
multiply-add per tap. Nearest is one gather with no multiply (each row has one
coefficient, 1). ``tf_crop_and_resize`` sets the outputs whose source position falls
outside the input to ``extrapolation_value``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...dtypes import DType
from ..graph import Node, Val, const_val
from ..shapes import Dim
from ..text import literal
from .gather import take_constant
from .registry import op

COORDINATE_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel",
                    "align_corners", "asymmetric", "tf_crop_and_resize")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "simple")


@dataclass(frozen=True)
class ResizeSpec:
    """The attributes that decide one axis's taps."""

    mode: str = "nearest"
    coordinates: str = "half_pixel"
    nearest: str = "round_prefer_floor"
    cubic_a: float = -0.75
    exclude_outside: bool = False
    antialias: bool = False


def _source_positions(spec: ResizeSpec, in_w: int, out_w: int, scale: float,
                      roi: tuple[float, float]) -> np.ndarray:
    """Each output position's coordinate in the input (the spec's x_original) as ONNX
    Runtime computes it: in f32 (in f64, 6.5 / 2.6f - 0.5 is not the integer 2, and a
    nearest ceil picks the next element), and align_corners over the integer output
    extent (onnx's reference divides by scale * extent - 1 instead; for a 0.6x
    downsample of 4 the two give 3 and 1.4)."""
    f = np.float32
    y, s, a = np.arange(out_w, dtype=f), f(scale), f(in_w)
    mode, length, half = spec.coordinates, s * a, f(0.5)
    if mode == "align_corners":
        x = np.zeros(out_w, f) if out_w == 1 else y * (a - 1) / f(out_w - 1)
    elif mode == "asymmetric":
        x = y / s
    elif mode == "tf_crop_and_resize":
        span = (f(roi[1]) - f(roi[0])) * (a - 1)
        x = np.full(out_w, span / 2, f) if out_w == 1 else y * span / f(out_w - 1)
        x = x + f(roi[0]) * (a - 1)
    elif mode == "pytorch_half_pixel":
        x = np.full(out_w, -half, f) if out_w == 1 else (y + half) / s - half
    elif mode == "half_pixel":
        x = (y + half) / s - half
    else:  # half_pixel_symmetric: centred on the input, the size's rounding spread evenly
        x = a / 2 * (1 - f(out_w) / length) + (y + half) / s - half
    return x.astype(np.float64)


def _coefficients(spec: ResizeSpec, ratio: np.ndarray, scale: float) -> np.ndarray:
    """``[O, n]`` weights of the ``n`` neighbours, from each position's fraction
    (1 where the position is an integer, as the reference counts it)."""
    r = ratio[:, None]
    if spec.mode == "nearest":
        upper = {"round_prefer_floor": r > 0.5, "round_prefer_ceil": r >= 0.5,
                 "floor": np.zeros_like(r, bool), "ceil": np.ones_like(r, bool),
                 "simple": np.full_like(r, scale < 1, bool)}[spec.nearest]
        upper = upper | (r == 1)
        return np.concatenate([~upper, upper], axis=1).astype(np.float64)
    if spec.antialias:
        return _antialias(spec, r, min(scale, 1.0))
    if spec.mode == "linear":
        return np.concatenate([1 - r, r], axis=1)
    a = spec.cubic_a
    s = 1 - r
    return np.concatenate([((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a,
                           ((a + 2) * r - (a + 3)) * r * r + 1,
                           ((a + 2) * s - (a + 3)) * s * s + 1,
                           ((a * (s + 1) - 5 * a) * (s + 1) + 8 * a) * (s + 1) - 4 * a], axis=1)


def _antialias(spec: ResizeSpec, r: np.ndarray, scale: float) -> np.ndarray:
    """The linear or cubic kernel stretched by 1/scale when downsampling, normalized."""
    support = 1 if spec.mode == "linear" else 2
    start = int(np.floor(-support / scale) + 1)
    x = np.abs((np.arange(start, 2 - start)[None, :] - r) * scale)
    if spec.mode == "linear":
        w = np.clip(1 - x, 0, 1)
    else:
        a = spec.cubic_a
        w = np.where(x <= 1, (a + 2) * x ** 3 - (a + 3) * x ** 2 + 1,
                     np.where(x < 2, a * x ** 3 - 5 * a * x ** 2 + 8 * a * x - 4 * a, 0.0))
    return w / w.sum(axis=1, keepdims=True)


def axis_taps(spec: ResizeSpec, in_w: int, out_w: int, scale: float,
              roi: tuple[float, float] = (0.0, 1.0)
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(indices [O, n] in [0, in_w), coefficients [O, n], outside mask [O] or None) of
    one axis: output ``o`` is ``sum_t x[idx[o, t]] * coeff[o, t]``, or the
    extrapolation value where the mask is set (tf_crop_and_resize only)."""
    x = _source_positions(spec, in_w, out_w, scale, roi)
    whole = np.floor(x)
    coeff = _coefficients(spec, np.where(x == whole, 1.0, x - whole), scale)
    n = coeff.shape[1]
    pad = -(-n // 2)
    padded = x + pad
    p = np.floor(padded)
    frac = padded - p
    if n % 2 == 0:
        offset = np.where(frac == 0, -(n // 2), -(n // 2) + 1)
    else:
        offset = np.where(frac <= 0.5, -((n - 1) // 2), -((n - 1) // 2) + 1)
    idx = (p + offset).astype(np.int64)[:, None] + np.arange(n)[None, :] - pad
    if spec.exclude_outside:
        coeff = np.where((idx < 0) | (idx >= in_w), 0.0, coeff)
        total = coeff.sum(axis=1, keepdims=True)
        coeff = coeff / np.where(total == 0, 1.0, total)
    outside = (x < 0) | (x > in_w - 1) if spec.coordinates == "tf_crop_and_resize" else None
    return np.clip(idx, 0, in_w - 1), coeff, outside


def _spec(n: Node) -> ResizeSpec:
    mode = n.attr("mode", "nearest")
    if mode not in ("nearest", "linear", "cubic") or (n.op == "Upsample" and mode == "cubic"):
        raise n.fail(f"mode='{mode}' is not a resize mode")
    if n.op == "Upsample" or n.opset < 11:  # Resize-10 and Upsample: ORT's "simple" nearest
        return ResizeSpec(mode, "asymmetric", "simple")
    coordinates = n.attr("coordinate_transformation_mode", "half_pixel")
    nearest = n.attr("nearest_mode", "round_prefer_floor")
    if coordinates not in COORDINATE_MODES:
        raise n.fail(f"coordinate_transformation_mode='{coordinates}' is not supported")
    if nearest not in NEAREST_MODES[:-1]:
        raise n.fail(f"nearest_mode='{nearest}' is not supported")
    antialias = bool(int(n.attr("antialias", 0)))
    if antialias and mode == "nearest":
        raise n.fail("antialias=1 applies to linear and cubic modes only")
    return ResizeSpec(mode, coordinates, nearest, float(n.attr("cubic_coeff_a", -0.75)),
                      bool(int(n.attr("exclude_outside", 0))), antialias)


def _present(n: Node, i: int, what: str) -> np.ndarray | None:
    """Constant input ``i`` as a 1-D float64 array; None when absent or empty."""
    value = n.const(i, what)
    return None if value is None or value.size == 0 else np.asarray(value, np.float64).reshape(-1)


def _targets(n: Node, x: Val) -> tuple[list[float], list[int], list[float]]:
    """(scale, output extent, roi begin/ends) per axis of ``x``."""
    rank = x.rank
    scales: np.ndarray | None
    if n.op == "Upsample" and n.opset < 9:
        scales, sizes, roi = np.asarray(n.attr("scales"), np.float64), None, None
    elif n.op == "Upsample" or n.opset < 11:
        scales, sizes, roi = _present(n, 1, "the scales"), None, None
    else:
        roi, scales = _present(n, 1, "the roi"), _present(n, 2, "the scales")
        sizes = _present(n, 3, "the sizes")
    axes = [n.axis(int(a), rank) for a in n.attr("axes", list(range(rank)))]
    if (scales is None) == (sizes is None):
        raise n.fail("exactly one of scales and sizes must be given")
    given = scales if scales is not None else sizes
    assert given is not None
    if len(given) != len(axes):
        raise n.fail(f"{'scales' if sizes is None else 'sizes'} has {len(given)} entries for "
                     f"{len(axes)} axes")
    extents = [d.value if d.is_static else None for d in x.shape]
    scale, out = [1.0] * rank, [e or 0 for e in extents]
    for a, g in zip(axes, given, strict=True):
        if extents[a] is None:
            if (sizes is None and g == 1.0):
                continue
            raise n.fail(f"axis {a} has a symbolic extent ({x.shape[a]}); it cannot be resized")
        scale[a] = float(g) if sizes is None else g / extents[a]  # type: ignore[operator]
        if scale[a] <= 0:
            raise n.fail(f"the scale of axis {a} must be positive, got {scale[a]}")
        # the extent in f32, as ONNX Runtime computes it (2.6 * 5 is 13, not 12.99...)
        out[a] = int(g) if sizes is not None else \
            int(np.floor(np.float32(scale[a]) * np.float32(extents[a])))
    policy = n.attr("keep_aspect_ratio_policy", "stretch")
    if sizes is not None and policy != "stretch":
        if policy not in ("not_larger", "not_smaller"):
            raise n.fail(f"keep_aspect_ratio_policy='{policy}' is not supported")
        pick = min if policy == "not_larger" else max
        common = pick(scale[a] for a in axes)
        for a in axes:
            scale[a] = common
            out[a] = int(common * extents[a] + 0.5)  # type: ignore[operator]
    bounds = [0.0] * rank + [1.0] * rank
    if roi is not None:
        if len(roi) != 2 * len(axes):
            raise n.fail(f"roi has {len(roi)} entries for {len(axes)} axes (2 per axis)")
        for i, a in enumerate(axes):
            bounds[a], bounds[rank + a] = float(roi[i]), float(roi[len(axes) + i])
    return scale, out, bounds


def _resize_axis(n: Node, x: Val, axis: int, spec: ResizeSpec, out_w: int, scale: float,
                 roi: tuple[float, float], extrapolation: float) -> Val:
    idx, coeff, outside = axis_taps(spec, x.shape[axis].value, out_w, scale, roi)
    shape = x.shape[:axis] + (Dim(out_w),) + x.shape[axis + 1:]
    along = (out_w,) + (1,) * (x.rank - axis - 1)  # a per-position constant, broadcast
    if ((coeff == 0) | (coeff == 1)).all() and (coeff.sum(axis=1) == 1).all():
        result = take_constant(n, x, idx[np.arange(out_w), coeff.argmax(axis=1)], axis)
    else:
        if not x.dtype.is_float:
            raise n.fail(f"mode='{spec.mode}' on {x.dtype} is not supported (nearest only)")
        terms = []
        for t in range(coeff.shape[1]):
            if not coeff[:, t].any():
                continue
            taken = take_constant(n, x, idx[:, t], axis)
            w = const_val(coeff[:, t].astype(x.dtype.numpy).reshape(along), x.dtype,
                          hint=f"{n.label}_w")
            terms.append(f"{taken.ref} * {n.ref(w, x.rank)}")
        result = n.em.bind(" + ".join(terms), x.dtype, shape, "resized")
    if outside is not None and outside.any():
        mask = const_val(outside.reshape(along), DType.BOOL, hint=f"{n.label}_outside")
        result = n.em.bind(f"where({n.ref(mask, x.rank)}, {literal(extrapolation, x.dtype)}, "
                           f"{result.ref})", x.dtype, shape, "resized")
    return result


@op("Resize", "Upsample")
def _resize(n: Node) -> list[Val]:
    x = n.x()
    spec = _spec(n)
    scale, out, roi = _targets(n, x)
    extrapolation = float(n.attr("extrapolation_value", 0.0))
    for a in range(x.rank):
        bounds = (roi[a], roi[x.rank + a])
        if out[a] == (x.shape[a].value if x.shape[a].is_static else 0) and scale[a] == 1.0 \
                and bounds == (0.0, 1.0):
            continue
        if out[a] < 1:
            raise n.fail(f"axis {a} would have {out[a]} elements (an empty result)")
        x = _resize_axis(n, x, a, spec, out[a], scale[a], bounds, extrapolation)
    return [n.out(n.ref(x), x.dtype, x.shape)]
