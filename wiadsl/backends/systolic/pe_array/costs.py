"""The event model's per-instruction costs and regions, as the scoreboard's ``Op``s.

``record`` runs the section once on the event simulator's machine with its timeline
replaced by ``_Recorder``, which keeps each ``schedule`` call (unit, busy, latency,
reads, writes) instead of placing it. Every instruction that costs anything makes
exactly one such call, so the list lines up with the instruction stream; DMA and
vector costs (bandwidth, latency, lanes, reduction trees...) are then the event
model's by construction. That run's values are thrown away.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ....diagnostics import WiaRuntimeError
from ..config import ArrayConfig
from ..isa import Label, Section
from ..simulator import _Machine
from .scoreboard import SLOT, Op

#: instructions the PE grid executes itself (the rest run on the event machine)
ARRAY_OPS = ("Preload", "MatmulWS", "MatmulOS", "MatmulIS")


class _Recorder:
    """Stands in for ``timing.Timeline``: records instead of scheduling."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, int, list, list]] = []
        self.free = {"dma": 0, "wload": 0, "array": 0, "vec": 0}
        self.slot_free = [0, 0]
        self.slot_ready = [0, 0]

    def schedule(self, unit: str, busy: int, latency: int, reads: list, writes: list,
                 extra: dict[str, int] | None = None) -> tuple[int, int]:
        self.calls.append((unit, busy, latency, list(reads), list(writes)))
        return 0, 0


def machine(section: Section, config: ArrayConfig, inputs: dict[str, np.ndarray]) -> _Machine:
    """An event-simulator machine whose timeline only records."""
    m = _Machine(section, config, inputs)
    m.timeline = _Recorder()  # type: ignore[assignment]
    return m


def execute(m: _Machine, ins: Any) -> None:
    getattr(m, type(ins).__name__.lower())(ins)


def record(section: Section, config: ArrayConfig, inputs: dict[str, np.ndarray]) -> list[tuple[Any, Op | None]]:
    """Each non-label instruction with its ``Op`` (None: costs nothing, e.g. a
    ``; schedule`` note), in program order."""
    m = machine(section, config, inputs)
    rec: _Recorder = m.timeline  # type: ignore[assignment]
    out: list[tuple[Any, Op | None]] = []
    for ins in section.body:
        if isinstance(ins, Label):
            continue
        before = len(rec.calls)
        execute(m, ins)
        calls = rec.calls[before:]
        if len(calls) > 1:
            raise WiaRuntimeError(f"cycle-true mode: {ins.text().strip()} scheduled twice")
        if not calls:
            out.append((ins, None))
            continue
        unit, busy, latency, reads, writes = calls[0]
        op = Op(sum(o is not None for _, o in out), ins, unit, busy, latency, reads, writes)
        _slot_refs(op)
        out.append((ins, op))
    return out


def _slot_refs(op: Op) -> None:
    name = type(op.ins).__name__
    if name == "Preload":
        op.writes.append((SLOT.format(op.ins.slot), (0, 1), (0, 1)))
    elif name in ("MatmulWS", "MatmulIS"):
        op.reads.append((SLOT.format(op.ins.slot), (0, 1), (0, 1)))
