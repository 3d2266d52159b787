"""Warp-collective ops: shfl.sync, vote.sync, activemask, redux.sync, bar.warp.sync,
mma.sync (m16n8k16 / m16n8k8, f16 and bf16 inputs, f32 or f16 accumulators) and
ldmatrix (m8n8 .x1/.x2/.x4, optional .trans).

Invariant: a lane named in ``membermask`` that has not exited must be executing
the same instruction in the same step (otherwise the warp has diverged: an
error); a shuffle that reads an inactive lane is an error; mma/ldmatrix need the
whole warp (32 existing lanes) converged.  Fragment layouts follow the PTX ISA.
"""

from __future__ import annotations

import numpy as np

from . import access
from .dispatch import Compiled, op, unsupported
from .errors import MemoryFault
from .operands import mods_of, reader, writer
from .ptxtypes import TYPES, bf16_to_f32
from .state import EXIT

U32, PRED = TYPES["u32"], TYPES["pred"]


def _executing(w, lanes) -> np.ndarray:
    ex = np.zeros(w.n, np.bool_)
    ex[lanes] = True
    return ex


def check_members(w, lanes, mask, what: str) -> np.ndarray:
    """Raise unless every live lane of ``mask`` executes; return the executing mask."""
    ex = _executing(w, lanes)
    mm = np.broadcast_to(np.asarray(mask, np.uint32), (len(lanes),))
    bits = ((mm[:, None] >> np.arange(32, dtype=np.uint32)) & 1).astype(bool)
    partner = w.warp_base[lanes][:, None] + np.arange(32)
    exists = partner < w.warp_end[lanes][:, None]
    pc = np.minimum(partner, w.n - 1)
    missing = bits & exists & (w.status[pc] != EXIT) & ~ex[pc]
    if missing.any():
        k, lane = np.argwhere(missing)[0]
        raise MemoryFault(f"{what}: lane {lane} of the warp is in membermask but is not "
                          f"executing this instruction (divergent warp)", int(lanes[k]))
    own = bits[np.arange(len(lanes)), w.lane_of_warp[lanes]]
    if not own.all():
        k = int(np.flatnonzero(~own)[0])
        raise MemoryFault(f"{what}: executing lane is not in its own membermask", int(lanes[k]))
    return ex


@op("shfl")
def build_shfl(ins, cx):
    flags, types = mods_of(ins)
    modes = [m for m in ("up", "down", "bfly", "idx") if m in flags]
    unsupported(cx, flags, {"up", "down", "bfly", "idx"})
    if "sync" not in ins.mods or len(modes) != 1 or len(ins.operands) != 5:
        raise cx.error(f"unsupported instruction '{ins.opcode}' at line {ins.line}")
    mode = modes[0]
    t = types[0]
    d = ins.operands[0]
    dw = writer(cx, d.first if hasattr(d, "first") else d, t)
    pw = writer(cx, d.second, PRED) if hasattr(d, "second") else None
    a = reader(cx, ins.operands[1], t)
    b, c, m = (reader(cx, o, U32) for o in ins.operands[2:])

    def run(w, idx):
        lanes = access.lanes_of(w, idx)
        ex = check_members(w, lanes, m(w, idx), "shfl.sync")
        lane = w.lane_of_warp[lanes]
        bval = np.asarray(b(w, idx), np.int64) & 31
        cv = np.asarray(c(w, idx), np.int64)
        cval, seg = cv & 31, (cv >> 8) & 31
        max_lane = (lane & seg) | (cval & ~seg)
        min_lane = lane & seg
        if mode == "up":
            j = lane - bval
            ok = j >= max_lane
        elif mode == "down":
            j = lane + bval
            ok = j <= max_lane
        elif mode == "bfly":
            j = lane ^ bval
            ok = j <= max_lane
        else:
            j = min_lane | (bval & ~seg)
            ok = j <= max_lane
        j = np.where(ok, j, lane)
        src = w.warp_base[lanes] + j
        valid = (src < w.warp_end[lanes]) & ex[np.minimum(src, w.n - 1)]
        if not valid.all():
            k = int(np.flatnonzero(~valid)[0])
            raise MemoryFault(f"shfl.sync reads lane {int(j[k])}, which is not executing",
                              int(lanes[k]))
        dw(w, idx, np.broadcast_to(a(w, src), (len(lanes),)).copy())
        if pw is not None:
            pw(w, idx, ok)

    return Compiled(ins, run)


def _warp_reduce(w, lanes, values, ufunc, init):
    """Per-lane result of reducing ``values`` over the executing lanes of each warp."""
    acc = np.full(w.n, init, dtype=values.dtype)
    ufunc.at(acc, w.warp_base[lanes], values)
    return acc[w.warp_base[lanes]]


