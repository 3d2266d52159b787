"""mbarrier objects in shared memory: phases, pending arrivals and transaction bytes.

PTX semantics (ISA "Parallel Synchronization and Communication Instructions: mbarrier"):
``mbarrier.init [a], count`` sets the current phase's expected and pending arrival
counts to ``count`` (1 .. 2^20-1) and its tx-count to 0.  An arrive decrements the
pending count (by ``count``, default 1); ``expect-tx(n)`` adds ``n`` to the tx-count,
``complete-tx(n)`` (a TMA copy landing, or ``mbarrier.complete_tx``) subtracts it.
The current phase completes when the pending count and the tx-count are both 0:
the barrier then moves to the next phase, with the pending count reset to the
expected count and the tx-count to 0.  ``try_wait.parity p`` / ``test_wait.parity p``
succeed when the phase with parity ``p`` is the completed one, i.e. the current
phase's parity differs from ``p``; the state forms take the token ``arrive``
returned (here: the phase the arrival counted toward).

Invariants: a barrier object exists from its ``mbarrier.init`` on (using one before
is an error, as is arriving on a phase with no pending arrivals, or a tx-count
leaving the ISA's range); the data of a TMA copy that completes on a phase is
written to shared memory only when that phase completes (``landing``); waking the
threads blocked in ``try_wait`` is the phase completion's job (``Wave.wake``).  Race
tracking (``tracker.py``): an arrive releases the arriving warp's vector clock into
the phase, a completed phase observed by a wait is acquired, and a TMA's
complete-tx releases its issuer's clocks and its agent's clock (phase + 1).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .errors import MemoryFault
from .memory import SHARED_WINDOW, WINDOW_SIZE

MAX_COUNT = (1 << 20) - 1
TX_LIMIT = (1 << 20) - 1


@dataclass
class Landing:
    """Bytes a TMA copy writes to shared row ``row`` at byte offsets ``offsets``."""

    row: int
    offsets: np.ndarray
    data: np.ndarray


@dataclass
class MBarrier:
    """One mbarrier object (see the module docstring)."""

    expected: int
    pending: int
    init_tid: int
    init_stamp: int = -1          # the tracker's stamp of the init (-1: untracked)
    tx: int = 0
    phase: int = 0                # phases completed so far; the current phase's parity is phase % 2
    fenced: bool = False          # fence.mbarrier_init / fence.proxy.async by the initialiser
    vc: np.ndarray | None = None  # release clocks accumulated in the current phase
    done_vc: np.ndarray | None = None  # release clocks of the last completed phase
    landing: list[Landing] = field(default_factory=list)


def shared_offsets(w, space: str, addr: np.ndarray, lanes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rows, offsets) of 8-byte mbarrier objects at ``addr`` (a shared or generic address)."""
    a = np.asarray(addr, np.uint64)
    if space == "generic":
        inside = (a >= SHARED_WINDOW) & (a < SHARED_WINDOW + WINDOW_SIZE)
        if not inside.all():
            k = int(np.flatnonzero(~inside)[0])
            raise MemoryFault("mbarrier address is not in shared memory", int(lanes[k]), int(a[k]))
        a = a - np.uint64(SHARED_WINDOW)
    if w.shared is None:
        raise MemoryFault("mbarrier in a kernel without shared memory", int(lanes[0]), int(a[0]))
    return w.shared.locate(a, lanes, 8, True)


def lookup(w, row: int, off: int, lane: int) -> MBarrier:
    mb = w.mbarriers.get((row, off))
    if mb is None:
        raise MemoryFault("mbarrier used before mbarrier.init (or after mbarrier.inval)", lane,
                          SHARED_WINDOW + off)
    tracker = w.shared.tracker
    if tracker is not None and mb.init_stamp >= 0:
        rows, warp = np.asarray([row]), tracker.warp_of(np.asarray([lane]))
        if tracker.unordered(np.asarray([[mb.init_stamp]]), rows, warp).any():
            raise MemoryFault("mbarrier used by a thread its mbarrier.init is not ordered before "
                              "(no bar.sync after the init)", lane, SHARED_WINDOW + off)
    return mb


