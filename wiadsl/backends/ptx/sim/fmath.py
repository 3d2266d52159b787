"""Float and integer helpers shared by the arithmetic ops.

Invariants: integer results wrap modulo 2^bits (computed in unsigned views, never
relying on signed overflow); f32 directed rounding (``.rz/.rm/.rp``) rounds the
float64 result of the operation, which is exact for add/sub/mul of f32 values
except when exponents differ by more than ~29 (documented limitation); ``.ftz``
flushes f32 subnormal inputs and outputs to sign-preserving zero; ``.sat`` clamps
to [0, 1] with NaN → 0.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from .ptxtypes import SINT, UINT, PtxType, bf16_to_f32, f32_to_bf16

F32_TINY = np.float32(2.0**-126)


def uview(x, bits: int) -> np.ndarray:
    """``x`` as unsigned ints of ``bits`` (reinterpreting signed values)."""
    a = np.asarray(x)
    if a.dtype.kind == "f":
        raise TypeError("uview on floats")
    return a.astype(SINT[bits] if a.dtype.kind == "i" else UINT[bits], copy=False).view(UINT[bits])


def typed(u: np.ndarray, t: PtxType) -> np.ndarray:
    return np.asarray(u).view(t.np)


def round_f32(x64: np.ndarray, mode: str) -> np.ndarray:
    """float64 → float32 with rounding ``rn``/``rz``/``rm``/``rp``."""
    r = np.asarray(x64, np.float64).astype(np.float32)
    if mode == "rn":
        return r
    r64 = r.astype(np.float64)
    x = np.asarray(x64, np.float64)
    if mode == "rz":
        fix = np.abs(r64) > np.abs(x)
        toward = np.float32(0)
    elif mode == "rm":
        fix = r64 > x
        toward = np.float32(-np.inf)
    else:
        fix = r64 < x
        toward = np.float32(np.inf)
    return np.where(fix, np.nextafter(r, toward), r).astype(np.float32)


def ftz(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    if x.dtype != np.float32:
        return x
    return np.where(np.abs(x) < F32_TINY, np.copysign(np.float32(0), x), x).astype(np.float32)


def sat(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    return np.where(np.isnan(x), x.dtype.type(0), np.clip(x, 0, 1)).astype(x.dtype)


_SPLIT = 134217729.0  # 2**27 + 1: Veltkamp's split of a 53-bit significand into halves


def _split(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    c = _SPLIT * a
    hi = c - (c - a)
    return hi, a - hi


def fma_f64(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``a * b + c`` rounded once, as ``fma.rn.f64`` (NumPy has no fma; ``math.fma`` is
    Python 3.13+). The product is exact as ``p + e`` (Dekker), the sum compensated
    (Knuth's two-sum). A plain ``a * b + c`` rounds twice: ``384 * (1/3) - 128`` gives 0
    instead of -7.1e-15, and a floor remainder built on it comes out wrong."""
    a, b, c = np.broadcast_arrays(*(np.asarray(v, np.float64) for v in (a, b, c)))
    with np.errstate(all="ignore"):
        p = a * b
        (ah, al), (bh, bl) = _split(a), _split(b)
        e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
        s = p + c
        v = s - p
        t = (p - (s - v)) + (c - v)
        exact = s + (t + e)
        plain = p + c
        finite = np.isfinite(a) & np.isfinite(b) & np.isfinite(c)
        ap = np.abs(p)
        # Dekker's split overflows above ~2^996, and the product's error term loses
        # bits to underflow below ~2^-916: there, exact rational arithmetic
        zero_product = (a == 0) | (b == 0)
        in_range = (zero_product | ((ap > _DEKKER_LO) & (ap < _DEKKER_HI))) \
            & (np.abs(a) < _DEKKER_HI) & (np.abs(b) < _DEKKER_HI) & (np.abs(c) < _DEKKER_HI)
    # infinities, NaNs and exact zero products (signed zeros) take the plain formula
    out = np.where(finite & ~zero_product, exact, plain)
    for i in map(tuple, np.argwhere(finite & ~in_range)):
        out[i] = _fma_rational(float(a[i]), float(b[i]), float(c[i]))
    return out


_DEKKER_LO, _DEKKER_HI = 2.0 ** -900, 2.0 ** 990


