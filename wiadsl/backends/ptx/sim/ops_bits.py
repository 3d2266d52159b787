"""Bit-manipulation ops: popc clz brev bfind bfe bfi prmt lop3 dp4a dp2a.

Invariant: bit positions and lengths clamp as the PTX ISA says (``bfe``/``bfi``
positions and lengths are taken modulo 256 and clamped to the width); results
that count bits are ``.u32``; ``bfind`` of 0 is 0xFFFFFFFF.
"""

from __future__ import annotations

import numpy as np

from . import fmath
from .dispatch import Compiled, op, unsupported
from .operands import mods_of, reader, writer
from .ops_logic import _one_type, _simple
from .ptxtypes import TYPES, UINT


def _popcount(u: np.ndarray) -> np.ndarray:
    u = np.asarray(u).astype(np.uint64)
    if hasattr(np, "bitwise_count"):
        return np.bitwise_count(u).astype(np.uint32)
    n = np.zeros(u.shape, np.uint32)
    for k in range(64):
        n += ((u >> np.uint64(k)) & np.uint64(1)).astype(np.uint32)
    return n


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
        return _simple(ins, cx, t, lambda a: _popcount(fmath.uview(a, bits)), dst_t=TYPES["u32"])
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
