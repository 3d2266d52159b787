"""Moves and conversions: mov (incl. packing ``{a,b}``), cvt (every int/float pair,
f16/bf16, ``.f16x2``/``.bf16x2`` packing, ``.rni/.rzi/.rmi/.rpi``, ``.rn/.rz/.rm/.rp``,
``.sat``, ``.ftz``, ``cvt.rna.tf32.f32``), cvta (generic ↔ global/shared/local).

Invariants: ``cvt.rna.tf32.f32`` rounds the f32 to 10 mantissa bits, ties away from
zero (overflow to inf), as an f32 bit pattern whose low 13 bits are 0 (the layout the
simulated ``mma .tf32`` reads); a NaN becomes the canonical NaN. Float → int conversions round as the modifier says and saturate to
the destination range, NaN → 0 (as PTX defines); int → int conversions wrap
unless ``.sat``; narrowing float conversions round once from the exact value.
"""

from __future__ import annotations

import numpy as np

from . import fmath
from .ast import Vec
from .dispatch import Compiled, op, unsupported
from .memory import LOCAL_WINDOW, PARAM_WINDOW, SHARED_WINDOW
from .operands import mods_of, reader, writer
from .ptxtypes import TYPES, UINT, PtxType, f32_to_bf16

_IRND = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}
_FRND = ("rn", "rz", "rm", "rp", "rna")


def round_to(x, dtype, mode: str) -> np.ndarray:
    """Float64 (exact) values to float ``dtype`` with rounding ``mode``."""
    x = np.asarray(x, np.float64)
    r = x.astype(dtype)
    if mode in ("rn", "rna"):
        return r
    back = r.astype(np.float64)
    if mode == "rz":
        fix, toward = np.abs(back) > np.abs(x), dtype(0)
    elif mode == "rm":
        fix, toward = back > x, dtype(-np.inf)
    else:
        fix, toward = back < x, dtype(np.inf)
    fix &= np.isfinite(x)
    return np.where(fix, np.nextafter(r, toward), r).astype(dtype)


def convert(x, src: PtxType, dst: PtxType, flags: set[str]) -> np.ndarray:
    """``cvt`` semantics for one value array (see the module docstring)."""
    irnd = next((_IRND[f] for f in _IRND if f in flags), None)
    frnd = next((f for f in _FRND if f in flags), "rn")
    if src.is_float:
        v: np.ndarray = fmath.to_compute(x, src).astype(np.float64)
        if "ftz" in flags and src.bits == 32:
            v = fmath.ftz(v.astype(np.float32)).astype(np.float64)
        if irnd is not None:
            v = irnd(v)
        if dst.is_float:
            if "sat" in flags:
                v = fmath.sat(v)
            if dst.kind == "bf":
                return f32_to_bf16(round_to(v, np.float32, "rz" if frnd == "rz" else "rn"),
                                   "rz" if frnd == "rz" else "rn")
            r = round_to(v, dst.np, frnd)
            return fmath.ftz(r) if "ftz" in flags else r
        if irnd is None:
            v = np.trunc(v)
        info = np.iinfo(dst.np)
        v = np.where(np.isnan(v), 0, np.clip(v, info.min, info.max))
        if dst.bits == 64:  # clip in float64 can land on 2**63 / 2**64
            hi = np.float64(info.max)
            big = v >= hi
            out: np.ndarray = np.where(big, 0, v).astype(dst.np)
            return np.where(big, dst.np(info.max), out)
        return v.astype(dst.np)
    v = np.asarray(x)
    if dst.is_float:
        if dst.kind == "bf":
            return f32_to_bf16(round_to(v.astype(np.float64), np.float32, frnd), "rn")
        if v.dtype.itemsize == 8 and frnd == "rn":
            return v.astype(dst.np)
        return round_to(v.astype(np.float64), dst.np, frnd)
    if "sat" in flags:
        info = np.iinfo(dst.np)
        wide = v.astype(np.float64) if v.dtype.itemsize == 8 else v.astype(np.int64)
        if v.dtype.itemsize == 8:
            lo_ok, hi_ok = v >= max(info.min, np.iinfo(v.dtype).min), v <= min(info.max, np.iinfo(v.dtype).max)
            return np.where(~lo_ok, dst.np(info.min), np.where(~hi_ok, dst.np(info.max),
                                                               v.astype(dst.np)))
        return np.clip(wide, info.min, info.max).astype(dst.np)
    return v.astype(dst.np)


