"""``wiadsl.profile(kernel, *args)``: where the time goes, per fused kernel (seed 5.10).

Steps: specialize the kernel to the call (as the jit does), run the CPU
backend's tensor passes, trace the optimized IR in the interpreter to get every
fused kernel's real inputs, then compile each fused kernel on its own
(``trace.extract``, through the compile cache) and time it (median of repeated
runs). FLOPs and bytes come from ``counts``; the roofs from ``machine.peaks()``.
The whole kernel is timed too, compiled as the jit compiles it, and N calls of
it eager (the interpreter, op by op, on the IR as lowered) and compiled give the
first seed's latency comparison (p50, p99, jitter).

Invariants: a fused kernel's verdict follows the seed: compute-bound when
``peak_flops < peak_bw * intensity`` (then the percentage is of peak FLOP/s),
else memory-bound (percentage of peak bandwidth). The sum of the fused kernels'
times is reported beside the whole kernel's time, never in its place.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any

from ..backends.llvm.backend import CpuKernel
from ..ir.copying import copy_module
from ..ir.interpreter import run_func
from . import counts, trace
from .machine import Peaks, peaks
from .timing import Latency, median_ms

#: A kernel under this time whose roofline time is under a tenth of it is bound by
#: call overhead (argument passing, result allocation), not by either roof.
TINY_MS = 0.05


@dataclass(frozen=True)
class KernelStat:
    """One fused kernel: its time and the roofline numbers derived from it."""

    label: str
    op: str
    ms: float
    flops: int
    bytes: int
    peaks: Peaks

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else float("inf")

    @property
    def gflops(self) -> float:
        return self.flops / (self.ms * 1e6) if self.ms > 0 else 0.0

    @property
    def gbs(self) -> float:
        return self.bytes / (self.ms * 1e6) if self.ms > 0 else 0.0

    @property
    def bound(self) -> str:
        return "compute" if self.peaks.gflops < self.peaks.gbs * self.intensity else "memory"

    @property
    def utilization(self) -> float:
        """Percent of the roof that binds (peak FLOP/s or peak bandwidth)."""
        if self.bound == "compute":
            return 100 * self.gflops / self.peaks.gflops
        return 100 * self.gbs / self.peaks.gbs

    def suggestion(self) -> str:
        pct = f"{self.utilization:.0f}%"
        roof_ms = max(self.flops / self.peaks.gflops, self.bytes / self.peaks.gbs) / 1e6
        if self.ms < TINY_MS and roof_ms < 0.1 * self.ms:
            return (f"call-overhead bound ({self.ms * 1e3:.1f} us for {self.bytes / 1024:.1f} KiB): "
                    f"fuse it into a neighbour")
        if self.flops == 0:
            return f"pure data movement at {pct} of bandwidth: fold it into its consumer's indexing"
        if self.bound == "memory":
            if self.utilization < 50:
                return f"memory-bound at {pct} of bandwidth: fuse with its consumer"
            return f"memory-bound at {pct} of bandwidth: near the roof; only moving fewer bytes helps"
        if self.op.endswith(("matmul", "conv2d")):
            return f"compute-bound at {pct} of peak: autotune its gemm tiles (wiadsl.autotune)"
        return f"compute-bound at {pct} of peak: check it vectorizes (wiac -o k.s)"


@dataclass
class Profile:
    kernel: str
    stats: list[KernelStat]
    total_ms: float
    peaks: Peaks
    latency: list[Latency] = field(default_factory=list)

    def report(self) -> str:
        p = self.peaks
        lines = [f"profile of '{self.kernel}': {self.total_ms:.3f} ms per call (compiled, median); "
                 f"fused kernels sum to {sum(s.ms for s in self.stats):.3f} ms run one by one",
                 f"machine peaks ({p.threads} threads, {p.cpu}): {p.gflops:.1f} GFLOP/s FMA, "
                 f"{p.gbs:.1f} GB/s memory, ridge at {p.ridge:.2f} FLOP/byte",
                 f"{'kernel':<26}{'time ms':>10}{'MFLOP':>10}{'KiB':>10}{'FLOP/B':>8}"
                 f"{'GFLOP/s':>9}{'GB/s':>8}  bound"]
        for s in self.stats:
            lines.append(f"{s.label[:25]:<26}{s.ms:>10.4f}{s.flops / 1e6:>10.3f}{s.bytes / 1024:>10.1f}"
                         f"{s.intensity:>8.2f}{s.gflops:>9.2f}{s.gbs:>8.2f}  {s.bound}")
            lines.append(f"    -> {s.suggestion()}")
        if self.latency:
            lines.append("eager (interpreter, op by op) vs compiled, same inputs:")
            lines += ["  " + lat.line() for lat in self.latency]
            eager, compiled = self.latency
            lines.append(f"  compiled is {eager.p50 / compiled.p50:.1f}x faster at p50, jitter "
                         f"{eager.jitter:.3f} -> {compiled.jitter:.3f} ms")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()


LAST: list[Profile] = []  # the most recent profile, for plot_roofline(path)


def profile(kernel: Any, *args: object, runs: int = 100, level: int = 3) -> Profile:
    """Profile ``kernel`` (a jit KernelFunction) on ``args``; ``runs`` calls each for the
    eager vs compiled latency comparison (0 skips it)."""
    module, inputs = trace.specialize(kernel, args)
    opt = trace.optimized(module, level)
    found = peaks()
    stats = []
    for i, t in enumerate(trace.trace(opt, kernel.name, inputs)):
        if not t.is_unit:
            continue
        unit, values = trace.extract(t, f"{kernel.name}.{i}.{t.label}")
        compiled = CpuKernel(unit, unit.funcs[0].name, level, passes=False)
        ms = median_ms(partial(compiled.run, values))
        stats.append(KernelStat(t.label, t.op.name, ms, counts.flops(t), counts.bytes_moved(t), found))
    whole = CpuKernel(copy_module(module), kernel.name, level)  # compiling optimizes its module
    total = median_ms(lambda: whole.run(inputs))
    latency = []
    if runs:
        latency = [Latency.of("eager", lambda: run_func(module, kernel.name, list(inputs)), runs),
                   Latency.of("compiled", lambda: whole.run(inputs), runs)]
    result = Profile(kernel.name, stats, total, found, latency)
    LAST[:] = [result]
    return result

