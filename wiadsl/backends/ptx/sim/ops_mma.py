"""Tensor-core ops: ``mma.sync.aligned.m16n8k{16,8}.row.col.{f32,f16}.{f16,bf16}...``
and ``ldmatrix.sync.aligned.m8n8.x{1,2,4}{.trans}.shared.b16``.

Fragment layouts (PTX ISA, "Matrix fragments for mma.m16n8k16"): with
``g = lane >> 2`` and ``t = lane & 3``, A element ``i`` (halves, two per register)
sits at row ``g + 8*((i>>1)&1)``, column ``2t + (i&1) + 8*(i>>2)``; B element ``i``
at row ``2t + (i&1) + 8*(i>>1)``, column ``g``; C/D element ``i`` at row
``g + 8*(i>>1)``, column ``2t + (i&1)``.  Products accumulate in float64 and
round once to the accumulator type.
"""

from __future__ import annotations

import numpy as np

from . import access
from .ast import Vec
from .dispatch import Compiled, op, unsupported
from .operands import mods_of, reader, writer
from .ops_warp import _halves, whole_warps
from .ptxtypes import TYPES

B32, F32 = TYPES["b32"], TYPES["f32"]


def _regs(cx, opnd, n, t, write=False):
    if not isinstance(opnd, Vec) or len(opnd.items) != n:
        raise cx.error(f"expected a vector of {n} registers, found {opnd}")
    return [(writer if write else reader)(cx, o, t) for o in opnd.items]


@op("mma")
def build_mma(ins, cx):
    flags, types = mods_of(ins)
    shape = next((f for f in ("m16n8k16", "m16n8k8") if f in flags), None)
    unsupported(cx, flags, {"m16n8k16", "m16n8k8", "row", "col"})
    if shape is None or "row" not in flags or "col" not in flags or len(types) != 4:
        raise cx.error(f"unsupported instruction '{ins.opcode}' at line {ins.line}")
    dt, at, bt, ct = (t.name for t in types)
    if at != bt or at not in ("f16", "bf16") or dt not in ("f32", "f16") or ct not in ("f32", "f16"):
        raise cx.error(f"unsupported instruction '{ins.opcode}' at line {ins.line}")
    if at == "bf16" and (dt != "f32" or ct != "f32"):
        raise cx.error(f"unsupported instruction '{ins.opcode}' at line {ins.line}")
    k = 16 if shape == "m16n8k16" else 8
    d_ops, a_ops, b_ops, c_ops = ins.operands
    na, nb = k // 4, k // 8
    acc_regs = 4 if dt == "f32" else 2
    ra = _regs(cx, a_ops, na, B32)
    rb = _regs(cx, b_ops, nb, B32)
    rc = _regs(cx, c_ops, 4 if ct == "f32" else 2, F32 if ct == "f32" else B32)
    wd = _regs(cx, d_ops, acc_regs, F32 if dt == "f32" else B32, write=True)
    lane = np.arange(32)
    g, tq = lane >> 2, lane & 3

    def run(w, idx):
        grid = whole_warps(w, access.lanes_of(w, idx), "mma.sync")
        nw = len(grid)
        flat = grid.reshape(-1)
        A = np.zeros((nw, 16, k))
        B = np.zeros((nw, k, 8))
        C = np.zeros((nw, 16, 8))
        for r, rd in enumerate(ra):
            for h, vals in enumerate(_halves(np.asarray(rd(w, flat)).reshape(nw, 32), at)):
                i = 2 * r + h
                A[:, g + 8 * ((i >> 1) & 1), 2 * tq + (i & 1) + 8 * (i >> 2)] = vals
        for r, rd in enumerate(rb):
            for h, vals in enumerate(_halves(np.asarray(rd(w, flat)).reshape(nw, 32), at)):
                i = 2 * r + h
                B[:, 2 * tq + (i & 1) + 8 * (i >> 1), g] = vals
        cvals = []
        if ct == "f32":
            cvals = [np.asarray(rd(w, flat), np.float32).reshape(nw, 32).astype(np.float64) for rd in rc]
        else:
            for rd in rc:
                cvals += list(_halves(np.asarray(rd(w, flat)).reshape(nw, 32), "f16"))
        for i, vals in enumerate(cvals):
            C[:, g + 8 * (i >> 1), 2 * tq + (i & 1)] = vals
        D = A @ B + C
        out = [D[:, g + 8 * (i >> 1), 2 * tq + (i & 1)].reshape(-1) for i in range(4)]
        if dt == "f32":
            for wr, v in zip(wd, out):
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
