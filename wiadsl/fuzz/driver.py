"""``run_fuzz``: generate programs, check them differentially, reduce the failures.

Each program runs in a worker process (``worker.py``), so a backend that kills
its process (a segfault in native code) or hangs is recorded as a crash of that
program and the worker is restarted; the fuzzer itself never dies with it.

Invariants:
- Program ``i`` of a run with seed ``S`` has seed ``S * 1_000_000 + i``, so any
  program is regenerated from its seed alone (``genprog.generate``).
- ``targets`` lists what every program goes through; ``every`` thins a target
  out (``{"systolic": 4}``: every 4th program), to fit a time budget.
- A run stops starting programs once ``budget_s`` has passed (the report says
  how many ran); a reduction gets at most ``reduce_s`` seconds.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .differential import ALL_TARGETS, CaseResult
from .worker import WorkerPool

DEFAULT_TARGETS = ("passes", "numpy", "cpu-O0", "cpu-O3", "cpu-generic", "systolic", "ptxsim")


@dataclass
class Failure:
    seed: int
    target: str
    kind: str
    detail: str
    reproducer: str = ""


@dataclass
class FuzzReport:
    """The numbers of one run (``ok`` when no mismatch and no crash)."""

    seed: int
    requested: int
    programs: int = 0
    invalid: int = 0
    oracle_errors: int = 0
    checks: Counter = field(default_factory=Counter)
    mismatches: int = 0
    crashes: int = 0
    unsupported: Counter = field(default_factory=Counter)
    #: per target: results that matched another branch of a near-threshold condition
    ambiguous: Counter = field(default_factory=Counter)
    failures: list[Failure] = field(default_factory=list)
    invalid_reasons: Counter = field(default_factory=Counter)
    unsupported_reasons: Counter = field(default_factory=Counter)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.mismatches == 0 and self.crashes == 0

    def add(self, r: CaseResult) -> list[Failure]:
        self.programs += 1
        if not r.valid:
            self.invalid += 1
            self.invalid_reasons[r.oracle_error[:80]] += 1
            return []
        self.oracle_errors += bool(r.oracle_error)
        new = []
        for v in r.verdicts:
            self.checks[v.target] += 1
            if v.kind == "unsupported":
                self.unsupported[v.target] += 1
                self.unsupported_reasons[f"{v.target}: {v.detail.splitlines()[0][:90]}"] += 1
            elif v.kind == "ambiguous":
                self.ambiguous[v.target] += 1
            elif v.kind in ("mismatch", "crash"):
                self.mismatches += v.kind == "mismatch"
                self.crashes += v.kind == "crash"
                new.append(Failure(r.seed, v.target, v.kind, v.detail))
        self.failures += new
        return new

    def summary(self) -> str:
        checks = ", ".join(f"{t} {n}" for t, n in sorted(self.checks.items()))
        lines = [f"fuzz seed {self.seed}: {self.programs}/{self.requested} programs in "
                 f"{self.seconds:.1f}s; {self.invalid} rejected by the checker, "
                 f"{self.oracle_errors} raise at run time (both sides must)",
                 f"  checks: {checks or 'none'}",
                 f"  mismatches: {self.mismatches}, crashes: {self.crashes}"]
        if self.unsupported:
            lines.append("  unsupported: " + ", ".join(f"{t} {n}" for t, n in
                                                      sorted(self.unsupported.items())))
        if self.ambiguous:
            lines.append("  ambiguous (a near-threshold branch; either side is right): " +
                         ", ".join(f"{t} {n}" for t, n in sorted(self.ambiguous.items())))
        for f in self.failures:
            where = f" -> {f.reproducer}" if f.reproducer else ""
            lines.append(f"  {f.kind} seed={f.seed} {f.target}: {f.detail[:200]}{where}")
        for reason, n in self.unsupported_reasons.most_common(8):
            lines.append(f"  unsupported x{n}: {reason}")
        for reason, n in self.invalid_reasons.most_common(5):
            lines.append(f"  rejected x{n}: {reason}")
        return "\n".join(lines)

    def to_json(self) -> str:
        data = {k: dict(v) if isinstance(v, Counter) else v for k, v in vars(self).items()}
        data["failures"] = [asdict(f) for f in self.failures]
        data["ok"] = self.ok
        return json.dumps(data, indent=1, default=str)


def case_seed(seed: int, i: int) -> int:
    return seed * 1_000_000 + i


def targets_for(i: int, targets: tuple[str, ...], every: dict[str, int]) -> tuple[str, ...]:
    return tuple(t for t in targets if i % max(1, every.get(t, 1)) == 0)


def run_fuzz(seed: int, count: int, targets: tuple[str, ...] | list[str] = DEFAULT_TARGETS,
             out_dir: str | os.PathLike | None = None, *, budget_s: float | None = None,
             every: dict[str, int] | None = None, jobs: int = 1, reduce: bool = True,
             reduce_s: float = 120.0, timeout_s: float = 120.0, log=None) -> FuzzReport:
    """Fuzz ``count`` programs from ``seed``; write reproducers of failures to ``out_dir``."""
    unknown = [t for t in targets if t not in ALL_TARGETS]
    if unknown:
        from ..diagnostics import WiaUsageError

        raise WiaUsageError(f"unknown fuzz target(s) {', '.join(unknown)}; "
                            f"targets: {', '.join(ALL_TARGETS)}")
    report = FuzzReport(seed, count)
    out = Path(out_dir) if out_dir is not None else None
    start = time.monotonic()
    jobs_list = [(case_seed(seed, i), targets_for(i, tuple(targets), every or {}))
                 for i in range(count)]
    with WorkerPool(max(1, jobs), timeout_s) as pool:
        for result in pool.imap(jobs_list, lambda: budget_s is not None
                                and time.monotonic() - start > budget_s):
            for failure in report.add(result):
                if reduce and out is not None:
                    failure.reproducer = pool.reduce(failure, reduce_s, out)
            if log is not None and report.programs % 50 == 0:
                log(f"{report.programs} programs, {report.mismatches} mismatches, "
                    f"{report.crashes} crashes, {time.monotonic() - start:.0f}s")
    report.seconds = time.monotonic() - start
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / f"report-seed{seed}.json").write_text(report.to_json())
    return report
