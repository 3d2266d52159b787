"""Per-stage compile timing and the ``WIADSL_VERBOSE=1`` log lines.

Each compile or cache lookup fills a ``Stages`` (stage name -> ms, in the order
the stages ran). With ``WIADSL_VERBOSE=1`` one line per lookup goes to stderr,
in the seed's format (§5.9: ``JIT 컴파일: %s (%.1f ms)``)::

    JIT 컴파일: matmul 3f2a9c01d4e5 (412.3 ms) [key 1.2, passes 190.4, lower 30.1, ...]
    JIT 캐시 적중: matmul 3f2a9c01d4e5 disk (2.1 ms) [key 1.2, read 0.2, load 0.7]

Invariant: a compile (cache miss) always logs ``JIT 컴파일``; a hit never does,
so "a process compiled nothing" can be read off the log.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from ..records import field, record


def verbose() -> bool:
    return os.environ.get("WIADSL_VERBOSE", "") not in ("", "0")


@record
class Stages:
    """Milliseconds per stage, in run order; ``total`` since creation."""

    ms: dict[str, float] = field(default_factory=dict)
    start: float = field(default_factory=time.perf_counter)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.ms[name] = self.ms.get(name, 0.0) + (time.perf_counter() - t0) * 1e3

    @property
    def total(self) -> float:
        return (time.perf_counter() - self.start) * 1e3

    def describe(self) -> str:
        return ", ".join(f"{k} {v:.1f}" for k, v in self.ms.items())


def log_compile(kernel: str, key: str, stages: Stages) -> None:
    if verbose():
        print(f"JIT 컴파일: {kernel} {key[:12]} ({stages.total:.1f} ms) [{stages.describe()}]",
              file=sys.stderr, flush=True)


def log_hit(kernel: str, key: str, where: str, stages: Stages) -> None:
    if verbose():
        print(f"JIT 캐시 적중: {kernel} {key[:12]} {where} ({stages.total:.1f} ms) "
              f"[{stages.describe()}]", file=sys.stderr, flush=True)
