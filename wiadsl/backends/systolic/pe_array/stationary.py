"""The weight-stationary grid (also input-stationary: the same PEs, other operands).

Registers per PE(i, j): two stationary slots ``w0``/``w1`` (the ISA's preload
targets, so one can be loaded while the other is used), the activation ``a`` that
moves one PE right per cycle, and the partial sum that moves one PE down per cycle.

- ``preload wS``: rows of the (zero-padded) R x C tile are read one per cycle, last
  row first; column j receives them j cycles late (skew registers) and shifts them
  down: after R steps PE(i, j) holds row i. Row i of column j is first written at
  s + i + j and last at s + R - 1 + j — the same diagonal the activations follow, so
  a slot may be refilled from the cycle after its last activation entered (s >= u + T)
  and streamed into from s + R on (u >= s + R), never earlier. Both are checked per PE.
- ``matmul``: activation row m (zero-padded to R) is read at u + m; row i enters the
  grid i cycles late, reaches PE(i, j) at u + m + i + j and carries a tag naming its
  slot, so back-to-back instructions on different slots stream without a bubble.
  PE(i, j) does psum_out = psum_in + a * w[slot]; the sums leave row R - 1 skewed,
  column j waits C - 1 - j cycles in the de-skew registers, and result row m lands
  at u + m + R + C - 2: the last one at u + T + R + C - 3, "done" from
  u + T + R + C - 2 on. Padding rows and columns travel like real ones, so a
  smaller tile takes the same time (the event model's T + R + C - 2).
- ``is``: the preloaded tile is the A tile (M x K) held transposed (K on the rows,
  M on the columns); the weight tile's columns stream as the activation rows and
  result row t lands as column t of the destination.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..isa import Local
from .grid import Buffers, Event, Grid
from .skew import DelayLine


@dataclass
class _Load:
    op: Any
    slot: int
    src: Local
    start: int


@dataclass
class _Pass:
    op: Any
    slot: int
    src: Local
    dst: Local
    accumulate: bool
    length: int
    start: int


class StationaryGrid(Grid):
    """ws (``transposed=False``) or is (``transposed=True``) PE grid."""

    def __init__(self, rows: int, cols: int, memory: Buffers, transposed: bool):
        super().__init__(rows, cols, memory)
        self.transposed = transposed
        self.w = np.zeros((2, rows, cols), np.float64)
        self.a = np.zeros((rows, cols), np.float64)
        self.psum = np.zeros((rows, cols), np.float64)
        self.tags = np.full((rows, cols, 3), -1, np.int64)     # op, row m, slot
        self.wline = DelayLine(np.arange(cols), np.float64, 3)  # op, step, slot
        self.aline = DelayLine(np.arange(rows), np.float64, 3)
        self.oline = DelayLine(cols - 1 - np.arange(cols), np.float64, 2)
        self.loading: _Load | None = None
        self.streaming: _Pass | None = None
        self.wport_free = self.port_free = 0
        self.w_final = np.full((2, rows, cols), -1, np.int64)   # last write of each slot
        self.w_busy_until = -1  # the last cycle a weight wave is still shifting
        self.last_use = np.full((2, rows, cols), -1, np.int64)  # last MAC reading it

    # ------------------------------------------------------------ issue rules
    def can_preload(self, slot: int, cycle: int) -> bool:
        """The weight port is free and every PE's slot has seen its last activation
        before the new weights' first write reaches it (s + i + j)."""
        return (self.loading is None and cycle >= self.wport_free
                and bool(np.all(self.last_use[slot] < cycle + self.ii + self.jj)))

    def port_ready(self, cycle: int) -> bool:
        return self.streaming is None and cycle >= self.port_free

    def weights_ready(self, slot: int, cycle: int) -> bool:
        """Every PE's slot is final before the first activation reaches it (u + i + j)."""
        return bool(np.all(self.w_final[slot] < cycle + self.ii + self.jj))

    def preload(self, op: Any, slot: int, src: Local, cycle: int) -> None:
        r, c = self.rows, self.cols
        self.ops[op.index] = op
        self.loading = _Load(op, slot, src, cycle)
        self.wport_free = cycle + r
        self.w_final[slot] = cycle + r - 1 + self.jj
        self.w_busy_until = cycle + r - 1 + c - 1
        self.busy_until = max(self.busy_until, cycle + r - 1 + c - 1)

    def matmul(self, op: Any, slot: int, src: Local, dst: Local, accumulate: bool,
               cycle: int) -> None:
        length = src.shape[1] if self.transposed else src.shape[0]
        self.ops[op.index] = op
        self.streaming = _Pass(op, slot, src, dst, accumulate, length, cycle)
        self.port_free = cycle + length
        self.last_use[slot] = cycle + length - 1 + self.ii + self.jj
        self.busy_until = max(self.busy_until, cycle + length - 1 + self.rows + self.cols - 2)

    # ------------------------------------------------------------ one cycle
    def step(self, cycle: int) -> list[Event]:
        events: list[Event] = []
        if cycle <= self.w_busy_until:  # the delay line's stamps make skipped cycles empty
            self._weights(cycle, events)
        feed, ftags = self.aline.step(cycle, *self._activation_row(cycle, events))
        self.a[:, 1:] = self.a[:, :-1]
        self.a[:, 0] = feed
        self.tags[:, 1:] = self.tags[:, :-1]
        self.tags[:, 0] = ftags
        live = self.tags[:, :, 0] >= 0
        if live.any():
            w = np.where(self.tags[:, :, 2] == 1, self.w[1], self.w[0]).astype(self.arith)
            psum = self.a.astype(self.arith) * w
            psum[1:] += self.psum[:-1].astype(self.arith)
            psum[~live] = 0
            self.psum = psum
            out, otags = self.oline.step(cycle, psum[-1], self.tags[-1, :, :2])
        else:
            out, otags = self.oline.step(cycle, None, None)
        self._land(out, otags, cycle, events)
        return events

    def _weights(self, cycle: int, events: list[Event]) -> None:
        row, tags = None, None
        ld = self.loading
        if ld is not None and cycle >= ld.start:
            step = cycle - ld.start
            tile = self.operand(ld.src)
            tile = tile.T if self.transposed else tile
            row = np.zeros(self.cols, np.float64)
            src_row = self.rows - 1 - step  # last row first: it has the farthest to go
            if src_row < tile.shape[0]:
                row[:tile.shape[1]] = tile[src_row]
            tags = np.broadcast_to(np.array([ld.op.index, step, ld.slot]), (self.cols, 3))
            if step == self.rows - 1:
                events.append(Event("read_end", ld.op, cycle + 1))
                self.loading = None
        vals, wtags = self.wline.step(cycle, row, tags)
        valid = wtags[:, 0] >= 0
        if not valid.any():
            return
        for slot in (0, 1):
            cols = valid & (wtags[:, 2] == slot)
            if cols.any():
                mask = cols[None, :] & (self.ii <= wtags[None, :, 1])
                shifted = np.vstack([vals[None, :], self.w[slot][:-1]])
                self.w[slot] = np.where(mask, shifted, self.w[slot])
        if valid[0] and wtags[0, 1] == self.rows - 1:
            # column 0 holds its last row: streaming may start next cycle
            events.append(Event("done", self.ops[int(wtags[0, 0])], cycle + 1))

    def _activation_row(self, cycle: int,
                        events: list[Event]) -> tuple[np.ndarray | None, np.ndarray | None]:
        p = self.streaming
        if p is None or cycle < p.start:
            return None, None
        m = cycle - p.start
        tile = self.operand(p.src)
        vec = tile[:, m] if self.transposed else tile[m]
        row = np.zeros(self.rows, np.float64)
        row[:len(vec)] = vec
        if m == p.length - 1:
            events.append(Event("read_end", p.op, cycle + 1))
            self.streaming = None
        return row, np.broadcast_to(np.array([p.op.index, m, p.slot]), (self.rows, 3))

    def _land(self, out: np.ndarray, otags: np.ndarray, cycle: int, events: list[Event]) -> None:
        valid = otags[:, 0] >= 0
        if not valid.any():
            return
        if not valid.all() or len(set(map(tuple, otags[:, :2].tolist()))) != 1:
            raise AssertionError(f"cycle {cycle}: de-skewed row mixes instructions {otags}")
        index, m = int(otags[0, 0]), int(otags[0, 1])
        op = self.ops[index]
        p = op.ins
        self.write(p.dst, m, out.astype(self.arith), p.accumulate, column=self.transposed)
        if m == self._length(op) - 1:
            events.append(Event("done", op, cycle + 1))

    def _length(self, op: Any) -> int:
        src: Local = op.ins.src
        return src.shape[1] if self.transposed else src.shape[0]

    def flush(self) -> None:
        self.tags[...] = -1
