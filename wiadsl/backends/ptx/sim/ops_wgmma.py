"""Warpgroup MMA: ``wgmma.fence / commit_group / wait_group`` and
``wgmma.mma_async.sync.aligned.m64nNkK`` with both operands in shared memory
(64-bit matrix descriptors): ``.f32|.f16 .f16.f16`` and ``.f32.bf16.bf16`` (k16),
``.f32.tf32.tf32`` (k8), ``.s32.s8.s8`` (k32, optional ``.satfinite``).

Matrix descriptor (ISA "Matrix Descriptor Format", CUTLASS ``GmmaDescriptor``):
bits 0-13 start address >> 4, 16-29 leading-dimension byte offset (LBO) >> 4, 32-45
stride-dimension byte offset (SBO) >> 4, 49-51 base offset, 62-63 swizzle (0 none,
1 128B, 2 64B, 3 32B); the other bits are reserved (must be 0 here).  With T the
16-byte unit (8 halves, 4 tf32, 16 bytes) and W the swizzle width in units (1, 2, 4,
8), an operand of MN rows and K columns sits at (CUTLASS ``make_gmma_desc``'s
canonical layouts, in units; element e of a unit at byte 2e/4e/e):

| major | no swizzle | swizzled |
| --- | --- | --- |
| K (``imm-trans`` 0) | ((8,m),2):((1,SBO),LBO) | ((8,m),2):((W,SBO),1) |
| MN (``imm-trans`` 1, 16-bit only) | ((1,m),(8,k)):((-,SBO),(1,LBO)) | ((W,m),(8,k)):((1,LBO),(W,SBO)) |

and a swizzled address is then permuted as ``tensormap.swizzle`` (bits 4.. XOR bits
7..).  A base offset other than 0 is not simulated (an error).  A is 64 x K, B is
N x K (B's columns are its rows here), both ``imm-scale`` -1 negate, ``scale-d`` 0
ignores D's old value.  Accumulator fragment (ISA "Register Fragments", m64nNk16):
thread ``l`` of warp ``wi`` of the warpgroup holds D value ``i`` at row
``16*wi + l/4 + 8*((i/2)%2)``, column ``8*(i/4) + 2*(l%4) + i%2`` (f16 D: two values
per register, low half first).  Products are summed exactly (float64 / int64) and
rounded once to D's type; tf32 inputs are f32 with the low 13 mantissa bits ignored.

Invariants: every wgmma instruction runs on whole warpgroups (128 threads of 4
aligned warps, converged) with uniform descriptors and immediates; results go to
the registers only at the ``wait_group`` that retires their group (``wgmma.py``);
the shared-memory reads are the warpgroup's wgmma agent's (``tracker.py``), issued
now and complete at that ``wait_group``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from . import access
from .ast import Imm, Name, Vec
from .dispatch import Compiled, op, unsupported
from .errors import MemoryFault
from .operands import reader
from .ops_mma import elements
from .ptxtypes import TYPES
from .tensormap import swizzle
from .wgmma import state

U64, PRED, U32 = TYPES["u64"], TYPES["pred"], TYPES["u32"]
_SHAPE = re.compile(r"m64n(\d+)k(\d+)")
#: (D type, A/B type) -> (k, element bytes)
_KINDS = {("f32", "f16"): (16, 2), ("f16", "f16"): (16, 2), ("f32", "bf16"): (16, 2),
          ("f32", "tf32"): (8, 4), ("s32", "s8"): (32, 1)}
_N_S8 = {8, 16, 24, *range(32, 257, 16)}
#: descriptor swizzle field -> (width in 16-byte units, ``tensormap.swizzle`` mode)
_DESC_SWIZZLE = {0: (1, 0), 1: (8, 3), 2: (4, 2), 3: (2, 1)}
_RESERVED = (0b11 << 14) | (0b11 << 30) | (0b111 << 46) | (0x3FF << 52)


def whole_warpgroups(w, lanes: np.ndarray, what: str) -> np.ndarray:
    """Lanes as [warpgroups, 128], each row one whole converged warpgroup, or an error."""
    lanes = np.sort(lanes)
    if len(lanes) % 128 == 0:
        grid = lanes.reshape(-1, 128)
        t0 = w.tlin[grid[:, 0]]
        if (t0 % 128 == 0).all() and (w.tlin[grid] == t0[:, None] + np.arange(128)).all() \
                and (w.block_of_lane[grid] == w.block_of_lane[grid[:, :1]]).all():
            return grid
    raise MemoryFault(f"{what} needs all 128 threads of the warpgroup converged (.sync.aligned)",
                      int(lanes[0]))


@op("wgmma")
def build_wgmma(ins, cx):
    kind = ins.mods[0] if ins.mods else ""
    flags = set(ins.mods[1:])
    if kind == "fence":
        unsupported(cx, flags, set())
        return Compiled(ins, _fence)
    if kind == "commit_group":
        unsupported(cx, flags, set())
        return Compiled(ins, _commit)
    if kind == "wait_group":
        unsupported(cx, flags, set())
        if len(ins.operands) != 1 or not isinstance(ins.operands[0], Imm):
            raise cx.error("wgmma.wait_group needs one integer constant")
        keep = int(ins.operands[0].value)
        return Compiled(ins, lambda w, idx: _wait(w, idx, keep))
    if kind == "mma_async":
        return _build_mma(ins, cx)
    raise cx.error(f"unsupported instruction '{ins.opcode}' at line {ins.line}")


def _fence(w, idx):
    grid = whole_warpgroups(w, access.lanes_of(w, idx), "wgmma.fence")
    state(w).fenced[grid.reshape(-1)] = True


def _commit(w, idx):
    grid = whole_warpgroups(w, access.lanes_of(w, idx), "wgmma.commit_group")
    state(w).opened[grid.reshape(-1)] += 1


def _wait(w, idx, keep: int):
    grid = whole_warpgroups(w, access.lanes_of(w, idx), "wgmma.wait_group")
    st = state(w)
    flat = grid.reshape(-1)
    st.retire(w, flat, keep)
    tracker = w.shared.tracker if w.shared is not None else None
    if tracker is None:
        return
    for g in grid:
        row, wg = int(w.block_of_lane[g[0]]), int(w.tlin[g[0]]) // 128
        done = int(st.opened[g[0]]) - keep  # groups 0..done-1 complete: agent clocks <= done
        for warp in range(4 * wg, 4 * wg + 4):
            tracker.acquire_agent(row, warp, tracker.wgmma_agent(wg), done)


def _imm(cx, opnd, allowed: tuple[int, ...], what: str) -> int:
    if not isinstance(opnd, Imm) or opnd.kind != "int" or opnd.value not in allowed:
        raise cx.error(f"wgmma {what} must be one of {allowed}, got {opnd}")
    return int(opnd.value)


def _build_mma(ins, cx):
    mods = list(ins.mods[1:])
    flags = {m for m in mods if m not in TYPES and m != "tf32"}
    shape = next((f for f in flags if _SHAPE.fullmatch(f)), None)
    sat = "satfinite" in flags
    unsupported(cx, flags - {shape}, {"satfinite"})
    types = [m for m in mods if m in TYPES or m == "tf32"]
    if shape is None or len(types) != 3 or types[1] != types[2]:
        raise cx.error(f"unsupported instruction '{ins.opcode}' at line {ins.line}")
    n, k = (int(v) for v in _SHAPE.fullmatch(shape).groups())  # type: ignore[union-attr]
    dt, ab = types[0], types[1]
    if (dt, ab) not in _KINDS or _KINDS[(dt, ab)][0] != k or sat and dt != "s32":
        raise cx.error(f"unsupported instruction '{ins.opcode}' at line {ins.line}")
    if n % 8 or not 8 <= n <= 256 or (ab == "s8" and n not in _N_S8):
        raise cx.error(f"wgmma shape {shape}: N must be a multiple of 8 (16 above 32 for s8) "
                       f"in 8..256")
    esize = _KINDS[(dt, ab)][1]
    ops = ins.operands
    nops = {"f16": 8, "bf16": 8, "tf32": 6, "s8": 4}[ab]
    nregs = n // 4 if dt == "f16" else n // 2
    if len(ops) != nops or not isinstance(ops[0], Vec) or len(ops[0].items) != nregs:
        raise cx.error(f"'{ins.opcode}' takes {{{nregs} registers}}, a-desc, b-desc, scale-d"
                       + (", imm-scale-a, imm-scale-b" if nops > 4 else "")
                       + (", imm-trans-a, imm-trans-b" if nops > 6 else ""))
    dregs = []
    for item in ops[0].items:
        if not isinstance(item, Name) or item.name not in cx.reg_types \
                or cx.reg_types[item.name].bits != 32:
            raise cx.error(f"wgmma accumulator {item} is not a 32-bit register")
        dregs.append(item.name)
    da, db = reader(cx, ops[1], U64), reader(cx, ops[2], U64)
    scale_d = reader(cx, ops[3], PRED) if isinstance(ops[3], Name) else None
    scale_d_imm = _imm(cx, ops[3], (0, 1), "scale-d") if scale_d is None else 1
    sa = _imm(cx, ops[4], (1, -1), "imm-scale-a") if nops > 4 else 1
    sb = _imm(cx, ops[5], (1, -1), "imm-scale-b") if nops > 4 else 1
    ta = _imm(cx, ops[6], (0, 1), "imm-trans-a") if nops > 6 else 0
    tb = _imm(cx, ops[7], (0, 1), "imm-trans-b") if nops > 6 else 0
    lane = np.arange(128)
    vals = np.arange(n // 2)
    rowi = (16 * (lane // 32) + (lane % 32) // 4)[:, None] + 8 * ((vals >> 1) & 1)[None, :]
    coli = (2 * (lane % 4))[:, None] + (8 * (vals >> 2) + (vals & 1))[None, :]
    spec = _Spec(n, k, esize, ab, dt, sat, sa, sb, ta, tb)

    def run(w, idx):
        lanes = access.lanes_of(w, idx)
        grid = whole_warpgroups(w, lanes, "wgmma.mma_async")
        st = state(w)
        flat = grid.reshape(-1)
        if not st.fenced[flat].all():
            lane0 = int(flat[np.flatnonzero(~st.fenced[flat])[0]])
            raise MemoryFault("wgmma.mma_async without a wgmma.fence since the warpgroup last "
                              "accessed its registers (needed before the first wgmma and after "
                              "any other access to the accumulators)", lane0)
        descs = [_uniform(np.asarray(r(w, idx), np.uint64), lanes, grid, what)
                 for r, what in ((da, "a-desc"), (db, "b-desc"))]
        if scale_d is not None:
            keep = _uniform(scale_d(w, idx), lanes, grid, "scale-d").astype(bool)
        else:
            keep = np.full(len(grid), bool(scale_d_imm))
        for g, row in enumerate(grid):
            a = _operand(w, row, int(descs[0][g]), 64, spec, spec.ta, "A")
            b = _operand(w, row, int(descs[1][g]), n, spec, spec.tb, "B")
            d = _product(a, b, spec)
            old = [st.value(w, nm, row) for nm in dregs]
            _accumulate(w, st, row, dregs, old, d, rowi, coli, spec, bool(keep[g]))

    return Compiled(ins, run)


@dataclass(frozen=True)
class _Spec:
    """The constant part of one wgmma.mma_async instruction."""

    n: int
    k: int
    esize: int
    ab: str
    dt: str
    sat: bool
    sa: int
    sb: int
    ta: int
    tb: int


def _uniform(v, lanes: np.ndarray, grid: np.ndarray, what: str) -> np.ndarray:
    """One value per warpgroup (the operand must be the same in all its threads); ``lanes``
    (sorted, as the executor passes them) are the lanes ``v`` belongs to."""
    v = np.asarray(v)
    vals = v[np.searchsorted(lanes, grid)] if v.ndim else np.full(grid.shape, v)
    if (vals != vals[:, :1]).any():
        g, t = np.argwhere(vals != vals[:, :1])[0]
        raise MemoryFault(f"wgmma.mma_async {what} differs between threads of one warpgroup",
                          int(grid[g, t]))
    return vals[:, 0]


def decode_descriptor(desc: int) -> tuple[int, int, int, int, int]:
    """(start, LBO, SBO, base offset, swizzle field) of a matrix descriptor, in bytes."""
    return ((desc & 0x3FFF) << 4, ((desc >> 16) & 0x3FFF) << 4, ((desc >> 32) & 0x3FFF) << 4,
            (desc >> 49) & 0x7, (desc >> 62) & 0x3)


def operand_addresses(desc: int, rows: int, kdim: int, esize: int, trans: bool) -> np.ndarray:
    """Byte address [rows, kdim] of each element of an operand the descriptor describes."""
    start, lbo, sbo, base, mode = decode_descriptor(desc)
    if desc & _RESERVED:
        raise ValueError(f"reserved bits set in the matrix descriptor 0x{desc:016x}")
    if base:
        raise ValueError(f"matrix descriptor base offset {base} (only 0 is simulated)")
    width, smode = _DESC_SWIZZLE[mode]
    per = 16 // esize
    mn = np.arange(rows, dtype=np.int64)[:, None]
    k = np.arange(kdim, dtype=np.int64)[None, :]
    if not trans:
        ku, ke = k // per, k % per
        if width == 1:
            a = start + (mn % 8) * 16 + (mn // 8) * sbo + ku * lbo + ke * esize
        else:
            a = start + (mn % 8) * (16 * width) + (mn // 8) * sbo + ku * 16 + ke * esize
    else:
        mu, me = mn // per, mn % per
        if width == 1:
            a = start + mu * sbo + (k % 8) * 16 + (k // 8) * lbo + me * esize
        else:
            a = start + (mu % width) * 16 + (mu // width) * lbo + (k % 8) * (16 * width) \
                + (k // 8) * sbo + me * esize
    return swizzle(a, smode)


def _operand(w, row: np.ndarray, desc: int, rows: int, spec: _Spec, trans: int, name: str) -> np.ndarray:
    """Matrix ``name`` [rows, k] (float64 or int64) read from shared memory for warpgroup ``row``."""
    lane0 = int(row[0])
    try:
        addr = operand_addresses(desc, rows, spec.k, spec.esize, bool(trans))
    except ValueError as e:
        raise MemoryFault(f"wgmma.mma_async {name}: {e}", lane0) from None
    sh = w.shared
    if sh is None:
        raise MemoryFault("wgmma.mma_async in a kernel without shared memory", lane0)
    flat = addr.reshape(-1)
    blk, _ = sh.locate(flat.astype(np.uint64), np.full(len(flat), lane0), spec.esize, False)
    brow = int(blk[0])
    cols = flat[:, None] + np.arange(spec.esize)
    if sh.init is not None and not (sh.init[brow, cols] == 1).all():
        bad = int(flat[np.flatnonzero((sh.init[brow, cols] != 1).any(axis=1))[0]])
        raise MemoryFault(f"wgmma.mma_async {name} reads uninitialized shared memory", lane0, bad)
    tracker = sh.tracker
    if tracker is not None:
        units = np.unique(flat // tracker.unit) + brow * (tracker.total // tracker.unit)
        wg = int(w.tlin[lane0]) // 128
        warps = row[::32]
        clock = int(state(w).opened[lane0]) + 1
        tracker.async_read(np.broadcast_to(units, (4, len(units))), warps,
                           np.full(4, brow), tracker.wgmma_agent(wg), clock)
    raw = sh.data[brow, cols]
    return _values(raw, spec).reshape(rows, spec.k)


def _values(raw: np.ndarray, spec: _Spec) -> np.ndarray:
    """The elements of little-endian ``raw`` bytes (a whole number of 32-bit words), in
    memory order: read as ``mma.sync`` reads its registers' elements (``ops_mma.elements``)."""
    words = np.ascontiguousarray(raw).reshape(-1).view(np.uint32)
    return np.stack(elements(words, spec.ab), axis=-1).reshape(-1)


