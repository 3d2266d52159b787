"""A one-line progress bar for the autotuner (redrawn in place with ``\\r``).

Invariant: it writes only to the stream it was given (None: silent) and ends
its line in ``done()``, so later output starts on a fresh line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TextIO

WIDTH = 24


@dataclass
class Progress:
    total: int
    out: TextIO | None
    count: int = 0
    best: float | None = None

    def step(self, label: str, ms: float | None) -> None:
        self.count += 1
        if ms is not None and (self.best is None or ms < self.best):
            self.best = ms
        if self.out is None:
            return
        filled = WIDTH * self.count // max(self.total, 1)
        bar = "#" * filled + "." * (WIDTH - filled)
        now = "rejected" if ms is None else f"{ms:.3f} ms"
        best = f"best {self.best:.3f} ms" if self.best is not None else ""
        self.out.write(f"\r[{bar}] {self.count}/{self.total} {label:<30} {now:>10}  {best}")
        self.out.flush()

    def done(self) -> None:
        if self.out is not None:
            self.out.write("\n")
            self.out.flush()