def init(w, row: int, off: int, lane: int, count: int) -> None:
    if not 1 <= count <= MAX_COUNT:
        raise MemoryFault(f"mbarrier.init count {count} outside 1..{MAX_COUNT}", lane, SHARED_WINDOW + off)
    tracker = w.shared.tracker
    stamp = -1
    if tracker is not None:
        lanes = np.asarray([lane])
        stamp = int(tracker.own_stamps(lanes, np.asarray([row]), tracker.pc)[0])
    w.mbarriers[(row, off)] = MBarrier(count, count, int(w.tlin[lane]), stamp)
    if w.shared.init is not None:
        w.shared.init[row, off:off + 8] = 1


def release(w, mb: MBarrier, row: int, lane: int) -> None:
    """The arrival of ``lane``'s warp releases its clocks into the current phase."""
    tracker = w.shared.tracker
    if tracker is None:
        return
    v = tracker.release(row, int(tracker.warp_of(np.asarray([lane]))[0]))
    mb.vc = v if mb.vc is None else np.maximum(mb.vc, v)


def acquire(w, mb: MBarrier, row: int, lanes: np.ndarray) -> None:
    """``lanes`` observed the last completed phase: their warps acquire its clocks."""
    tracker = w.shared.tracker
    if tracker is None or mb.done_vc is None:
        return
    for warp in np.unique(tracker.warp_of(lanes)):
        tracker.acquire(row, int(warp), mb.done_vc)


def arrive(w, row: int, off: int, lane: int, count: int = 1, expect: int = 0) -> int:
    """An arrive (with ``expect`` tx bytes first) by ``lane``; returns the phase it counted toward."""
    mb = lookup(w, row, off, lane)
    phase = mb.phase
    if expect:
        add_tx(mb, expect, lane, off)
    if count > mb.pending:
        raise MemoryFault(f"mbarrier arrive of count {count} on a phase with {mb.pending} pending "
                          f"arrivals (more arrivals than mbarrier.init expected)", lane,
                          SHARED_WINDOW + off)
    release(w, mb, row, lane)
    mb.pending -= count
    settle(w, row, off, mb)
    return phase


def add_tx(mb: MBarrier, n: int, lane: int, off: int) -> None:
    """expect-tx (``n`` > 0) or complete-tx (``n`` < 0) of ``abs(n)`` bytes."""
    tx = mb.tx + n
    if not -TX_LIMIT <= tx <= TX_LIMIT:
        raise MemoryFault(f"mbarrier tx-count {tx} outside the range +-{TX_LIMIT}", lane,
                          SHARED_WINDOW + off)
    mb.tx = tx


def complete_tx(w, row: int, off: int, lane: int, nbytes: int, landing: Landing | None,
                agent: int | None = None) -> None:
    """Complete-tx of ``nbytes``: by ``mbarrier.complete_tx`` (``landing`` None), or by a TMA
    copy issued by ``lane`` whose data lands at the phase's completion (``agent``: the copy's
    tracker component, None when races are not tracked)."""
    mb = lookup(w, row, off, lane)
    if landing is not None and not mb.fenced:
        raise MemoryFault("cp.async.bulk completes on an mbarrier whose mbarrier.init was not "
                          "made visible to the async proxy (no fence.mbarrier_init or "
                          "fence.proxy.async by the initialising thread)", lane, SHARED_WINDOW + off)
    tracker = w.shared.tracker
    if tracker is not None and agent is not None:
        v = tracker.release(row, int(tracker.warp_of(np.asarray([lane]))[0]))
        v[agent] = max(int(v[agent]), mb.phase + 1)
        mb.vc = v if mb.vc is None else np.maximum(mb.vc, v)
    if landing is not None:
        mb.landing.append(landing)
    add_tx(mb, -nbytes, lane, off)
    settle(w, row, off, mb)


def settle(w, row: int, off: int, mb: MBarrier) -> None:
    """Complete the current phase if nothing is pending: land its data, wake its waiters."""
    if mb.pending or mb.tx:
        return
    sh = w.shared
    for ld in mb.landing:
        sh.data[ld.row, ld.offsets] = ld.data
        if sh.init is not None:
            sh.init[ld.row, ld.offsets] = 1
    mb.landing = []
    mb.phase += 1
    mb.pending = mb.expected
    mb.done_vc, mb.vc = mb.vc, None
    w.wake(row, off)


def phase_done(mb: MBarrier, parity: int | None, state: int | None) -> bool:
    """Whether the phase a wait names has completed (parity form, or the arrive token)."""
    if parity is not None:
        return (mb.phase & 1) != (parity & 1)
    assert state is not None
    return mb.phase > state
