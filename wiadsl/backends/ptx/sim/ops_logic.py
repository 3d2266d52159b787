"""Bitwise and comparison ops: and or xor not cnot shl shr shf, setp set selp slct testp
(bit manipulation is in ``ops_bits``).

Invariant: shift amounts are unsigned and clamp (``>= width`` gives 0, or the
sign fill for ``shr.s``); ``setp`` ordered comparisons are false on NaN, the
``u``-suffixed ones true; ``p|q`` writes ``q = !cmp`` combined with ``.and/.or/.xor``.
"""

from __future__ import annotations

import numpy as np

from . import fmath
from .dispatch import Compiled, op, unsupported
from .operands import mods_of, reader, writer
from .ptxtypes import SINT, TYPES, UINT, PtxType

_BIT = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}


def _one_type(ins, cx, allowed=frozenset()) -> tuple[set[str], PtxType]:
    flags, types = mods_of(ins)
    if len(types) != 1:
        raise cx.error(f"unsupported instruction '{ins.opcode}' at line {ins.line}")
    unsupported(cx, flags, set(allowed))
    return flags, types[0]


def _simple(ins, cx, t: PtxType, run, src_types=None, dst_t=None) -> Compiled:
    src_types = src_types or [t] * (len(ins.operands) - 1)
    srcs = [reader(cx, o, st) for o, st in zip(ins.operands[1:], src_types)]
    dst = writer(cx, ins.operands[0], dst_t or t)
    if len(srcs) != len(src_types):
        raise cx.error(f"'{ins.opcode}' takes {len(src_types) + 1} operands")
    return Compiled(ins, lambda w, idx: dst(w, idx, run(*(s(w, idx) for s in srcs))))


@op("and", "or", "xor")
def build_bitwise(ins, cx):
    _, t = _one_type(ins, cx)
    f = _BIT[ins.op]
    if t.kind == "pred":
        return _simple(ins, cx, t, f)
    bits = t.bits
    return _simple(ins, cx, t, lambda a, b: fmath.typed(f(fmath.uview(a, bits), fmath.uview(b, bits)), t))


@op("not", "cnot")
def build_not(ins, cx):
    _, t = _one_type(ins, cx)
    if t.kind == "pred":
        return _simple(ins, cx, t, np.logical_not)
    if ins.op == "not":
        return _simple(ins, cx, t, lambda a: fmath.typed(~fmath.uview(a, t.bits), t))
    return _simple(ins, cx, t, lambda a: (np.asarray(a) == 0).astype(t.np))


@op("shl", "shr")
def build_shift(ins, cx):
    _, t = _one_type(ins, cx)
    bits = t.bits
    ut = UINT[bits]

    def shift(a, n):
        n = np.asarray(n, np.uint32)
        big = n >= bits
        k = np.minimum(n, bits - 1).astype(ut)
        if ins.op == "shl":
            return fmath.typed(np.where(big, ut(0), fmath.uview(a, bits) << k), t)
        if t.kind == "s":
            sa = np.asarray(a).astype(SINT[bits], copy=False)
            return np.where(big, sa >> SINT[bits](bits - 1), sa >> k.astype(SINT[bits])).view(t.np)
        return fmath.typed(np.where(big, ut(0), fmath.uview(a, bits) >> k), t)

    return _simple(ins, cx, t, shift, [t, TYPES["u32"]])


@op("shf")
def build_shf(ins, cx):
    """Funnel shift of the 64-bit value b:a (``shf.{l,r}.{wrap,clamp}.b32``)."""
    flags, t = _one_type(ins, cx, {"l", "r", "wrap", "clamp"})

    def run(a, b, c):
        n = np.asarray(c, np.uint32)
        n = n & np.uint32(31) if "wrap" in flags else np.minimum(n, np.uint32(32))
        v = (np.asarray(b, np.uint32).astype(np.uint64) << np.uint64(32)) | np.asarray(a, np.uint32)
        n64 = n.astype(np.uint64)
        if "l" in flags:
            return ((v << n64) >> np.uint64(32)).astype(np.uint32)
        return ((v >> n64) & np.uint64(0xFFFFFFFF)).astype(np.uint32)

    return _simple(ins, cx, t, run, [TYPES["u32"]] * 3, TYPES["u32"])


_CMP = {
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
    "gt": np.greater, "ge": np.greater_equal, "lo": np.less, "ls": np.less_equal,
    "hi": np.greater, "hs": np.greater_equal,
}


def compare(cmp: str, t: PtxType):
    """``f(a, b) -> bool`` for a setp/set comparison on type ``t``."""
    if t.kind in ("f", "bf"):
        def conv(x):
            return fmath.to_compute(x, t)

        if cmp == "num":
            return lambda a, b: ~(np.isnan(conv(a)) | np.isnan(conv(b)))
        if cmp == "nan":
            return lambda a, b: np.isnan(conv(a)) | np.isnan(conv(b))
        unordered = cmp.endswith("u") and cmp[:-1] in _CMP
        f = _CMP[cmp[:-1] if unordered else cmp]
        if unordered:
            return lambda a, b: f(conv(a), conv(b)) | np.isnan(conv(a)) | np.isnan(conv(b))
        if cmp == "ne":
            return lambda a, b: (conv(a) != conv(b)) & ~(np.isnan(conv(a)) | np.isnan(conv(b)))
        return lambda a, b: f(conv(a), conv(b))
    if cmp in ("lo", "ls", "hi", "hs"):
        ut = TYPES[f"u{t.bits}"]
        return lambda a, b: _CMP[cmp](np.asarray(a).view(ut.np), np.asarray(b).view(ut.np))
    return _CMP[cmp]


