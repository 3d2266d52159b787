"""Instruction records and the hazard rules between them (the event model's rules).

Each instruction of a section becomes an ``Op`` in program order with the unit it
runs on, its costs and the buffer regions it reads and writes — taken from the
event simulator's own ``Timeline.schedule`` call for it (``costs.record``), so DMA
and vector instructions cost here exactly what they cost there.

An op may issue in cycle ``c`` once every program-earlier op it conflicts with has
got far enough:
- it reads what the earlier one writes (RAW) or writes it too (WAW): that op is done;
- it writes what the earlier one reads (WAR): that op has read it (``read_end``);
- both are array instructions on an accumulator buffer: no wait (the array adds
  partial sums in order);
- a matmul after a preload of its slot, a preload after a matmul or preload of its
  slot: the earlier op has issued (the PE-level rules in the grid do the rest).
Times are only known once observed (the grid reports them), so an op that has not
issued or not finished blocks its dependents.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Ref = tuple[str, tuple[int, int], tuple[int, int]]  # (buffer, rows, cols)
#: pseudo-buffer of weight slot S: orders preloads and matmuls of one slot
SLOT = "#w{}"


def _overlap(a: Ref, b: Ref) -> bool:
    return (a[0] == b[0] and a[1][0] < b[1][1] and b[1][0] < a[1][1]
            and a[2][0] < b[2][1] and b[2][0] < a[2][1])


@dataclass(eq=False)
class Op:
    index: int
    ins: Any
    unit: str
    busy: int
    latency: int
    reads: list[Ref]
    writes: list[Ref]
    start: int | None = None
    read_end: int | None = None
    done: int | None = None
    deps: list[tuple[Op, str]] = field(default_factory=list)

    def complete(self, cycle: int) -> bool:
        return (self.done is not None and self.done <= cycle
                and self.read_end is not None and self.read_end <= cycle)

    def reached(self, what: str, cycle: int) -> bool:
        t = {"done": self.done, "read_end": self.read_end, "start": self.start}[what]
        return t is not None and t <= cycle


def dependencies(op: Op, earlier: list[Op], acc_buffers: frozenset[str]) -> list[tuple[Op, str]]:
    """The (earlier op, what it must reach) pairs that gate ``op``; cause order:
    the first listed is reported as the stall cause."""
    deps: list[tuple[Op, str]] = []
    for e in earlier:
        for r in op.reads:
            for w in e.writes:
                if _overlap(r, w) and not _in_order(op, e, r[0], acc_buffers):
                    deps.append((e, "start" if r[0].startswith("#") else "done"))
        for w in op.writes:
            for x in e.writes:
                if _overlap(w, x) and not _in_order(op, e, w[0], acc_buffers):
                    deps.append((e, "start" if w[0].startswith("#") else "done"))
            for x in e.reads:
                if _overlap(w, x) and not _in_order(op, e, w[0], acc_buffers):
                    deps.append((e, "start" if w[0].startswith("#") else "read_end"))
    return deps


def _in_order(op: Op, e: Op, buf: str, acc_buffers: frozenset[str]) -> bool:
    return op.unit == "array" and e.unit == "array" and buf in acc_buffers


def blocking(op: Op, cycle: int) -> set[str]:
    """What keeps ``op`` from issuing in ``cycle`` (empty: free to go): ``weights``
    (a slot's preload), ``operands`` (RAW), ``destination`` (WAR/WAW)."""
    causes: set[str] = set()
    for e, what in op.deps:
        if not e.reached(what, cycle):
            if what == "start":
                causes.add("weights")
            elif any(_overlap(r, w) for r in op.reads for w in e.writes):
                causes.add("operands")
            else:
                causes.add("destination")
    return causes


#: the event model names a stall after the bound that ends last, the first of these on ties
CAUSE_ORDER = ("operands", "destination", "weights")
