"""Values of the independent NumPy evaluator, and the language's dtype rules written anew.

The evaluator (numpy_eval.py) must not share the frontend's rules, or a frontend
bug would be reproduced instead of found: promotion (NEP 50 with weak values),
casts (saturating, NaN -> 0) and bf16 rounding are implemented here from
LANGUAGE.md §3 alone, on dtype names (``"f16"``), not on ``wiadsl.dtypes``.

Invariants:
- A ``Val`` holds a NumPy array (0-d for a scalar) in its dtype's storage
  (bf16 in float32 with the low 16 bits zero), its language dtype name, whether
  it is weak (LANGUAGE.md §3), whether it is ``exact`` (bit for bit on every
  backend: no transcendental, reassociated sum or float matmul behind it), and
  ``near``: a bool computed by comparing inexact floats that were within
  rounding of each other (a branch on it may go either way).
- ``mag`` bounds the magnitudes an inexact value was computed from (the sum of
  |x| behind a float sum): its rounding error is relative to that, not to itself.
- ``free`` (None, or a bool mask of ``data``'s shape) marks elements with no single
  right value: a float reduction behind them could overflow (or underflow a product)
  in some order of its terms, so NaN, +-inf or any finite value is allowed there
  (LANGUAGE.md §8, "within float reassociation"). Elementwise ops and reductions
  carry it on; any other op drops it, which only makes the judge stricter.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

STORAGE = {"bool": np.bool_, "i8": np.int8, "i32": np.int32, "i64": np.int64,
           "f16": np.float16, "bf16": np.float32, "f32": np.float32, "f64": np.float64}
KIND = {"bool": 0, "i8": 1, "i32": 1, "i64": 1, "f16": 2, "bf16": 2, "f32": 2, "f64": 2}
BITS = {"bool": 1, "i8": 8, "i32": 32, "i64": 64, "f16": 16, "bf16": 16, "f32": 32, "f64": 64}
#: The dtype of a weak value of each kind (Python's bool, int and float).
WEAK = {0: "bool", 1: "i64", 2: "f64"}
#: Relative rounding of each float dtype (a few ulps), for "within rounding" of a branch.
ROUNDING = {"f16": 4e-3, "bf16": 3e-2, "f32": 1e-5, "f64": 1e-12}


class Unsupported(Exception):
    """The program uses something the evaluator does not cover (reported, never passed)."""


class RuntimeFailure(Exception):
    """The program fails at run time by the language's rules (every target must fail too)."""


@dataclass(frozen=True)
class Val:
    data: np.ndarray
    dtype: str
    weak: bool = False
    exact: bool = True
    near: bool = False
    mag: float = 0.0
    free: np.ndarray | None = None

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.data.shape)

    def scalar(self) -> int | float | bool:
        if self.data.ndim != 0:
            raise Unsupported(f"a scalar was needed, got shape {self.shape}")
        return self.data.item()  # type: ignore[no-any-return]


def absmax(x: np.ndarray) -> float:
    """The largest finite magnitude in ``x`` (0 when there is none)."""
    a = np.abs(np.asarray(x, dtype=np.float64))
    a = a[np.isfinite(a)]
    return float(a.max()) if a.size else 0.0


def is_float(dtype: str) -> bool:
    return KIND[dtype] == 2


def is_int(dtype: str) -> bool:
    return KIND[dtype] == 1


