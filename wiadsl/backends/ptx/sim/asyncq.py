"""In-flight ``cp.async`` copies: per-thread commit groups, delivered by the waits.

PTX semantics (ISA "cp.async.commit_group / wait_group"): each thread's
``cp.async`` operations join its open group; ``commit_group`` closes it;
``wait_group N`` blocks until at most the ``N`` most recent committed groups of
the thread are pending; ``wait_all`` = ``commit_group`` + ``wait_group 0``.
Copies never committed are not waited for.

Invariant: the source bytes are read when the copy is issued (global memory
does not change under a running kernel here) and reach shared memory only when
a wait of the issuing thread retires the copy's group; until then the
destination keeps its old contents (and the race tracker flags any access to
it).  Copies still in flight when a thread exits are dropped with its block.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .memory import BankedMemory


@dataclass
class _Copies:
    """The copies one ``cp.async`` instruction issued for ``lanes`` (one row each)."""

    lanes: np.ndarray
    rows: np.ndarray
    offsets: np.ndarray       # destination byte offset per lane
    data: np.ndarray          # [lanes, size] bytes
    group: np.ndarray         # the issuing lane's open group
    pc: int


class AsyncCopies:
    """The ``cp.async`` queue of one wave (``n`` lanes) writing into ``shared``."""

    def __init__(self, n: int, shared: BankedMemory):
        self.shared = shared
        self.open_group = np.zeros(n, np.int64)  # = groups committed so far, per lane
        self.queue: list[_Copies] = []

    def issue(self, lanes: np.ndarray, addr: np.ndarray, data: np.ndarray, pc: int) -> None:
        """Queue ``data`` [lanes, size] for shared addresses ``addr`` (checked now)."""
        size = data.shape[1]
        rows, off = self.shared.locate(addr, lanes, size, True)
        tracker = self.shared.tracker
        if tracker is not None:
            tracker.issue_async(tracker.units(rows, off, size), lanes, rows)
        self.queue.append(_Copies(lanes, rows, off, data, self.open_group[lanes], pc))

    def commit(self, lanes: np.ndarray) -> None:
        self.open_group[lanes] += 1

    def wait(self, lanes: np.ndarray, allowed: int) -> None:
        """Deliver every copy of ``lanes`` in a committed group older than the newest ``allowed``."""
        if not self.queue:
            return
        limit = np.full(len(self.open_group), -1, np.int64)
        limit[lanes] = self.open_group[lanes] - allowed
        kept: list[_Copies] = []
        for c in self.queue:
            done = c.group < limit[c.lanes]
            if done.any():
                self._deliver(c, np.flatnonzero(done))
                if done.all():
                    continue
                keep = ~done
                c = _Copies(c.lanes[keep], c.rows[keep], c.offsets[keep], c.data[keep],
                            c.group[keep], c.pc)
            kept.append(c)
        self.queue = kept

    def _deliver(self, c: _Copies, sel: np.ndarray) -> None:
        sh, size = self.shared, c.data.shape[1]
        rows, off = c.rows[sel], c.offsets[sel]
        cols = off[:, None] + np.arange(size)
        sh.data[rows[:, None], cols] = c.data[sel]
        if sh.init is not None:
            sh.init[rows[:, None], cols] = 1  # init flags are bytes of 1 (see memory)
        if sh.tracker is not None:
            sh.tracker.land_async(sh.tracker.units(rows, off, size), c.lanes[sel], rows,
                                  np.full(len(sel), c.pc))

