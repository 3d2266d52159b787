"""In-flight ``wgmma.mma_async`` results of a wave, wgmma groups, and the wgmma.fence state.

PTX semantics (ISA "Asynchronous Warpgroup Level Matrix Multiply-Accumulate"):
``wgmma.mma_async`` operations of a thread join its open wgmma-group;
``wgmma.commit_group`` closes the group; ``wgmma.wait_group N`` waits until at most
the ``N`` most recent committed groups are pending.  Accessing an accumulator
register of an in-flight wgmma (other than by further wgmma.mma_async of the same
shape chaining on it) is undefined: here it is an error.  ``wgmma.fence`` must come
before the first wgmma.mma_async of a warpgroup and between any other access to
its accumulator registers and the next wgmma.mma_async that uses them.

Invariants: ``pend_group[reg][lane]`` is the group of the latest in-flight write
of ``reg`` (``-1``: none) and ``pend_val[reg][lane]`` its raw bits; registers
receive their values only when a ``wait_group`` retires that group; ``opened[lane]``
counts the lane's committed groups (the open group's index); ``fenced[lane]``: a
wgmma.fence since the lane last touched an accumulator register.
"""

from __future__ import annotations

import numpy as np

from .errors import MemoryFault


class WgmmaState:
    """The wgmma bookkeeping of one wave of ``n`` lanes."""

    def __init__(self, n: int):
        self.opened = np.zeros(n, np.int64)
        self.fenced = np.zeros(n, bool)
        self.pend_group: dict[str, np.ndarray] = {}
        self.pend_val: dict[str, np.ndarray] = {}

    def value(self, w, name: str, lanes: np.ndarray) -> np.ndarray:
        """The register's current bits for a chaining wgmma: in flight, else committed."""
        cur = w.regs[name][lanes]
        g = self.pend_group.get(name)
        if g is None:
            return cur
        inflight = g[lanes] >= 0
        return np.where(inflight, self.pend_val[name][lanes], cur)

    def write(self, w, name: str, lanes: np.ndarray, bits: np.ndarray) -> None:
        if name not in self.pend_group:
            self.pend_group[name] = np.full(w.n, -1, np.int64)
            self.pend_val[name] = np.zeros(w.n, w.regs[name].dtype)
        self.pend_group[name][lanes] = self.opened[lanes]
        self.pend_val[name][lanes] = bits

    def retire(self, w, lanes: np.ndarray, keep: int) -> None:
        """``wait_group keep``: groups older than the ``keep`` newest land in the registers."""
        limit = np.full(w.n, -1, np.int64)
        limit[lanes] = self.opened[lanes] - keep
        for name, g in self.pend_group.items():
            done = (g >= 0) & (g < limit)
            if done.any():
                sel = np.flatnonzero(done)
                w.regs[name][sel] = self.pend_val[name][sel]
                g[sel] = -1

    def touch(self, name: str, lanes: np.ndarray, write: bool) -> None:
        """A non-wgmma instruction accesses accumulator register ``name``: an error while a
        wgmma writing it is in flight; afterwards a wgmma.fence is needed again."""
        g = self.pend_group.get(name)
        if g is not None:
            busy = g[lanes] >= 0
            if busy.any():
                k = int(np.flatnonzero(busy)[0])
                raise MemoryFault(f"register {name} {'written' if write else 'read'} while the "
                                  f"wgmma.mma_async writing it is in flight (no wgmma.wait_group "
                                  f"retired its group)", int(lanes[k]))
        self.fenced[lanes] = False


def state(w) -> WgmmaState:
    if w.wgmma is None:
        w.wgmma = WgmmaState(w.n)
    return w.wgmma