def _fma_rational(a: float, b: float, c: float) -> float:
    """``a * b + c`` of finite doubles, rounded once (``float(Fraction)`` is correctly
    rounded, subnormals included); an exact zero is +0 unless ``a * b`` is a zero."""
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:
        return a * b + c if a == 0 or b == 0 else 0.0
    try:
        return float(exact)
    except OverflowError:
        return math.inf if exact > 0 else -math.inf


def to_compute(x, t: PtxType) -> np.ndarray:
    """bf16 bits to float32; other types unchanged."""
    return bf16_to_f32(x) if t.kind == "bf" else np.asarray(x)


def from_compute(x, t: PtxType, mode: str = "rn") -> np.ndarray:
    """A float result back to type ``t`` (bf16 rounded from float32)."""
    if t.kind == "bf":
        return f32_to_bf16(np.asarray(x, np.float32), "rz" if mode == "rz" else "rn")
    return np.asarray(x).astype(t.np)


def split_f16x2(u32: np.ndarray, t: PtxType) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) halves of packed f16x2/bf16x2 bits, as f16 (or bf16 bits)."""
    u = np.asarray(u32, np.uint32)
    lo, hi = (u & np.uint32(0xFFFF)).astype(np.uint16), (u >> np.uint32(16)).astype(np.uint16)
    if t.name == "f16x2":
        return lo.view(np.float16), hi.view(np.float16)
    return lo, hi


def pack_f16x2(lo, hi) -> np.ndarray:
    lo = np.asarray(lo)
    hi = np.asarray(hi)
    lo = lo.view(np.uint16) if lo.dtype == np.float16 else lo.astype(np.uint16)
    hi = hi.view(np.uint16) if hi.dtype == np.float16 else hi.astype(np.uint16)
    return lo.astype(np.uint32) | (hi.astype(np.uint32) << np.uint32(16))


def int_divmod(a, b, t: PtxType) -> tuple[np.ndarray, np.ndarray]:
    """C-style truncating quotient and remainder; division by zero gives all-ones / ``a``."""
    bits = t.bits
    a = np.asarray(a, t.np)
    b = np.asarray(b, t.np)
    zero = b == 0
    if t.kind == "s":
        ma = np.where(a < 0, (~uview(a, bits)) + UINT[bits](1), uview(a, bits))
        mb = np.where(b < 0, (~uview(b, bits)) + UINT[bits](1), uview(b, bits))
    else:
        ma, mb = uview(a, bits), uview(b, bits)
    mb = np.where(zero, UINT[bits](1), mb)
    q, r = ma // mb, ma % mb
    if t.kind == "s":
        qneg = (a < 0) ^ (b < 0)
        q = np.where(qneg, (~q) + UINT[bits](1), q)
        r = np.where(a < 0, (~r) + UINT[bits](1), r)
    q = np.where(zero, UINT[bits](~0 & ((1 << bits) - 1)), q)
    r = np.where(zero, uview(a, bits), r)
    return q.astype(UINT[bits]).view(t.np), r.astype(UINT[bits]).view(t.np)


def mul_hi(a, b, t: PtxType) -> np.ndarray:
    """High half of the full product of two ``t`` values."""
    bits = t.bits
    if bits <= 32:
        wide = np.int64 if t.kind == "s" else np.uint64
        p = np.asarray(a).astype(wide) * np.asarray(b).astype(wide)
        return (p >> wide(bits)).astype(SINT[bits] if t.kind == "s" else UINT[bits]).view(t.np)
    ua, ub = uview(a, 64), uview(b, 64)
    m32 = np.uint64(0xFFFFFFFF)
    s32 = np.uint64(32)
    al, ah, bl, bh = ua & m32, ua >> s32, ub & m32, ub >> s32
    ll, lh, hl, hh = al * bl, al * bh, ah * bl, ah * bh
    mid = (ll >> s32) + (lh & m32) + (hl & m32)
    hi = hh + (lh >> s32) + (hl >> s32) + (mid >> s32)
    if t.kind == "s":
        hi = hi - np.where(np.asarray(a) < 0, ub, 0).astype(np.uint64)
        hi = hi - np.where(np.asarray(b) < 0, ua, 0).astype(np.uint64)
    return hi.view(t.np)


def widen(x, t: PtxType) -> np.ndarray:
    """Values of ``t`` as the type twice as wide (same signedness)."""
    return np.asarray(x).astype((SINT if t.kind == "s" else UINT)[t.bits * 2])
