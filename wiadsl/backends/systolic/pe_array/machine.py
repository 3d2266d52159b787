"""The cycle loop: issue, effects, one grid step per cycle (docs/systolic.md,
"Cycle-true mode").

Per cycle ``c``: DMA and vector effects due at ``c`` are applied (an ``mvin``'s data
lands at its completion, a ``vec``/``mvout`` acts when its reads end), each unit
issues its oldest instruction if the scoreboard and the grid allow it, then the PE
grid advances one cycle. While the grid holds no data and no instruction can issue,
the clock jumps to the next time something is due (the grid's registers hold
nothing that could change). ``scalesim`` timing adds the compatibility rule: an
instruction issues only once the one before it is done (DMA costs nothing there).

Invariant: every effect on a buffer happens at a cycle the scoreboard allowed, so a
hazard the rules missed would show up as a wrong value, not only as a wrong count.
"""

from __future__ import annotations

import heapq
from collections import deque
from typing import Any

import numpy as np

from ....diagnostics import WiaRuntimeError, WiaUsageError
from ..check import check_section
from ..config import CYCLE_TRUE_MAX as MAX_SIDE
from ..config import ArrayConfig
from ..isa import Section
from ..simulator import SectionStats
from .costs import ARRAY_OPS, execute, machine, record
from .grid import Grid
from .output import OutputGrid
from .scoreboard import CAUSE_ORDER, Op, blocking, dependencies
from .stationary import StationaryGrid

UNITS = ("dma", "wload", "array", "vec")
#: the array instructions each dataflow's grid executes
_GRID_OPS = {"ws": ("Preload", "MatmulWS"), "is": ("Preload", "MatmulIS"), "os": ("MatmulOS",)}


