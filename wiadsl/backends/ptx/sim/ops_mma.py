"""Tensor-core ops: ``mma.sync.aligned.{shape}.row.col.{dtype}.{atype}.{btype}.{ctype}`` and
``ldmatrix.sync.aligned.m8n8.x{1,2,4}{.trans}.shared.b16``.

Shapes and types (PTX ISA 9.7.14.5, "Matrix fragments for mma.m16n8k*"):

| shape | A/B types | C/D types | A, B registers |
| --- | --- | --- | --- |
| ``m16n8k16`` | ``f16``, ``bf16`` | ``f32`` (``f16`` for f16) | 4, 2 (two halves each) |
| ``m16n8k8`` | ``f16``, ``bf16`` | ``f32`` (``f16`` for f16) | 2, 1 (two halves each) |
| ``m16n8k8`` | ``tf32`` | ``f32`` | 4, 2 (one element each) |
| ``m16n8k32`` | ``s8``, ``u8`` (A and B may differ) | ``s32`` | 4, 2 (four bytes each) |

With ``g = lane >> 2`` and ``t = lane & 3``, element ``i`` of a fragment (numbered low
to high through its registers, the lowest bits of a register first) sits at:

- A, 16-bit: row ``g + 8*((i>>1)&1)``, column ``2t + (i&1) + 8*(i>>2)``;
  B, 16-bit: row ``2t + (i&1) + 8*(i>>1)``, column ``g``;
- A, tf32: row ``g + 8*(i&1)``, column ``t + 4*(i>>1)``; B, tf32: row ``t + 4i``, column ``g``;
- A, 8-bit: row ``g + 8*((i>>2)&1)``, column ``4t + (i&3) + 16*(i>>3)``;
  B, 8-bit: row ``4t + (i&3) + 16*(i>>2)``, column ``g``;
- C/D (every shape): row ``g + 8*(i>>1)``, column ``2t + (i&1)``.

Floating-point products accumulate in float64 and round once to the accumulator type
(the ISA leaves the order and rounding unspecified). A ``.tf32`` operand register holds
an f32 bit pattern of which the hardware reads the sign, exponent and top 10 mantissa
bits: the low 13 bits are ignored here too (``cvt.rna.tf32.f32`` clears them). Integer
products are exact (int64) and the s32 result wraps, or saturates with ``.satfinite``.
"""

from __future__ import annotations

import numpy as np

from . import access
from .ast import Vec
from .dispatch import Compiled, op, unsupported
from .operands import mods_of, reader, writer
from .ops_warp import _halves, whole_warps
from .ptxtypes import TYPES


def _regs(cx, opnd, n, t, write=False):
    if not isinstance(opnd, Vec) or len(opnd.items) != n:
        raise cx.error(f"expected a vector of {n} registers, found {opnd}")
    return [(writer if write else reader)(cx, o, t) for o in opnd.items]


B32, F32, S32 = TYPES["b32"], TYPES["f32"], TYPES["s32"]
LANE = np.arange(32)
G, TQ = LANE >> 2, LANE & 3

#: (shape, operand kind) -> (A registers, B registers, k)
SHAPES = {("m16n8k16", "half"): (4, 2, 16), ("m16n8k8", "half"): (2, 1, 8),
          ("m16n8k8", "tf32"): (4, 2, 8), ("m16n8k32", "int8"): (4, 2, 32)}
KINDS = {"f16": "half", "bf16": "half", "tf32": "tf32", "s8": "int8", "u8": "int8"}


def _a_pos(kind: str, i: int) -> tuple[np.ndarray, np.ndarray]:
    """(row, column) per lane of A fragment element ``i`` (module docstring)."""
    if kind == "half":
        return G + 8 * ((i >> 1) & 1), 2 * TQ + (i & 1) + 8 * (i >> 2)
    if kind == "tf32":
        return G + 8 * (i & 1), TQ + 4 * (i >> 1)
    return G + 8 * ((i >> 2) & 1), 4 * TQ + (i & 3) + 16 * (i >> 3)


def _b_pos(kind: str, i: int) -> tuple[np.ndarray, np.ndarray]:
    if kind == "half":
        return 2 * TQ + (i & 1) + 8 * (i >> 1), G
    if kind == "tf32":
        return TQ + 4 * i, G
    return 4 * TQ + (i & 3) + 16 * (i >> 2), G


def elements(u32: np.ndarray, t: str) -> list[np.ndarray]:
    """The elements of type ``t`` (f16, bf16, tf32, s8, u8) packed in b32 values, lowest
    bits first (float64 or int64); a tf32 element ignores its low 13 mantissa bits."""
    u = np.asarray(u32, np.uint32)
    if t in ("f16", "bf16"):
        return list(_halves(u, t))
    if t == "tf32":
        return [(u & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)]
    parts = [((u >> np.uint32(8 * q)) & np.uint32(0xFF)).astype(np.uint8) for q in range(4)]
    return [p.view(np.int8).astype(np.int64) if t == "s8" else p.astype(np.int64) for p in parts]


