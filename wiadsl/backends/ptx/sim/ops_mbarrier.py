"""mbarrier instructions and the fences that order them: ``mbarrier.init / inval / arrive
(.expect_tx) / expect_tx / complete_tx / test_wait / try_wait (.parity)`` on ``.b64``
objects in shared memory, ``fence.mbarrier_init`` and ``fence.proxy.async``.

Invariants: lanes act in lane order (several arrivals of one instruction on one
barrier count one by one, so a phase may complete in the middle); ``try_wait`` is a
control op that blocks a lane until its phase completes (``exec.py``; a suspend-time
hint is accepted and ignored), ``test_wait`` never blocks.  ``.shared::cluster``
addresses are taken as the CTA's own (clusters of one CTA).  The state token an
arrive returns is the phase it counted toward.  Other ``fence`` forms and ``membar``
order nothing here: the simulator's memory is sequentially consistent, and the race
tracker checks the orderings that matter.
"""

from __future__ import annotations

import numpy as np

from . import access, mbarrier
from .ast import Name
from .dispatch import Compiled, op, unsupported
from .errors import MemoryFault
from .operands import mods_of, reader, writer
from .ptxtypes import TYPES

U32, U64, PRED = TYPES["u32"], TYPES["u64"], TYPES["pred"]
_KINDS = ("init", "inval", "arrive", "expect_tx", "complete_tx", "test_wait", "try_wait")


def _scalar(r, w, idx, n: int) -> np.ndarray:
    return np.broadcast_to(np.asarray(r(w, idx)).astype(np.int64), (n,))


@op("mbarrier")
def build_mbarrier(ins, cx):
    flags, types = mods_of(ins)
    kind = ins.mods[0] if ins.mods else ""
    if kind not in _KINDS or [t.name for t in types] != ["b64"]:
        raise cx.error(f"unsupported instruction '{ins.opcode}' at line {ins.line}")
    space = access.space_of(flags)
    flags.discard(kind)
    if space not in ("shared", "generic"):
        raise cx.error(f"'{ins.opcode}': an mbarrier lives in shared memory")
    if kind == "init":
        unsupported(cx, flags, set())
        return _init(ins, cx, space)
    if kind == "inval":
        unsupported(cx, flags, set())
        return _inval(ins, cx, space)
    if kind == "arrive":
        unsupported(cx, flags, {"expect_tx"})
        return _arrive(ins, cx, space, "expect_tx" in flags)
    if kind in ("expect_tx", "complete_tx"):
        unsupported(cx, flags, set())
        return _tx(ins, cx, space, 1 if kind == "expect_tx" else -1)
    unsupported(cx, flags, {"parity"})
    return _wait(ins, cx, space, "parity" in flags, blocking=kind == "try_wait")


def _init(ins, cx, space):
    addr, count = access.address(cx, ins.operands[0]), reader(cx, ins.operands[1], U32)

    def run(w, idx):
        lanes = access.lanes_of(w, idx)
        rows, offs = mbarrier.shared_offsets(w, space, addr(w, idx), lanes)
        counts = _scalar(count, w, idx, len(lanes))
        for k, lane in enumerate(lanes.tolist()):
            mbarrier.init(w, int(rows[k]), int(offs[k]), lane, int(counts[k]))

    return Compiled(ins, run)


def _inval(ins, cx, space):
    addr = access.address(cx, ins.operands[0])

    def run(w, idx):
        lanes = access.lanes_of(w, idx)
        rows, offs = mbarrier.shared_offsets(w, space, addr(w, idx), lanes)
        for k, lane in enumerate(lanes.tolist()):
            mbarrier.lookup(w, int(rows[k]), int(offs[k]), lane)
            del w.mbarriers[(int(rows[k]), int(offs[k]))]

    return Compiled(ins, run)


