"""Repeated timing with medians, and latency distributions (p50, p99, jitter).

Invariants: the first call of anything timed is a warm-up and is never counted;
a measurement is at least ``min_runs`` calls and stops after ``max_runs`` calls
or once ``budget_s`` has passed; figures are medians (robust to a loaded
machine), never minima or means.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


def sample(fn: Callable[[], object], min_runs: int = 5, max_runs: int = 1000,
           budget_s: float = 0.2) -> list[float]:
    """Seconds per call of ``fn`` (after one warm-up call)."""
    fn()
    times: list[float] = []
    deadline = time.perf_counter() + budget_s
    while len(times) < max_runs and (len(times) < min_runs or time.perf_counter() < deadline):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def median_ms(fn: Callable[[], object], **kw: float) -> float:
    return float(np.median(sample(fn, **kw))) * 1e3  # type: ignore[arg-type]


@dataclass(frozen=True)
class Latency:
    """The distribution of N timed calls (milliseconds)."""

    name: str
    ms: tuple[float, ...]

    @staticmethod
    def of(name: str, fn: Callable[[], object], runs: int) -> Latency:
        fn()  # warm-up
        out = []
        for _ in range(runs):
            t0 = time.perf_counter()
            fn()
            out.append((time.perf_counter() - t0) * 1e3)
        return Latency(name, tuple(out))

    @property
    def p50(self) -> float:
        return float(np.percentile(self.ms, 50))

    @property
    def p99(self) -> float:
        return float(np.percentile(self.ms, 99))

    @property
    def jitter(self) -> float:
        """p99 - p50: how far the slow calls stray from the typical one."""
        return self.p99 - self.p50

    @property
    def std(self) -> float:
        return float(np.std(self.ms))

    def line(self) -> str:
        return (f"{self.name:<9} p50 {self.p50:9.3f} ms  p99 {self.p99:9.3f} ms  "
                f"jitter {self.jitter:8.3f} ms  std {self.std:8.3f} ms  (n={len(self.ms)})")