def _mma_types(ins, cx, flags, types):
    """(shape, kind, dtype, atype, btype, ctype) of a supported mma, else an error."""
    bad = cx.error(f"unsupported instruction '{ins.opcode}' at line {ins.line}")
    shape = next((f for f in ("m16n8k16", "m16n8k8", "m16n8k32") if f in flags), None)
    if shape is None or "row" not in flags or "col" not in flags or len(types) != 4:
        raise bad
    dt, at, bt, ct = (t.name for t in types)
    kind = KINDS.get(at)
    if kind is None or KINDS.get(bt) != kind or (shape, kind) not in SHAPES:
        raise bad
    if kind == "int8":
        ok = dt == ct == "s32"
    else:
        ok = at == bt and (dt, ct) in (("f32", "f32"), ("f16", "f16"), ("f16", "f32"), ("f32", "f16"))
        ok = ok and (at == "f16" or dt == ct == "f32")
    if not ok or ("satfinite" in flags and kind != "int8"):
        raise bad
    return shape, kind, dt, at, bt, ct


@op("mma")
def build_mma(ins, cx):
    flags, types = mods_of(ins)
    unsupported(cx, flags, {"m16n8k16", "m16n8k8", "m16n8k32", "row", "col", "satfinite"})
    shape, kind, dt, at, bt, ct = _mma_types(ins, cx, flags, types)
    na, nb, k = SHAPES[(shape, kind)]
    d_ops, a_ops, b_ops, c_ops = ins.operands
    acc_t = {"f32": F32, "s32": S32, "f16": B32}
    ra = _regs(cx, a_ops, na, B32)
    rb = _regs(cx, b_ops, nb, B32)
    rc = _regs(cx, c_ops, 2 if ct == "f16" else 4, acc_t[ct])
    wd = _regs(cx, d_ops, 2 if dt == "f16" else 4, acc_t[dt], write=True)
    exact = kind == "int8"

    def run(w, idx):
        grid = whole_warps(w, access.lanes_of(w, idx), "mma.sync")
        nw = len(grid)
        flat = grid.reshape(-1)
        num = np.int64 if exact else np.float64
        A, B, C = np.zeros((nw, 16, k), num), np.zeros((nw, k, 8), num), np.zeros((nw, 16, 8), num)
        per_a = len(elements(np.zeros(1, np.uint32), at))
        for r, rd in enumerate(ra):
            for h, vals in enumerate(elements(np.asarray(rd(w, flat)).reshape(nw, 32), at)):
                A[(slice(None), *_a_pos(kind, per_a * r + h))] = vals
        per_b = len(elements(np.zeros(1, np.uint32), bt))
        for r, rd in enumerate(rb):
            for h, vals in enumerate(elements(np.asarray(rd(w, flat)).reshape(nw, 32), bt)):
                B[(slice(None), *_b_pos(kind, per_b * r + h))] = vals
        if ct == "f16":
            cvals = [v for rd in rc for v in _halves(np.asarray(rd(w, flat)).reshape(nw, 32), "f16")]
        else:
            cvals = [np.asarray(rd(w, flat), acc_t[ct].np).reshape(nw, 32).astype(num) for rd in rc]
        for i, vals in enumerate(cvals):
            C[:, G + 8 * (i >> 1), 2 * TQ + (i & 1)] = vals
        D = np.einsum("wmk,wkn->wmn", A, B) + C
        out = [D[:, G + 8 * (i >> 1), 2 * TQ + (i & 1)].reshape(-1) for i in range(4)]
        if dt == "s32":
            for wr, v in zip(wd, out, strict=True):
                if "satfinite" in flags:
                    v = np.clip(v, -2**31, 2**31 - 1)
                wr(w, flat, (v & 0xFFFFFFFF).astype(np.uint32).view(np.int32))
        elif dt == "f32":
            for wr, v in zip(wd, out, strict=True):
                wr(w, flat, v.astype(np.float32))
        else:
            h = [v.astype(np.float16).view(np.uint16).astype(np.uint32) for v in out]
            wd[0](w, flat, h[0] | (h[1] << np.uint32(16)))
            wd[1](w, flat, h[2] | (h[3] << np.uint32(16)))

    return Compiled(ins, run)


@op("ldmatrix")
def build_ldmatrix(ins, cx):
    flags, types = mods_of(ins)
    space = access.space_of(flags)
    num = next((int(f[1:]) for f in ("x1", "x2", "x4") if f in flags), None)
    trans = "trans" in flags
    unsupported(cx, flags, {"m8n8", "x1", "x2", "x4", "trans"})
    if num is None or "m8n8" not in flags or space not in ("shared", "generic"):
        raise cx.error(f"unsupported instruction '{ins.opcode}' at line {ins.line}")
    wd = _regs(cx, ins.operands[0], num, B32, write=True)
    addr = access.address(cx, ins.operands[1])
    lane = np.arange(32)
    u16 = TYPES["u16"]

    def run(w, idx):
        grid = whole_warps(w, access.lanes_of(w, idx), "ldmatrix")
        nw = len(grid)
        flat = grid.reshape(-1)
        src = grid[:, : 8 * num].reshape(-1)
        a = addr(w, flat).reshape(nw, 32)[:, : 8 * num].reshape(-1)
        rows = access.load(w, space, a, src, u16, 8).reshape(nw, num, 8, 8)
        for j, wr in enumerate(wd):
            m = rows[:, j]
            if trans:
                lo, hi = m[:, 2 * (lane & 3), lane >> 2], m[:, 2 * (lane & 3) + 1, lane >> 2]
            else:
                lo, hi = m[:, lane >> 2, 2 * (lane & 3)], m[:, lane >> 2, 2 * (lane & 3) + 1]
            wr(w, flat, (lo.astype(np.uint32) | (hi.astype(np.uint32) << np.uint32(16))).reshape(-1))

    return Compiled(ins, run)