def round_bf16(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to the nearest bf16 (ties to even); NaN stays NaN."""
    f = np.array(x, dtype=np.float32)
    u = f.view(np.uint32).astype(np.uint64)
    lsb = (u >> np.uint64(16)) & np.uint64(1)
    r = ((u + np.uint64(0x7FFF) + lsb) & np.uint64(0xFFFF0000)).astype(np.uint32)
    return np.where(np.isnan(f), f, r.view(np.float32))


def store(x: object, dtype: str) -> np.ndarray:
    """``x`` in the storage of ``dtype`` by NumPy's conversion (wrapping for integers);
    bf16 rounded. Only for conversions the language defines as NumPy's."""
    with np.errstate(all="ignore"):
        out: np.ndarray = np.asarray(x).astype(STORAGE[dtype])
    return round_bf16(out) if dtype == "bf16" else out


def cast(x: np.ndarray, dtype: str) -> np.ndarray:
    """LANGUAGE.md §3 ``cast``: float -> int rounds toward zero and saturates, NaN -> 0;
    anything -> bool is ``!= 0``; the rest converts as NumPy does (ints wrap)."""
    src = np.asarray(x)
    if dtype == "bool":
        return np.asarray(src != 0)
    if src.dtype.kind == "f" and is_int(dtype):
        t = np.trunc(src.astype(np.float64))
        limit = 2.0 ** (BITS[dtype] - 1)
        info = np.iinfo(STORAGE[dtype])
        safe = np.where(np.isnan(t) | (t >= limit) | (t < -limit), 0.0, t)
        out: np.ndarray = safe.astype(STORAGE[dtype])
        out = np.where(t >= limit, info.max, out)
        out = np.where(t < -limit, info.min, out)
        return np.asarray(out, dtype=STORAGE[dtype])
    return store(src, dtype)


def strong_promote(a: str, b: str) -> str:
    """NumPy 2's result type of two strong dtypes; bf16 with f16 gives f32, and bf16
    towards integers behaves as f16 does (it holds i8, not i32)."""
    if a == b:
        return a
    ka, kb = KIND[a], KIND[b]
    if ka != kb:
        lo, hi = (a, b) if ka < kb else (b, a)
        if KIND[lo] == 0:
            return hi
        # int with float: the float if it holds every value of the int, else f64
        holds = {"f16": 8, "bf16": 8, "f32": 16, "f64": 32}[hi]
        return hi if BITS[lo] <= holds else "f64"
    if {a, b} == {"f16", "bf16"}:
        return "f32"
    return a if BITS[a] >= BITS[b] else b


def promote(a: Val, b: Val) -> tuple[str, bool]:
    """NEP 50: two weak values give the weak default of the higher kind; a weak value
    takes a strong one's dtype when its kind is not higher, else its own default."""
    if a.weak and b.weak:
        return WEAK[max(KIND[a.dtype], KIND[b.dtype])], True
    if a.weak or b.weak:
        w, s = (a, b) if a.weak else (b, a)
        if KIND[w.dtype] <= KIND[s.dtype]:
            return s.dtype, False
        return WEAK[KIND[w.dtype]], False
    return strong_promote(a.dtype, b.dtype), False


def convert(v: Val, dtype: str) -> np.ndarray:
    """``v``'s data in ``dtype`` for an operation (promotion, not ``cast``).

    A weak integer outside a strong integer dtype's range is a case the language
    and NumPy answer differently (wrap vs OverflowError): unsupported.
    """
    if v.dtype == dtype:
        return v.data
    if v.weak and is_int(v.dtype) and is_int(dtype):
        info = np.iinfo(STORAGE[dtype])
        if v.data.size and (v.data.min() < info.min or v.data.max() > info.max):
            raise Unsupported(f"weak integer {v.data} out of range for {dtype}")
    return store(v.data, dtype)


def weak_scalar(value: int | float | bool) -> Val:
    """A literal: a weak value of its Python kind's default dtype."""
    if isinstance(value, bool):
        return Val(np.asarray(value), "bool", True)
    if isinstance(value, int):
        if not -(2**63) <= value < 2**63:
            raise Unsupported(f"integer literal {value} out of range for i64")
        return Val(np.asarray(value, np.int64), "i64", True)
    return Val(np.asarray(value, np.float64), "f64", True)


def merge_free(shape: tuple[int, ...], *vals: Val) -> np.ndarray | None:
    """The ``free`` masks of elementwise operands, broadcast to ``shape`` and or-ed."""
    masks = [v.free for v in vals if v.free is not None and v.free.any()]
    if not masks:
        return None
    out = np.zeros(shape, dtype=bool)
    try:
        for m in masks:
            out = out | np.broadcast_to(m, shape)
    except ValueError:
        return None  # not elementwise after all: drop it (stricter, never looser)
    return out


def overflow_limit(dtype: str, count: int) -> float:
    """A magnitude below which partial results of ``count`` terms cannot overflow
    ``dtype`` in any order, rounding included (conservatively)."""
    fmax = 3.3895313892515355e38 if dtype == "bf16" else float(np.finfo(STORAGE[dtype]).max)
    eps = ROUNDING[dtype]
    return fmax * max(0.5, 1.0 - (count + 2) * eps)
