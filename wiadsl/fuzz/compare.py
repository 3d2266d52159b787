"""Comparing a backend's outputs with the oracle's, with a tolerance per dtype.

Invariants:
- Integer and bool results must be equal exactly (wrap-around included), and so
  must shapes and dtypes.
- Floats agree when ``|got - ref| <= rtol * |ref| + rtol * scale`` where ``scale``
  is ``max(1, max |ref|)`` over the finite values of that output: reassociated
  sums and matmuls lose precision relative to the largest magnitude involved,
  not to each element. NaN matches NaN and infinities must match exactly.
- The rtol is the result dtype's, or the program's working precision's when that
  is looser: an f64 result computed from an f16 ``sigmoid`` is only as exact as
  the f16 value, and backends may round f16 math differently by an ulp.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: rtol per NumPy storage dtype (bf16 is stored as float32 but declared bf16).
RTOL = {"float16": 2e-2, "float32": 1e-4, "float64": 1e-9, "bfloat16": 5e-2}
#: The same per language float dtype name, least precise first.
LANGUAGE_RTOL = {"bf16": RTOL["bfloat16"], "f16": RTOL["float16"], "f32": RTOL["float32"],
                 "f64": RTOL["float64"]}


@dataclass(frozen=True)
class Diff:
    """Why two results differ (``ok`` when they do not)."""

    ok: bool
    reason: str = ""
    max_abs: float = 0.0


def compare_values(ref: object, got: object, precision: str | None = None) -> Diff:
    """Compare one output; ``precision`` is the language name of the least precise
    float dtype the program computes in (bf16 results are stored as float32)."""
    r, g = np.asarray(ref), np.asarray(got)
    if r.shape != g.shape:
        return Diff(False, f"shape {g.shape} != {r.shape}")
    if r.dtype != g.dtype:
        return Diff(False, f"dtype {g.dtype} != {r.dtype}")
    if r.size == 0:
        return Diff(True)
    if r.dtype.kind in "biu":
        if np.array_equal(r, g):
            return Diff(True)
        bad = int(np.count_nonzero(r != g))
        return Diff(False, f"{bad} of {r.size} elements differ", float("inf"))
    rtol = max(RTOL[str(r.dtype)], LANGUAGE_RTOL.get(precision or "", 0.0))
    r64, g64 = r.astype(np.float64), g.astype(np.float64)
    nan_r, nan_g = np.isnan(r64), np.isnan(g64)
    if not np.array_equal(nan_r, nan_g):
        return Diff(False, f"NaN in {int(np.count_nonzero(nan_r ^ nan_g))} elements on one side only")
    inf_r, inf_g = np.isinf(r64), np.isinf(g64)
    if not np.array_equal(r64[inf_r | inf_g], g64[inf_r | inf_g]):
        return Diff(False, "infinities differ")
    finite = np.isfinite(r64) & np.isfinite(g64)
    if not finite.any():
        return Diff(True)
    scale = max(1.0, float(np.max(np.abs(r64[finite]))))
    err = np.abs(r64[finite] - g64[finite])
    bound = rtol * np.abs(r64[finite]) + rtol * scale
    max_abs = float(err.max())
    if np.all(err <= bound):
        return Diff(True, max_abs=max_abs)
    return Diff(False, f"max abs err {max_abs:.3g} (rtol {rtol:g}, scale {scale:.3g})", max_abs)


def compare_outputs(ref: list[object], got: list[object], precision: str | None = None) -> Diff:
    """The first differing output of two result lists (``Diff(True)`` when all agree)."""
    if len(ref) != len(got):
        return Diff(False, f"{len(got)} outputs, expected {len(ref)}")
    for k, (r, g) in enumerate(zip(ref, got, strict=True)):
        diff = compare_values(r, g, precision)
        if not diff.ok:
            return Diff(False, f"output {k}: {diff.reason}", diff.max_abs)
    return Diff(True)
