"""Skew and de-skew register files at the array's edges.

A systolic array sees its operands on a diagonal wavefront: lane ``l`` of a row read
at cycle ``c`` must reach the edge at cycle ``c + delay[l]``. Hardware does this with
a triangular register file (lane ``l`` is a chain of ``delay[l]`` registers); here a
ring of the last ``max(delay) + 1`` pushed rows, each stamped with the cycle it was
pushed, plays that role. A lane whose entry was not pushed exactly ``delay[l]``
cycles ago reads as empty (tag -1), so cycles the machine skips while idle never
leave stale data behind.

Invariant: ``step(c, ...)`` is called with strictly increasing ``c``.
"""

from __future__ import annotations

import numpy as np


class DelayLine:
    """``lanes`` lanes; lane ``l`` delays by ``delays[l]`` cycles. Each entry carries a
    value per lane and ``ntags`` integer tags per lane (tag 0 < 0 means empty)."""

    def __init__(self, delays: np.ndarray, dtype: type, ntags: int):
        self.delays = np.asarray(delays, np.int64)
        self.depth = int(self.delays.max()) + 1
        lanes = len(self.delays)
        self.lanes = np.arange(lanes)
        self.vals: np.ndarray = np.zeros((self.depth, lanes), dtype)
        self.tags = np.full((self.depth, lanes, ntags), -1, np.int64)
        self.stamp = np.full(self.depth, -1, np.int64)

    def step(self, cycle: int, vals: np.ndarray | None,
             tags: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """Push this cycle's row (None: nothing enters) and return what leaves each lane
        this cycle: (values, tags per lane)."""
        slot = cycle % self.depth
        self.stamp[slot] = cycle
        if vals is None or tags is None:
            self.tags[slot] = -1
        else:
            self.vals[slot] = vals
            self.tags[slot] = tags
        src = (cycle - self.delays) % self.depth
        out_vals = self.vals[src, self.lanes]
        out_tags = self.tags[src, self.lanes].copy()
        stale = self.stamp[src] != cycle - self.delays
        out_tags[stale] = -1
        return out_vals, out_tags
