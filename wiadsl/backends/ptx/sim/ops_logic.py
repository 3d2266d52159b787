"""Bitwise, comparison and bit-manipulation ops: and or xor not cnot shl shr shf,
setp selp slct, popc clz brev bfe bfi bfind prmt lop3 dp4a dp2a testp.

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
        conv = (lambda x: fmath.to_compute(x, t))
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


def _popc(u: np.ndarray, bits: int) -> np.ndarray:
    u = np.asarray(u).astype(np.uint64)
    return np.bitwise_count(u).astype(np.uint32)


@op("popc", "clz", "brev", "bfind")
def build_bitcount(ins, cx):
    flags, t = _one_type(ins, cx, {"shiftamt"})
    bits = t.bits

    def clz(a):
        u = fmath.uview(a, bits).astype(np.uint64)
        n = np.full(np.shape(u), bits, np.uint32)
        for k in range(bits):
            n = np.where((n == bits) & ((u >> np.uint64(bits - 1 - k)) & np.uint64(1)).astype(bool),
                         np.uint32(k), n)
        return n

    def brev(a):
        u = fmath.uview(a, bits)
        r = np.zeros_like(u)
        for k in range(bits):
            r |= ((u >> UINT[bits](k)) & UINT[bits](1)) << UINT[bits](bits - 1 - k)
        return fmath.typed(r, t)

    def bfind(a):
        v = np.asarray(a)
        u = fmath.uview(np.where(v < 0, ~v, v) if t.kind == "s" else v, bits)
        pos = bits - 1 - clz(fmath.typed(u, TYPES[f"u{bits}"]).astype(np.int64)).astype(np.int64)
        res = np.where(u == 0, 0xFFFFFFFF, (bits - 1 - pos) if "shiftamt" in flags else pos)
        return res.astype(np.int64).astype(np.uint32)

    if ins.op == "popc":
        return _simple(ins, cx, t, lambda a: _popc(fmath.uview(a, bits), bits), dst_t=TYPES["u32"])
    if ins.op == "clz":
        return _simple(ins, cx, t, clz, dst_t=TYPES["u32"])
    if ins.op == "bfind":
        return _simple(ins, cx, t, bfind, dst_t=TYPES["u32"])
    return _simple(ins, cx, t, brev)


@op("bfe")
def build_bfe(ins, cx):
    _, t = _one_type(ins, cx)
    bits = t.bits

    def run(a, b, c):
        pos = np.minimum(np.asarray(b, np.uint32) & np.uint32(0xFF), bits).astype(np.int64)
        ln = np.minimum(np.asarray(c, np.uint32) & np.uint32(0xFF), bits).astype(np.int64)
        u = fmath.uview(a, bits).astype(np.uint64)
        field = (u >> np.minimum(pos, 63).astype(np.uint64)) * (pos < bits)
        mask = np.where(ln >= 64, ~np.uint64(0), (np.uint64(1) << ln.astype(np.uint64)) - np.uint64(1))
        field = field & mask
        if t.kind == "s":
            top = np.minimum(pos + ln - 1, bits - 1).astype(np.uint64)
            sbit = (u >> top) & np.uint64(1)
            fill = np.where((sbit == 1) & (ln > 0), ~mask, np.uint64(0))
            field = np.where(ln == 0, np.uint64(0), field | fill)
        return fmath.typed(field.astype(UINT[bits]), t)

    return _simple(ins, cx, t, run, [t, TYPES["u32"], TYPES["u32"]])


@op("bfi")
def build_bfi(ins, cx):
    _, t = _one_type(ins, cx)
    bits = t.bits

    def run(a, b, c, d):
        pos = np.minimum(np.asarray(c, np.uint32) & np.uint32(0xFF), bits).astype(np.uint64)
        ln = np.minimum(np.asarray(d, np.uint32) & np.uint32(0xFF), bits).astype(np.uint64)
        mask = np.where(ln >= 64, ~np.uint64(0), (np.uint64(1) << ln) - np.uint64(1))
        mask = np.where(pos >= bits, np.uint64(0), mask << np.minimum(pos, np.uint64(63)))
        ua, ub = fmath.uview(a, bits).astype(np.uint64), fmath.uview(b, bits).astype(np.uint64)
        r = (ub & ~mask) | ((ua << np.minimum(pos, np.uint64(63))) & mask)
        return fmath.typed(r.astype(UINT[bits]), t)

    return _simple(ins, cx, t, run, [t, t, TYPES["u32"], TYPES["u32"]])


@op("prmt")
def build_prmt(ins, cx):
    flags, t = _one_type(ins, cx)
    if flags:
        raise cx.error(f"unsupported instruction '{ins.opcode}' at line {ins.line}")

    def run(a, b, c):
        v = (np.asarray(b, np.uint32).astype(np.uint64) << np.uint64(32)) | np.asarray(a, np.uint32)
        sel = np.asarray(c, np.uint32)
        out = np.zeros(np.broadcast(v, sel).shape, np.uint32)
        for k in range(4):
            s = ((sel >> np.uint32(4 * k)) & np.uint32(0xF)).astype(np.uint64)
            byte = (v >> ((s & np.uint64(7)) * np.uint64(8))) & np.uint64(0xFF)
            byte = np.where(s & np.uint64(8), np.where(byte & np.uint64(0x80), 0xFF, 0), byte)
            out |= byte.astype(np.uint32) << np.uint32(8 * k)
        return out

    return _simple(ins, cx, t, run, [TYPES["u32"]] * 3, TYPES["u32"])


@op("lop3")
def build_lop3(ins, cx):
    _, t = _one_type(ins, cx)
    if len(ins.operands) != 5:
        raise cx.error("lop3 takes 5 operands")
    lut = int(ins.operands[4].value)
    a, b, c = (reader(cx, o, t) for o in ins.operands[1:4])
    dst = writer(cx, ins.operands[0], t)

    def run(w, idx):
        x, y, z = (fmath.uview(r(w, idx), 32) for r in (a, b, c))
        res = np.zeros(np.broadcast(x, y, z).shape, np.uint32)
        for k in range(8):
            if lut >> k & 1:
                ta = x if k & 4 else ~x
                tb = y if k & 2 else ~y
                tc = z if k & 1 else ~z
                res |= ta & tb & tc
        dst(w, idx, fmath.typed(res, t))

    return Compiled(ins, run)


@op("dp4a", "dp2a")
def build_dp(ins, cx):
    flags, types = mods_of(ins)
    unsupported(cx, flags, {"lo", "hi"})
    ta, tb = types
    n = 4 if ins.op == "dp4a" else 2

    def lanes(x, t, width):
        u = np.asarray(x, np.uint32)
        out = []
        for k in range(32 // width if width == 8 else 2):
            v = (u >> np.uint32(width * k)) & np.uint32((1 << width) - 1)
            v = v.astype(np.int64)
            if t.kind == "s":
                v = np.where(v >= 1 << (width - 1), v - (1 << width), v)
            out.append(v)
        return out

    def run(a, b, c):
        if n == 4:
            xa, xb = lanes(a, ta, 8), lanes(b, tb, 8)
        else:
            xa = lanes(a, ta, 16)
            xb = lanes(b, tb, 8)[2:] if "hi" in flags else lanes(b, tb, 8)[:2]
        acc = np.asarray(c).astype(np.int64)
        for p, q in zip(xa, xb):
            acc = acc + p * q
        return (acc & 0xFFFFFFFF).astype(np.uint32).view(TYPES["s32"].np if "s" in (ta.kind, tb.kind)
                                                           else np.uint32)

    dt = TYPES["s32"] if "s" in (ta.kind, tb.kind) else TYPES["u32"]
    return _simple(ins, cx, dt, run, [TYPES["b32"], TYPES["b32"], dt], dt)


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
