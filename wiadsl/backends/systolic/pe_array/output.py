"""The output-stationary grid: each PE keeps one accumulator of the output tile.

``matmul.os dst, lhs, rhs`` (lhs m x T, m <= R; rhs T x n, n <= C): at u + k column
k of lhs and row k of rhs are read (zero-padded to R and C); row i of the lhs column
enters from the left i cycles late and moves right, column j of the rhs row enters
from the top j cycles late and moves down, so PE(i, j) meets lhs[i, k] and
rhs[k, j] at u + k + i + j and adds their product to its accumulator.

Drain: the operands of k = T - 1 carry a ``last`` flag; in that cycle the PE puts
its finished sum on its column's output bus and clears its accumulator, so the next
tile's first operands (one cycle behind on the same diagonal) start from zero.
Column j's bus carries row i at u + T - 1 + i + j — one value per cycle, R cycles
per tile — then the de-skew registers hold column j for C - 1 - j cycles, and result
row i lands at u + T + i + C - 2. The last row (R - 1, padding included) lands at
u + T + R + C - 3: "done" from u + T + R + C - 2 on, the event model's figure.

Issue rule: the input ports are free (u >= u' + T') and the new tile's first value
on each column bus comes after the previous tile's last (u + T - 1 + j > u' + T' + R
- 2 + j). For tiles of equal T that is the event model's hold of max(T, R).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..isa import Local
from .grid import Buffers, Event, Grid
from .skew import DelayLine


@dataclass
class _Tile:
    op: Any
    lhs: Local
    rhs: Local
    length: int
    start: int


class OutputGrid(Grid):
    def __init__(self, rows: int, cols: int, memory: Buffers):
        super().__init__(rows, cols, memory)
        self.a = np.zeros((rows, cols), np.float64)
        self.b = np.zeros((rows, cols), np.float64)
        self.acc: np.ndarray = np.zeros((rows, cols), np.float64)
        self.tags = np.full((rows, cols, 3), -1, np.int64)  # op, k, last
        self.lline = DelayLine(np.arange(rows), np.float64, 3)
        self.tline = DelayLine(np.arange(cols), np.float64, 3)
        self.oline = DelayLine(cols - 1 - np.arange(cols), np.float64, 2)  # op, row
        self.streaming: _Tile | None = None
        self.port_free = 0
        self.bus_until = np.full(cols, -1, np.int64)
        self.cols_idx = np.arange(cols)

    def port_ready(self, length: int, cycle: int) -> bool:
        return (self.streaming is None and cycle >= self.port_free
                and bool(np.all(self.bus_until < cycle + length - 1 + self.cols_idx)))

    def matmul(self, op: Any, lhs: Local, rhs: Local, cycle: int) -> None:
        t = lhs.shape[1]
        self.ops[op.index] = op
        self.streaming = _Tile(op, lhs, rhs, t, cycle)
        self.port_free = cycle + t
        self.bus_until = cycle + t - 1 + self.rows - 1 + self.cols_idx
        self.busy_until = max(self.busy_until, cycle + t + self.rows + self.cols - 3)

    def step(self, cycle: int) -> list[Event]:
        events: list[Event] = []
        lcol, rrow, ltags, ttags = self._read(cycle, events)
        lf, lt = self.lline.step(cycle, lcol, ltags)
        tf, _ = self.tline.step(cycle, rrow, ttags)
        self.a[:, 1:] = self.a[:, :-1]
        self.a[:, 0] = lf
        self.tags[:, 1:] = self.tags[:, :-1]
        self.tags[:, 0] = lt
        self.b[1:] = self.b[:-1]
        self.b[0] = tf
        live = self.tags[:, :, 0] >= 0
        bus, btags = None, None
        if live.any():
            arith = self.arith
            if self.acc.dtype != arith:
                self.acc = self.acc.astype(arith)
            prod = self.a.astype(arith) * self.b.astype(arith)
            self.acc = np.where(live, self.acc + prod, self.acc)
            emit = live & (self.tags[:, :, 2] == 1)
            if emit.any():
                if (emit.sum(axis=0) > 1).any():
                    raise AssertionError(f"cycle {cycle}: two rows on one column bus")
                rows = emit.argmax(axis=0)
                on = emit.any(axis=0)
                bus = np.zeros(self.cols, np.float64)
                bus[on] = self.acc[rows[on], self.cols_idx[on]]
                btags = np.full((self.cols, 2), -1, np.int64)
                btags[on, 0] = self.tags[rows[on], self.cols_idx[on], 0]
                btags[on, 1] = rows[on]
                self.acc[emit] = 0
        out, otags = self.oline.step(cycle, bus, btags)
        self._land(out, otags, cycle, events)
        return events

    def _read(self, cycle: int, events: list[Event]) -> tuple[Any, Any, Any, Any]:
        p = self.streaming
        if p is None or cycle < p.start:
            return None, None, None, None
        k = cycle - p.start
        lhs, rhs = self.operand(p.lhs), self.operand(p.rhs)
        lcol = np.zeros(self.rows, np.float64)
        lcol[:lhs.shape[0]] = lhs[:, k]
        rrow = np.zeros(self.cols, np.float64)
        rrow[:rhs.shape[1]] = rhs[k]
        last = int(k == p.length - 1)
        if last:
            events.append(Event("read_end", p.op, cycle + 1))
            self.streaming = None
        tag = np.array([p.op.index, k, last])
        return (lcol, rrow, np.broadcast_to(tag, (self.rows, 3)),
                np.broadcast_to(tag, (self.cols, 3)))

    def _land(self, out: np.ndarray, otags: np.ndarray, cycle: int, events: list[Event]) -> None:
        valid = otags[:, 0] >= 0
        if not valid.any():
            return
        if not valid.all() or len(set(map(tuple, otags.tolist()))) != 1:
            raise AssertionError(f"cycle {cycle}: de-skewed row mixes tiles {otags}")
        op = self.ops[int(otags[0, 0])]
        row = int(otags[0, 1])
        dst: Local = op.ins.dst
        if row < dst.shape[0]:
            self.write(dst, row, out.astype(self.arith), op.ins.accumulate)
        if row == self.rows - 1:
            events.append(Event("done", op, cycle + 1))

    def flush(self) -> None:
        self.tags[...] = -1