@op("vote", "activemask")
def build_vote(ins, cx):
    flags, types = mods_of(ins)
    if ins.op == "activemask":
        dst = writer(cx, ins.operands[0], U32)

        def active(w, idx):
            lanes = access.lanes_of(w, idx)
            bit = np.uint64(1) << w.lane_of_warp[lanes].astype(np.uint64)
            dst(w, idx, _warp_reduce(w, lanes, bit, np.bitwise_or, np.uint64(0)).astype(np.uint32))

        return Compiled(ins, active)
    mode = next((f for f in ("all", "any", "uni", "ballot") if f in flags), None)
    unsupported(cx, flags, {"all", "any", "uni", "ballot"})
    if mode is None or "sync" not in ins.mods:
        raise cx.error(f"unsupported instruction '{ins.opcode}' at line {ins.line}")
    p = reader(cx, ins.operands[1], PRED)
    m = reader(cx, ins.operands[2], U32)
    dst = writer(cx, ins.operands[0], U32 if mode == "ballot" else PRED)

    def run(w, idx):
        lanes = access.lanes_of(w, idx)
        mask = np.broadcast_to(np.asarray(m(w, idx), np.uint64), (len(lanes),))
        check_members(w, lanes, mask, "vote.sync")
        bit = np.uint64(1) << w.lane_of_warp[lanes].astype(np.uint64)
        pv = np.broadcast_to(p(w, idx), (len(lanes),))
        ballot = _warp_reduce(w, lanes, np.where(pv, bit, np.uint64(0)), np.bitwise_or, np.uint64(0))
        act = _warp_reduce(w, lanes, bit, np.bitwise_or, np.uint64(0))
        ballot, act = ballot & mask, act & mask
        if mode == "ballot":
            dst(w, idx, ballot.astype(np.uint32))
        elif mode == "any":
            dst(w, idx, ballot != 0)
        elif mode == "all":
            dst(w, idx, ballot == act)
        else:
            dst(w, idx, (ballot == 0) | (ballot == act))

    return Compiled(ins, run)


@op("redux")
def build_redux(ins, cx):
    flags, types = mods_of(ins)
    red = next((f for f in ("add", "min", "max", "and", "or", "xor") if f in flags), None)
    unsupported(cx, flags, {"add", "min", "max", "and", "or", "xor"})
    t = types[0]
    if red is None or t.is_float:
        raise cx.error(f"unsupported instruction '{ins.opcode}' at line {ins.line}")
    a, m = reader(cx, ins.operands[1], t), reader(cx, ins.operands[2], U32)
    dst = writer(cx, ins.operands[0], t)
    wide = np.int64 if t.kind == "s" else np.uint64
    uf, init = {"add": (np.add, 0), "min": (np.minimum, np.iinfo(wide).max),
                "max": (np.maximum, np.iinfo(wide).min), "and": (np.bitwise_and, ~wide(0)),
                "or": (np.bitwise_or, 0), "xor": (np.bitwise_xor, 0)}[red]

    def run(w, idx):
        lanes = access.lanes_of(w, idx)
        check_members(w, lanes, m(w, idx), "redux.sync")
        v = np.broadcast_to(np.asarray(a(w, idx)).astype(wide), (len(lanes),))
        r = _warp_reduce(w, lanes, v, uf, wide(init))
        dst(w, idx, (r.astype(np.uint64) & np.uint64(0xFFFFFFFF)).astype(np.uint32).view(t.np))

    return Compiled(ins, run)


def build_warp_sync(ins, cx):
    """``bar.warp.sync membermask`` (``__syncwarp``): a convergence check."""
    m = reader(cx, ins.operands[0], U32)

    def run(w, idx):
        check_members(w, access.lanes_of(w, idx), m(w, idx), "bar.warp.sync")

    return Compiled(ins, run)


def whole_warps(w, lanes, what: str) -> np.ndarray:
    """Lanes as [warps, 32] (each row one full converged warp) or an error."""
    lanes = np.sort(lanes)
    if len(lanes) % 32 == 0:
        grid = lanes.reshape(-1, 32)
        if (w.lane_of_warp[grid] == np.arange(32)).all() and (w.warp_end[grid[:, 0]] - grid[:, 0] == 32).all():
            return grid
    raise MemoryFault(f"{what} needs all 32 lanes of the warp converged", int(lanes[0]))


def _halves(u32: np.ndarray, kind: str) -> tuple[np.ndarray, np.ndarray]:
    u = np.asarray(u32, np.uint32)
    lo, hi = (u & np.uint32(0xFFFF)).astype(np.uint16), (u >> np.uint32(16)).astype(np.uint16)
    if kind == "f16":
        return lo.view(np.float16).astype(np.float64), hi.view(np.float16).astype(np.float64)
    return bf16_to_f32(lo).astype(np.float64), bf16_to_f32(hi).astype(np.float64)
