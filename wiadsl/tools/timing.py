"""Latency measurement for the REPL's ``:time``: many calls, a distribution, a table.

Invariant: the first call (which compiles) is never part of the samples; at
least ``MIN_RUNS`` samples are taken, more until ``BUDGET_S`` seconds are spent
or ``MAX_RUNS`` is reached.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

MIN_RUNS, MAX_RUNS, BUDGET_S = 5, 5000, 0.3


@dataclass(frozen=True)
class Latency:
    label: str
    samples_ns: tuple[int, ...]

    def percentile(self, q: float) -> float:
        return float(np.percentile(np.asarray(self.samples_ns, dtype=np.float64), q))

    @property
    def runs(self) -> int:
        return len(self.samples_ns)


def measure(label: str, call: Callable[[], object]) -> Latency:
    """Warm up once, then time ``call`` repeatedly."""
    call()
    samples: list[int] = []
    deadline = time.perf_counter() + BUDGET_S
    while len(samples) < MIN_RUNS or (len(samples) < MAX_RUNS
                                      and time.perf_counter() < deadline):
        start = time.perf_counter_ns()
        call()
        samples.append(time.perf_counter_ns() - start)
    return Latency(label, tuple(samples))


def human(ns: float) -> str:
    """``812ns``, ``3.40us``, ``12.5ms``, ``1.20s``."""
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if ns >= scale:
            value = ns / scale
            return f"{value:.3g}{unit}" if value < 100 else f"{value:.0f}{unit}"
    return f"{ns:.0f}ns"


def latency_table(rows: list[Latency]) -> str:
    head = ("", "runs", "min", "p50", "p99", "mean")
    table = [head] + [(r.label, str(r.runs), human(min(r.samples_ns)), human(r.percentile(50)),
                       human(r.percentile(99)), human(float(np.mean(r.samples_ns))))
                      for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                       for i, (c, w) in enumerate(zip(row, widths))).rstrip()
             for row in table]
    if len(rows) == 2:
        ratio = rows[1].percentile(50) / max(rows[0].percentile(50), 1.0)
        lines.append(f"{rows[0].label} is {ratio:.2f}x the speed of {rows[1].label} (p50)")
    return "\n".join(lines)