class CycleMachine:
    def __init__(self, section: Section, config: ArrayConfig, inputs: dict[str, np.ndarray]):
        self.s, self.config = section, config
        program = record(section, config, inputs)
        self.ops = [op for _, op in program if op is not None]
        self.live = machine(section, config, inputs)
        for ins, op in program:
            if op is None:
                execute(self.live, ins)  # notes (``; schedule``): no cost, no effect on data
        allowed = _GRID_OPS[config.dataflow] if config.dataflow in _GRID_OPS else ()
        for op in self.ops:
            if op.unit in ("array", "wload") and type(op.ins).__name__ not in allowed:
                raise WiaUsageError(f"cycle-true mode cannot run {op.ins.text().strip()} "
                                    f"on a {config.dataflow} array")
        r, c = config.rows, config.cols
        self.grid: Grid = (OutputGrid(r, c, self.live) if config.dataflow == "os"
                           else StationaryGrid(r, c, self.live, config.dataflow == "is"))
        self.queues = {u: deque(op for op in self.ops if op.unit == u) for u in UNITS}
        self.unit_free = dict.fromkeys(UNITS, 0)
        self.effects: list[tuple[int, int, Op]] = []
        self.pending: list[Op] = list(self.ops)
        self.acc = frozenset(b.name for b in section.buffers if b.space == "acc")
        self.stats = self.live.stats
        self.stats.stalls = {}
        self.stats.instructions = len(self.ops)
        self.heads: set[int] = set()
        self._first = 0
        #: idle cycles of the array's free input port so far, and the causes in the latest
        self.waiting: tuple[int, set[str]] = (0, set())

    # ------------------------------------------------------------ issue
    def _gate(self, op: Op, cycle: int) -> tuple[bool, set[str]]:
        """(the unit's own port is free, the causes that still block op)."""
        if self.config.scalesim and op.index > 0 and not self.ops[op.index - 1].reached("done", cycle):
            return False, {"serial"}
        if op.index not in self.heads:
            self.pending = [e for e in self.pending if not e.complete(cycle)]
            op.deps = dependencies(op, [e for e in self.pending if e.index < op.index], self.acc)
            self.heads.add(op.index)
        name = type(op.ins).__name__
        g = self.grid
        causes = blocking(op, cycle)
        port = True
        if op.unit in ("dma", "vec"):
            port = self.unit_free[op.unit] <= cycle or self.config.scalesim
        elif name == "Preload":
            port = isinstance(g, StationaryGrid) and g.can_preload(op.ins.slot, cycle)
        elif name == "MatmulOS":
            port = isinstance(g, OutputGrid) and g.port_ready(op.ins.lhs.shape[1], cycle)
        elif isinstance(g, StationaryGrid):
            port = g.port_ready(cycle)
            if port and not g.weights_ready(op.ins.slot, cycle):
                causes.add("weights")
        else:
            port = False
        return port, causes

    def _issue(self, op: Op, cycle: int) -> None:
        op.start = cycle
        ins, name = op.ins, type(op.ins).__name__
        r, c = self.config.rows, self.config.cols
        if op.unit in ("dma", "vec"):
            self.unit_free[op.unit] = cycle + op.busy
            op.read_end, op.done = cycle + op.busy, cycle + op.busy + op.latency
            reads_local = any(not ref[0].startswith("#") for ref in op.reads)
            heapq.heappush(self.effects, (op.read_end if reads_local else op.done, op.index, op))
        elif name == "Preload":
            assert isinstance(self.grid, StationaryGrid)  # _GRID_OPS: preloads only on ws/is
            self.grid.preload(op, ins.slot, ins.src, cycle)
            self.stats.weight_load_cycles += r
        else:
            g = self.grid
            if isinstance(g, OutputGrid):
                g.matmul(op, ins.lhs, ins.rhs, cycle)
                t, k = ins.lhs.shape[1], ins.lhs.shape[1]
            else:
                assert isinstance(g, StationaryGrid)
                g.matmul(op, ins.slot, ins.src, ins.dst, ins.accumulate, cycle)
                k = ins.src.shape[0] if name == "MatmulIS" else ins.src.shape[1]
                t = ins.src.shape[1] if name == "MatmulIS" else ins.src.shape[0]
            self.stats.stream_cycles += t
            self.stats.mapped_macs += t * r * c
            self.stats.macs += ins.dst.shape[0] * ins.dst.shape[1] * k

    def _apply(self, cycle: int) -> None:
        while self.effects and self.effects[0][0] <= cycle:
            _, _, op = heapq.heappop(self.effects)
            execute(self.live, op.ins)

    def _issue_all(self, cycle: int) -> tuple[bool, set[str]]:
        """Issue what can go this cycle; (anything issued, why the array's free input
        port waits — empty if it does not)."""
        issued = False
        stall: set[str] = set()
        progress = True
        while progress:
            progress = False
            stall = set()
            for unit in UNITS:
                q = self.queues[unit]
                if not q:
                    continue
                port, causes = self._gate(q[0], cycle)
                if port and not causes:
                    if unit == "array":
                        self._charge_stall()
                    self._issue(q.popleft(), cycle)
                    self._apply(cycle)  # zero-cost DMA (scalesim) lands at once
                    progress = issued = True
                elif unit == "array" and port:
                    stall = causes
        return issued, stall

    def _charge_stall(self) -> None:
        """The array head issues: its idle cycles go to the cause that cleared last
        (the event model's choice: the latest bound)."""
        count, causes = self.waiting
        if count:
            cause = next(c for c in CAUSE_ORDER if c in causes)
            self.stats.stalls[cause] = self.stats.stalls.get(cause, 0) + count
        self.waiting = (0, set())

    # ------------------------------------------------------------ clock
    def _next_time(self, cycle: int) -> int | None:
        times = [t for t, _, _ in self.effects] + [t for t in self.unit_free.values() if t > cycle]
        for op in self.pending:
            times += [t for t in (op.read_end, op.done) if t is not None and t > cycle]
        return min(times) if times else None

    def _undone(self) -> bool:
        """Some instruction has not finished (ops finish roughly in order: scan from
        the oldest unfinished one)."""
        while self._first < len(self.ops) and self.ops[self._first].done is not None:
            self._first += 1
        return any(op.done is None for op in self.ops[self._first:])

    def run(self) -> SectionStats:
        cycle = 0
        while self._undone() or self.effects:
            self._apply(cycle)
            issued, stall = self._issue_all(cycle)
            if not self.grid.idle(cycle):
                for ev in self.grid.step(cycle):
                    setattr(ev.op, ev.kind, ev.time)
                nxt = cycle + 1
            else:
                self.grid.flush()
                nxt = cycle + 1 if issued else (self._next_time(cycle) or -1)
                if nxt < 0:
                    if not self._undone() and not self.effects:
                        break
                    raise WiaRuntimeError(f"cycle-true mode: section {self.s.name} stalls "
                                          f"forever at cycle {cycle}")
            if stall:
                self.waiting = (self.waiting[0] + nxt - cycle, stall)
            cycle = nxt
        end = max((op.done or 0 for op in self.ops), default=0)
        has_array = any(type(op.ins).__name__ in ARRAY_OPS[1:] for op in self.ops)
        # SCALE-Sim reports the index of a layer's last cycle (total - 1), as the event model
        self.stats.cycles = end - 1 if self.config.scalesim and has_array else end
        return self.stats

    def outputs(self) -> dict[str, np.ndarray]:
        return {d.name: self.live.drams[d.name] for d in self.s.drams if d.direction == "out"}


def run_section_cycle_true(section: Section, config: ArrayConfig, inputs: dict[str, Any],
                           checked: bool = False) -> tuple[dict[str, np.ndarray], SectionStats]:
    """``simulator.run_section`` with the array run register by register, cycle by
    cycle: same arguments, same results (bit for bit for int, within f32 rounding for
    float), cycles as stated in docs/systolic.md ("Cycle-true mode")."""
    if not checked:
        check_section(section, config)
    if max(config.rows, config.cols) > MAX_SIDE:
        raise WiaUsageError(f"cycle-true mode runs arrays up to {MAX_SIDE}x{MAX_SIDE}, "
                            f"got {config.rows}x{config.cols}")
    m = CycleMachine(section, config, inputs)
    stats = m.run()
    return m.outputs(), stats