def _product(a: np.ndarray, b: np.ndarray, spec: _Spec) -> np.ndarray:
    return (spec.sa * a) @ (spec.sb * b).T


def _accumulate(w, st, row, dregs, old, d, rowi, coli, spec: _Spec, keep: bool) -> None:
    """D = product (+ old D): write every accumulator register of the warpgroup ``row``."""
    vals = d[rowi, coli]  # [128 lanes, n/2 values]
    if spec.dt == "f16":
        for r, nm in enumerate(dregs):
            lo = np.asarray(old[r], np.uint32)
            c = [(lo & np.uint32(0xFFFF)).astype(np.uint16).view(np.float16),
                 (lo >> np.uint32(16)).astype(np.uint16).view(np.float16)]
            h = []
            for half in range(2):
                v = vals[:, 2 * r + half] + (c[half].astype(np.float64) if keep else 0.0)
                h.append(v.astype(np.float16).view(np.uint16).astype(np.uint32))
            st.write(w, nm, row, h[0] | (h[1] << np.uint32(16)))
        return
    for i, nm in enumerate(dregs):
        v = vals[:, i]
        if spec.dt == "f32":
            if keep:
                v = v + np.asarray(old[i], np.uint32).view(np.float32).astype(np.float64)
            st.write(w, nm, row, v.astype(np.float32).view(np.uint32))
        else:
            if keep:
                v = v + np.asarray(old[i], np.uint32).view(np.int32).astype(np.int64)
            if spec.sat:
                v = np.clip(v, -(2**31), 2**31 - 1)
            st.write(w, nm, row, (v.astype(np.int64) & 0xFFFFFFFF).astype(np.uint32))
