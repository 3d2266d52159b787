"""TMA loads: ``cp.async.bulk.tensor.{1-5}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
[dst], [tmap, {c0, ...}], [mbar]``.

Semantics (PTX ISA "cp.async.bulk.tensor", CUDA driver API "Tensor Map Object
Management"): each issuing thread copies one box of the tensor the map describes,
whose first element is at the signed element coordinates ``c0, ...`` (innermost
first), into shared memory at ``dst``, the box laid out densely (innermost dim
fastest) and then swizzled (``tensormap.swizzle``); elements outside the tensor's
dims are filled with zeros.  The copy then performs complete-tx of the whole box's
bytes on the mbarrier (``mbarrier.complete_tx``): the data lands when that phase
completes, and until then the destination keeps its old contents.

Invariants: the tensor map is read (128 bytes at a generic address: a
``cvta.param`` kernel parameter, or global memory) in the simulator's encoding
(``tensormap.py``); ``dst`` is 128-byte aligned (ISA) and, with a swizzle, aligned
to the swizzle's repeat (1024/512/256 bytes: a partial pattern is not modelled);
the box lies within one shared variable.  Only ``.tile`` loads with element
strides of 1 and zero out-of-bounds fill are simulated; ``.shared::cluster`` is
the CTA's own shared memory (clusters of one CTA).  Race tracking: the copy is a
write by the mbarrier's copy agent (``tracker.py``), checked at issue against
earlier accesses with the issuing warp's clocks and visible to threads that observe
its phase complete.
"""

from __future__ import annotations

import numpy as np

from . import access, mbarrier
from .ast import TensorRef
from .dispatch import Compiled, unsupported
from .errors import MemoryFault
from .operands import reader
from .ptxtypes import TYPES, UINT
from .tensormap import SWIZZLE_REPEAT, TensorMap, decode, swizzle

_DIMS = {f"{d}d": d for d in range(1, 6)}
_ALLOWED = {"tensor", "shared::cluster", "shared::cta", "global", "tile",
            "mbarrier::complete_tx::bytes", *_DIMS}


def build_bulk(ins, cx):
    mods = set(ins.mods[2:])
    if ins.mods[2:3] != ("tensor",) or not mods & {"shared::cluster", "shared::cta"} \
            or "global" not in mods or "mbarrier::complete_tx::bytes" not in mods:
        raise cx.error(f"unsupported instruction '{ins.opcode}' at line {ins.line} "
                       f"(only TMA tensor loads global -> shared with mbarrier completion)")
    unsupported(cx, mods, _ALLOWED)
    rank = next((v for k, v in _DIMS.items() if k in mods), None)
    ops = ins.operands
    if rank is None or len(ops) != 3 or not isinstance(ops[1], TensorRef):
        raise cx.error(f"'{ins.opcode}' takes [dst], [tensorMap, {{coords}}], [mbar]")
    ref = ops[1]
    if len(ref.coords.items) != rank:
        raise cx.error(f"'{ins.opcode}' needs {rank} coordinates, got {len(ref.coords.items)}")
    dst, mbar = access.address(cx, ops[0]), access.address(cx, ops[2])
    tmap = access.address(cx, ref.addr)
    coords = [reader(cx, c, TYPES["s32"]) for c in ref.coords.items]

    def run(w, idx):
        lanes = access.lanes_of(w, idx)
        d, t, m = dst(w, idx), tmap(w, idx), mbar(w, idx)
        cs = np.stack([np.broadcast_to(np.asarray(c(w, idx), np.int64), (len(lanes),)) for c in coords])
        for k, lane in enumerate(lanes.tolist()):
            _copy(w, lane, int(d[k]), int(t[k]), int(m[k]), cs[:, k], rank)

    return Compiled(ins, run)


def _tensor_map(w, lane: int, addr: int) -> TensorMap:
    words = np.uint64(addr) + np.arange(16, dtype=np.uint64) * np.uint64(8)
    raw = access.load(w, "generic", words, np.full(16, lane), TYPES["u64"], 1)
    try:
        return decode(raw.tobytes())
    except ValueError as e:
        raise MemoryFault(f"cp.async.bulk.tensor: {e}", lane, addr) from None


def _copy(w, lane: int, dst: int, tmap_addr: int, mbar: int, coords: np.ndarray, rank: int) -> None:
    tm = _tensor_map(w, lane, tmap_addr)
    if tm.rank != rank:
        raise MemoryFault(f"cp.async.bulk.tensor.{rank}d with a tensor map of rank {tm.rank}",
                          lane, tmap_addr)
    if tm.oob_nan or any(e != 1 for e in tm.element_strides):
        raise MemoryFault("cp.async.bulk.tensor: NaN out-of-bounds fill and element strides "
                          "other than 1 are not simulated", lane, tmap_addr)
    need = max(128, SWIZZLE_REPEAT[tm.swizzle])
    if dst % need:
        raise MemoryFault(f"cp.async.bulk.tensor destination 0x{dst:x} is not {need}-byte aligned "
                          f"(128 bytes, and a swizzle's whole pattern)", lane, dst)
    sh = w.shared
    if sh is None:
        raise MemoryFault("cp.async.bulk.tensor in a kernel without shared memory", lane, dst)
    nbytes = tm.box_bytes
    sh.locate_span(dst, lane, nbytes, True)
    rows, moffs = mbarrier.shared_offsets(w, "shared", np.asarray([mbar], np.uint64),
                                          np.asarray([lane]))
    row, moff = int(rows[0]), int(moffs[0])
    data = _gather(w, tm, coords, lane)
    offsets = swizzle(dst + np.arange(nbytes, dtype=np.int64), tm.swizzle)
    agent = None
    tracker = sh.tracker
    if tracker is not None:
        mb = mbarrier.lookup(w, row, moff, lane)
        agent = tracker.mbarrier_agent(moff)
        lin = tracker.units(np.asarray([row]), np.asarray([dst]), nbytes)
        tracker.async_write(lin, lane, row, agent, mb.phase + 1)
    mbarrier.complete_tx(w, row, moff, lane, nbytes, mbarrier.Landing(row, offsets, data), agent)


def _gather(w, tm: TensorMap, coords: np.ndarray, lane: int) -> np.ndarray:
    """The box's bytes in shared-memory order (before swizzling); zeros outside the tensor."""
    r = tm.rank
    grids = np.meshgrid(*[np.arange(b, dtype=np.int64) for b in reversed(tm.box)], indexing="ij")
    g = [coords[i] + grids[r - 1 - i].reshape(-1) for i in range(r)]
    inside = np.ones(len(g[0]), bool)
    off = np.zeros(len(g[0]), np.int64)
    strides = (tm.elem_bytes, *tm.strides)
    for i in range(r):
        inside &= (g[i] >= 0) & (g[i] < tm.dims[i])
        off += g[i] * strides[i]
    t = TYPES[f"u{8 * tm.elem_bytes}"]
    vals = np.zeros(len(off), UINT[8 * tm.elem_bytes])
    sel = np.flatnonzero(inside)
    if len(sel):
        addr = (np.uint64(tm.address) + off[sel].astype(np.uint64)).astype(np.uint64)
        vals[sel] = access.load(w, "global", addr, np.full(len(sel), lane), t, 1)[:, 0]
    return vals.view(np.uint8)
