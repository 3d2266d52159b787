"""The SIMT executor: runs one wave of blocks to completion.

Scheduling is "min-PC" over a set of lanes: the whole wave (``lockstep``) or one
warp slot at a time (the interleaved schedules of ``schedule.py``, each slot run
until all of its lanes wait at a barrier or have exited).  Each step executes the
instruction at the lowest PC of any running lane of the set, for exactly the
lanes at that PC.  While every lane of the set runs at one PC (the common,
converged case) the executor stays in *uniform* mode and keeps a single scalar
PC (no per-step reductions).  A completed barrier starts a new race-tracking
epoch for its block (``tracker.py``).

``mbarrier.try_wait`` is a control op: a lane whose phase has not completed blocks
(``WAIT``, ``wait_mbar`` = the barrier) until an arrival or a TMA completes the phase
(``Wave.wake``), then runs its ``try_wait`` again: so a spin loop on ``try_wait``
never livelocks the min-PC schedule, and lanes still blocked when nothing can run
are a deadlock error.

Invariants: a data instruction runs on the lanes whose guard holds, then every
lane at the PC advances; a lane at a barrier waits (``WAIT``) until all threads
of its block have arrived at a barrier with the same id — and, for ``bar.sync``,
at the same instruction; a thread that exits while others of its block wait, or
a block whose running threads are all waiting on different barriers, is a
divergent-barrier error.  Any ``MemoryFault`` becomes a ``PtxSimError`` naming
kernel, line, instruction, thread and address.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .dispatch import Compiled
from .errors import MemoryFault, PtxSimError
from .schedule import slot_order, warp_slots
from .state import DONE, EXIT, RUN, WAIT, Wave


@dataclass
class Counters:
    """Steps (instructions issued) and thread-instructions (lanes × steps) executed."""

    steps: int = 0
    thread_instrs: int = 0


def _control_of(c: Compiled) -> tuple[Any, ...]:
    """The control tuple of a control op (``bra``, ``exit``, ``trap``, ``bar``)."""
    assert c.control is not None, f"not a control op: {c.instr}"
    return c.control


class Executor:
    """Runs ``ops`` (one compiled kernel) on a ``Wave``; ``slot_width``: the threads of one
    slot of the interleaved schedules (32, or 128 for warpgroup instructions)."""

    def __init__(self, kernel_name: str, ops: list[Compiled], max_steps: int,
                 slot_width: int = 32):
        self.kernel = kernel_name
        self.ops = ops
        self.max_steps = max_steps
        self.slot_width = slot_width

    def error(self, msg: str, c: Compiled | None, w: Wave, lane: int | None = None,
              address: int | None = None) -> PtxSimError:
        return PtxSimError(msg, kernel=self.kernel, line=c.instr.line if c else None,
                           instr=str(c.instr) if c else None,
                           thread=w.describe_lane(lane) if lane is not None else None,
                           address=address)

    def run(self, w: Wave, counters: Counters, schedule: str = "lockstep") -> None:
        """Run the wave to completion under ``schedule`` (see ``schedule.py``)."""
        with np.errstate(all="ignore"):
            if schedule == "lockstep" or w.geom.bsize <= self.slot_width:
                self._run_lanes(w, None, counters)
            else:
                slots = warp_slots(w.tlin, w.geom.bsize, self.slot_width)
                cycle = 0
                while True:
                    ran = False
                    for k in slot_order(schedule, cycle, len(slots)):
                        if (w.status[slots[k]] == RUN).any():
                            self._run_lanes(w, slots[k], counters)
                            ran = True
                    if not ran:
                        break
                    cycle += 1
        if (w.status == WAIT).any():
            lane = int(np.flatnonzero(w.status == WAIT)[0])
            c = self.ops[int(w.wait_pc[lane])]
            if w.wait_mbar[lane] >= 0:
                raise self.error(f"deadlock: threads wait for an mbarrier phase that never "
                                 f"completes (mbarrier at shared offset {int(w.wait_mbar[lane])}: "
                                 f"missing arrivals or transaction bytes)", c, w, lane)
            raise self.error("deadlock: threads wait at a barrier that can never complete", c, w, lane)

    def _run_lanes(self, w: Wave, group: np.ndarray | None, counters: Counters) -> None:
        """Run lanes ``group`` (all when None) until each waits at a barrier or has exited."""
        ops, nops = self.ops, len(self.ops)
        size = w.n if group is None else len(group)
        tracker = w.shared.tracker if w.shared is not None else None
        uniform, upc = False, 0
        steps = w.steps
        while True:
            if uniform:
                P, idx, cnt = upc, group, size
            else:
                pcs = w.pc if group is None else w.pc[group]
                P = int(pcs.min())
                if P == DONE:
                    break
                idx = np.flatnonzero(pcs == P) if group is None else group[pcs == P]
                cnt = len(idx)
                if cnt == size:
                    uniform, upc, idx = True, P, group
            if P >= nops:  # falling off the end is an implicit exit
                c = Compiled(ops[-1].instr, control=("exit",)) if ops else None
                if c is None:
                    break
            else:
                c = ops[P]
            steps += 1
            counters.thread_instrs += cnt
            if steps > self.max_steps:
                raise self.error(f"step limit {self.max_steps} exceeded (infinite loop?)", c, w)
            w.pc_now = P
            if tracker is not None:
                tracker.pc = P
            try:
                g = None
                if c.guard is not None:
                    g = np.asarray(c.guard(w, idx))
                    if g.all():
                        g = None
                if c.control is None:
                    assert c.fn is not None  # an op is either control or has a fn
                    sub = idx if g is None else (np.flatnonzero(g) if idx is None else idx[g])
                    if sub is None or len(sub):
                        c.fn(w, sub)
                    if uniform:
                        upc = P + 1
                    else:
                        w.pc[idx] = P + 1
                    continue
                if uniform:
                    if self._uniform_control(c, g, P, w, group is None):
                        upc = self._next
                        if upc == DONE:
                            break
                        continue
                    uniform = False
                    idx = w.all_lanes if group is None else group
                    w.pc[idx] = P
                assert idx is not None  # None only while uniform
                self._control(c, g, P, idx, w)
            except MemoryFault as e:
                raise self.error(e.message, c, w, e.lane, e.address) from None
        counters.steps += steps - w.steps
        w.steps = steps

    def _uniform_control(self, c: Compiled, g, P: int, w: Wave, whole: bool) -> bool:
        """Handle a control op when all running lanes are at ``P``; False if lanes must split.

        ``whole``: the running lanes are the whole wave (exit and barriers need no
        bookkeeping then); a warp slot leaves those to ``_control``."""
        control = _control_of(c)
        kind = control[0]
        if kind == "trap" and whole:
            raise MemoryFault("trap executed", 0)
        if kind == "bra":
            if g is None:
                self._next = control[1]
                return True
            if not g.any():
                self._next = P + 1
                return True
            return False
        if g is not None and not g.any() and kind in ("exit", "bar", "mbar_wait"):
            self._next = P + 1
            return True
        if not whole or kind == "mbar_wait":
            return False
        if kind == "exit":
            if g is None:
                w.status[:] = EXIT
                w.pc[:] = DONE
                self._next = DONE
                return True
            return False
        _, bid, count, _aligned = control
        if g is None and count is None:
            self._next = P + 1  # every thread of every block arrives together
            if w.shared is not None and w.shared.tracker is not None:
                w.shared.tracker.barrier(None)
            return True
        return False

    def _control(self, c: Compiled, g, P: int, idx: np.ndarray, w: Wave) -> None:
        control = _control_of(c)
        kind = control[0]
        go = idx if g is None else idx[g]
        stay = idx[:0] if g is None else idx[~g]
        w.pc[stay] = P + 1
        if kind == "trap":
            if len(go):
                raise MemoryFault("trap executed", int(go[0]))
            return
        if kind == "bra":
            w.pc[go] = control[1]
            return
        if kind == "exit":
            w.pc[go] = DONE
            w.status[go] = EXIT
            self._check_barriers(w, np.unique(w.block_of_lane[go]), c)
            return
        if kind == "mbar_wait":  # mbarrier.try_wait: lanes whose phase is not complete block
            if not len(go):
                return
            done, offsets = control[1](w, go)
            w.pc[go[done]] = P + 1
            blocked = ~done
            if blocked.any():
                lanes = go[blocked]
                w.pc[lanes] = DONE
                w.status[lanes] = WAIT
                w.wait_pc[lanes] = P
                w.wait_mbar[lanes] = offsets[blocked]
            return
        _, bid, count, aligned = control
        if not len(go):
            return
        w.pc[go] = DONE
        w.status[go] = WAIT
        w.wait_bar[go] = np.asarray(bid(w, go), np.int64)
        w.wait_pc[go] = P
        w.wait_cnt[go] = -1 if count is None else np.asarray(count(w, go), np.int64)
        self._check_barriers(w, np.unique(w.block_of_lane[go]), c)

    def _check_barriers(self, w: Wave, blocks: np.ndarray, c: Compiled) -> None:
        """Release completed barriers of ``blocks``; raise on a barrier that cannot complete."""
        bs = w.geom.bsize
        for b in blocks:
            lo = int(b) * bs
            s = w.status[lo : lo + bs]
            waiting = (s == WAIT) & (w.wait_mbar[lo : lo + bs] < 0)  # at bar.sync, not mbarriers
            if not waiting.any():
                continue
            running = (s == RUN).any()
            for bid in np.unique(w.wait_bar[lo : lo + bs][waiting]):
                wl = waiting & (w.wait_bar[lo : lo + bs] == bid)
                cnt = int(w.wait_cnt[lo : lo + bs][wl].max())
                expected = bs if cnt < 0 else cnt
                if wl.sum() >= expected:
                    lanes = lo + np.flatnonzero(wl)
                    pcs = np.unique(w.wait_pc[lanes])
                    if len(pcs) > 1 and any(_control_of(self.ops[int(p)])[3] for p in pcs):
                        lines = ", ".join(str(self.ops[int(p)].instr.line) for p in pcs)
                        raise self.error(f"divergent barrier: threads of one block wait at "
                                         f"different bar.sync instructions (lines {lines})",
                                         self.ops[int(pcs[0])], w, int(lanes[0]))
                    w.status[lanes] = RUN
                    w.pc[lanes] = w.wait_pc[lanes] + 1
                    if w.shared is not None and w.shared.tracker is not None:
                        w.shared.tracker.barrier(np.asarray([b]),
                                                 np.unique(w.tlin[lanes] // 32))
                elif not running:
                    lane = lo + int(np.flatnonzero(wl)[0])
                    n_exit = int((s == EXIT).sum())
                    why = (f"{n_exit} threads of the block exited without reaching it" if n_exit
                           else "the other threads of the block wait at a different barrier")
                    raise self.error(f"divergent barrier: {int(wl.sum())} of {bs} threads wait at "
                                     f"barrier {int(bid)} but {why}",
                                     self.ops[int(w.wait_pc[lane])], w, lane)