def _arrive(ins, cx, space, expect_tx: bool):
    ops = ins.operands
    if len(ops) not in (2, 3) or (expect_tx and len(ops) != 3):
        raise cx.error(f"'{ins.opcode}' takes state, [addr]{', txCount' if expect_tx else ', count'}")
    state = writer(cx, ops[0], U64) if not (isinstance(ops[0], Name) and ops[0].name == "_") else None
    addr = access.address(cx, ops[1])
    extra = reader(cx, ops[2], U32) if len(ops) == 3 else None

    def run(w, idx):
        lanes = access.lanes_of(w, idx)
        rows, offs = mbarrier.shared_offsets(w, space, addr(w, idx), lanes)
        n = len(lanes)
        vals = _scalar(extra, w, idx, n) if extra is not None else np.ones(n, np.int64)
        phases = np.empty(n, np.uint64)
        for k, lane in enumerate(lanes.tolist()):
            count, tx = (1, int(vals[k])) if expect_tx else (int(vals[k]), 0)
            if not 1 <= count <= mbarrier.MAX_COUNT:
                raise MemoryFault(f"mbarrier.arrive count {count} outside 1..{mbarrier.MAX_COUNT}", lane)
            phases[k] = mbarrier.arrive(w, int(rows[k]), int(offs[k]), lane, count, tx)
        if state is not None:
            state(w, idx, phases)

    return Compiled(ins, run)


def _tx(ins, cx, space, sign: int):
    addr, nbytes = access.address(cx, ins.operands[0]), reader(cx, ins.operands[1], U32)

    def run(w, idx):
        lanes = access.lanes_of(w, idx)
        rows, offs = mbarrier.shared_offsets(w, space, addr(w, idx), lanes)
        counts = _scalar(nbytes, w, idx, len(lanes))
        for k, lane in enumerate(lanes.tolist()):
            row, off = int(rows[k]), int(offs[k])
            mb = mbarrier.lookup(w, row, off, lane)
            if sign > 0:
                mbarrier.add_tx(mb, int(counts[k]), lane, off)
            else:
                mbarrier.complete_tx(w, row, off, lane, int(counts[k]), None)

    return Compiled(ins, run)


def _wait(ins, cx, space, parity: bool, blocking: bool):
    ops = ins.operands
    if len(ops) not in (3, 4) or (len(ops) == 4 and not blocking):
        raise cx.error(f"'{ins.opcode}' takes waitComplete, [addr], "
                       f"{'phaseParity' if parity else 'state'}")
    done_w = writer(cx, ops[0], PRED)
    addr = access.address(cx, ops[1])
    token = reader(cx, ops[2], U32 if parity else U64)

    def check(w, idx) -> tuple[np.ndarray, np.ndarray]:
        """(phase complete, barrier offset) per lane; complete lanes acquire and get true."""
        lanes = access.lanes_of(w, idx)
        rows, offs = mbarrier.shared_offsets(w, space, addr(w, idx), lanes)
        toks = _scalar(token, w, idx, len(lanes))
        done = np.zeros(len(lanes), bool)
        for k, lane in enumerate(lanes.tolist()):
            row, off = int(rows[k]), int(offs[k])
            mb = mbarrier.lookup(w, row, off, lane)
            t = int(toks[k])
            done[k] = mbarrier.phase_done(mb, t if parity else None, None if parity else t)
            if done[k]:
                mbarrier.acquire(w, mb, row, lanes[k:k + 1])
        return done, offs

    if blocking:
        def control(w, go):
            done, offs = check(w, go)
            if done.any():
                done_w(w, go[done], np.ones(int(done.sum()), bool))
            return done, offs

        return Compiled(ins, control=("mbar_wait", control))

    def run(w, idx):
        done, _ = check(w, idx)
        done_w(w, idx, done)

    return Compiled(ins, run)


@op("fence")
def build_fence(ins, cx):
    """``fence.proxy.async{.space}`` and ``fence.mbarrier_init.release.cluster`` are tracked;
    every other fence is a no-op (see the module docstring)."""
    flags, _ = mods_of(ins)
    proxy = "proxy" in flags
    if proxy and "async" not in flags:  # fence.proxy.alias / tensormap: nothing to model
        return Compiled(ins, lambda w, idx: None)
    if not proxy and "mbarrier_init" not in flags:
        return Compiled(ins, lambda w, idx: None)

    def run(w, idx):
        lanes = access.lanes_of(w, idx)
        rows = w.block_of_lane[lanes]
        tids = set(zip(rows.tolist(), w.tlin[lanes].tolist()))
        for (row, _), mb in w.mbarriers.items():
            if (row, mb.init_tid) in tids:
                mb.fenced = True
        tracker = w.shared.tracker if w.shared is not None else None
        if proxy and tracker is not None:
            for row, warp in set(zip(rows.tolist(), tracker.warp_of(lanes).tolist())):
                tracker.fence_proxy(row, warp)

    return Compiled(ins, run)