@op("setp")
def build_setp(ins, cx):
    flags, types = mods_of(ins)
    boolop = next((f for f in ("and", "or", "xor") if f in flags), None)
    cmps = [f for f in flags if f not in ("and", "or", "xor", "ftz")]
    if len(types) != 1 or len(cmps) != 1:
        raise cx.error(f"unsupported instruction '{ins.opcode}' at line {ins.line}")
    t, cmp = types[0], cmps[0]
    f = compare(cmp, t)
    ops = ins.operands
    pred = TYPES["pred"]
    d = ops[0]
    dp = writer(cx, d.first if hasattr(d, "first") else d, pred)
    dq = writer(cx, d.second, pred) if hasattr(d, "second") else None
    a, b = reader(cx, ops[1], t), reader(cx, ops[2], t)
    c = reader(cx, ops[3], pred) if boolop else None
    comb = _BIT[boolop] if boolop else None

    def run(w, idx):
        r = np.asarray(f(a(w, idx), b(w, idx)))
        if comb is not None:
            cv = c(w, idx)
            dp(w, idx, comb(r, cv))
            if dq is not None:
                dq(w, idx, comb(~r, cv))
        else:
            dp(w, idx, r)
            if dq is not None:
                dq(w, idx, ~r)

    return Compiled(ins, run)


#: ``set``'s true value per destination type (packed: per 16-bit half)
_SET_TRUE = {"u32": 0xFFFFFFFF, "s32": 0xFFFFFFFF, "f32": 0x3F800000}
_SET_TRUE_HALF = {"u32": 0xFFFF, "s32": 0xFFFF, "f16x2": 0x3C00, "bf16x2": 0x3F80}


@op("set")
def build_set(ins, cx):
    """``set.<cmp>.<dtype>.<stype> d, a, b``: all ones (``.u32/.s32``) or 1.0 (``.f32``)
    where the comparison holds, else 0. A packed ``.f16x2``/``.bf16x2`` source compares
    each half on its own: 0xFFFF (``.u32/.s32``) or 1.0 (``.f16x2/.bf16x2``) in that half.
    The ``.bop`` forms with a predicate operand are not modelled (an error)."""
    flags, types = mods_of(ins)
    if len(types) != 2 or len(flags) != 1 or len(ins.operands) != 3:
        raise cx.error(f"unsupported instruction '{ins.opcode}' at line {ins.line}")
    (cmp,), (dst_t, src_t) = flags, types
    packed = src_t.name in ("f16x2", "bf16x2")
    table = _SET_TRUE_HALF if packed else _SET_TRUE
    if dst_t.name not in table:
        raise cx.error(f"unsupported instruction '{ins.opcode}' at line {ins.line}")
    one = table[dst_t.name]
    if packed:
        f = compare(cmp, TYPES["f16" if src_t.name == "f16x2" else "bf16"])

        def run(a, b):
            (a0, a1), (b0, b1) = fmath.split_f16x2(a, src_t), fmath.split_f16x2(b, src_t)
            lo = np.where(f(a0, b0), np.uint32(one), np.uint32(0))
            hi = np.where(f(a1, b1), np.uint32(one), np.uint32(0))
            return (lo | (hi << np.uint32(16))).astype(np.uint32)

        return _simple(ins, cx, TYPES["b32"], run)
    f = compare(cmp, src_t)
    return _simple(ins, cx, src_t, lambda a, b: np.where(f(a, b), np.uint32(one), np.uint32(0)),
                   dst_t=TYPES["b32"])


@op("selp")
def build_selp(ins, cx):
    _, t = _one_type(ins, cx)
    return _simple(ins, cx, t, lambda a, b, p: np.where(p, a, b), [t, t, TYPES["pred"]])


@op("slct")
def build_slct(ins, cx):
    flags, types = mods_of(ins)
    unsupported(cx, flags, {"ftz"})
    t, ct = types
    return _simple(ins, cx, t, lambda a, b, c: np.where(np.asarray(c) >= 0, a, b), [t, t, ct])


@op("testp")
def build_testp(ins, cx):
    flags, t = _one_type(ins, cx, {"finite", "infinite", "number", "notanumber", "normal",
                                   "subnormal"})
    (kind,) = flags
    f = {
        "finite": np.isfinite, "infinite": np.isinf, "notanumber": np.isnan,
        "number": lambda x: ~np.isnan(x),
        "normal": lambda x: np.isfinite(x) & (np.abs(x) >= np.finfo(x.dtype).tiny),
        "subnormal": lambda x: (np.abs(x) < np.finfo(x.dtype).tiny) & (x != 0),
    }[kind]
    return _simple(ins, cx, t, lambda a: f(np.asarray(a)), [t], TYPES["pred"])