@op("cvt")
def build_cvt(ins, cx):
    flags, types = mods_of(ins)
    unsupported(cx, flags, set(_IRND) | set(_FRND) | {"sat", "ftz", "satfinite", "relu"})
    if len(types) != 2:
        raise cx.error(f"unsupported instruction '{ins.opcode}' at line {ins.line}")
    dst_t, src_t = types
    if dst_t.name == "tf32":
        return _build_tf32(ins, cx, flags, src_t)
    if dst_t.name in ("f16x2", "bf16x2"):
        half = TYPES["f16"] if dst_t.name == "f16x2" else TYPES["bf16"]
        a, b = reader(cx, ins.operands[1], src_t), reader(cx, ins.operands[2], src_t)
        d = writer(cx, ins.operands[0], TYPES["b32"])

        def run2(w, idx):
            hi = convert(a(w, idx), src_t, half, flags)
            lo = convert(b(w, idx), src_t, half, flags)
            d(w, idx, fmath.pack_f16x2(lo, hi))

        return Compiled(ins, run2)
    if "relu" in flags or "satfinite" in flags:
        raise cx.error(f"unsupported instruction '{ins.opcode}' at line {ins.line}")
    a = reader(cx, ins.operands[1], src_t)
    d = writer(cx, ins.operands[0], dst_t)
    return Compiled(ins, lambda w, idx: d(w, idx, convert(a(w, idx), src_t, dst_t, flags)))


def tf32_rna(bits: np.ndarray) -> np.ndarray:
    """f32 bit patterns rounded to tf32 (10 mantissa bits), ties away from zero."""
    u = np.asarray(bits, np.uint32)
    r = (u + np.uint32(0x1000)) & np.uint32(0xFFFFE000)  # sign-magnitude: rounds |x|
    nan = (u & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    return np.where(nan, np.uint32(0x7FFFFFFF), r).astype(np.uint32)


def _build_tf32(ins, cx, flags, src_t):
    if src_t.name != "f32" or flags - {"rna"} or "rna" not in flags:
        raise cx.error(f"unsupported instruction '{ins.opcode}' at line {ins.line} "
                       "(only cvt.rna.tf32.f32)")
    a = reader(cx, ins.operands[1], TYPES["b32"])
    d = writer(cx, ins.operands[0], TYPES["b32"])
    return Compiled(ins, lambda w, idx: d(w, idx, tf32_rna(a(w, idx))))


@op("mov")
def build_mov(ins, cx):
    flags, types = mods_of(ins)
    unsupported(cx, flags, set())
    (t,) = types
    dst, src = ins.operands
    if isinstance(dst, Vec) or isinstance(src, Vec):
        return _mov_vec(ins, cx, t, dst, src)
    a = reader(cx, src, t)
    d = writer(cx, dst, t)
    return Compiled(ins, lambda w, idx: d(w, idx, a(w, idx)))


def _mov_vec(ins, cx, t: PtxType, dst, src) -> Compiled:
    """``mov.b64 %rd, {%r1, %r2}`` packs (element 0 lowest); the reverse unpacks."""
    vec = dst if isinstance(dst, Vec) else src
    k = len(vec.items)
    part = TYPES[f"b{t.bits // k}"]
    ut, pt = UINT[t.bits], UINT[part.bits]
    if isinstance(src, Vec):
        rs = [reader(cx, o, part) for o in src.items]
        d = writer(cx, dst, t)

        def pack(w, idx):
            acc = ut(0)
            for i, r in enumerate(rs):
                acc = acc | (np.asarray(r(w, idx)).astype(ut) << ut(part.bits * i))
            d(w, idx, acc)

        return Compiled(ins, pack)
    a = reader(cx, src, t)
    ws = [writer(cx, o, part) for o in dst.items]

    def unpack(w, idx):
        v = np.asarray(a(w, idx)).view(ut)
        for i, wr in enumerate(ws):
            wr(w, idx, ((v >> ut(part.bits * i)) & ut((1 << part.bits) - 1)).astype(pt))

    return Compiled(ins, unpack)


_WINDOWS = {"global": 0, "shared": SHARED_WINDOW, "local": LOCAL_WINDOW, "const": 0,
            "param": PARAM_WINDOW}


@op("cvta")
def build_cvta(ins, cx):
    flags, types = mods_of(ins)
    to = "to" in flags
    spaces = [f for f in flags if f in _WINDOWS]
    unsupported(cx, flags, {"to", *_WINDOWS})
    if len(spaces) != 1 or len(types) != 1:
        raise cx.error(f"unsupported instruction '{ins.opcode}' at line {ins.line}")
    t = types[0]
    base = _WINDOWS[spaces[0]]
    a = reader(cx, ins.operands[1], TYPES["u64"])
    d = writer(cx, ins.operands[0], t)
    delta = np.uint64(base)

    def run(w, idx):
        v = np.asarray(a(w, idx), np.uint64)
        d(w, idx, (v - delta if to else v + delta).astype(t.np))

    return Compiled(ins, run)
