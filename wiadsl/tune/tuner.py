"""``wiadsl.autotune(kernel, *args)``: search, prune, rank, measure, keep (seed 5.4).

1. Specialize the kernel to the call and find its gemms (matmul, conv2d as
   im2col) with their real M, N, K (from a trace of the optimized IR).
2. ``space.generate`` -> ``space.prune`` for those shapes and this host.
3. Rank by the analytic model; measure the default config (the baseline), then
   the top half of the K candidates; fit the model on every measurement and
   re-rank the rest; measure the other half.
4. Each measured config is compiled (through the compile cache), checked against
   the default config's result, timed (median of repeated calls) and saved as
   its own record file; configs measured by earlier runs are not re-measured.
5. The best measured config becomes the one the CPU backend uses for this
   (kernel, shapes, dtypes, CPU) from then on, in every process.

Invariants: a config whose result differs from the default's is reported and
never kept; the default is measured in every run, so the printed speedup
compares two measurements taken minutes apart at most.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from typing import Any, TextIO

import numpy as np

from ..backends.llvm.backend import CpuKernel
from ..backends.llvm.gemm import GemmConfig, default_config
from ..backends.llvm.host import host
from ..diagnostics import WiaUsageError
from ..ir.copying import copy_module
from ..profile import trace
from ..profile.machine import peaks
from ..profile.timing import median_ms
from . import records, space
from .model import Fitted
from .progress import Progress


@dataclass
class TuneResult:
    kernel: str
    op: str
    gemms: list[space.GemmShape]
    best: GemmConfig
    best_ms: float
    default_ms: float
    measured: dict[str, float] = field(default_factory=dict)  #: label -> ms, this run
    earlier: int = 0
    rejected: list[str] = field(default_factory=list)

    @property
    def speedup(self) -> float:
        return self.default_ms / self.best_ms

    def summary(self) -> str:
        dims = ", ".join(f"{g.m}x{g.n}x{g.k}" + (f" (x{g.count})" if g.count > 1 else "")
                         for g in self.gemms)
        lines = [f"autotune '{self.kernel}' ({self.op} {dims}): {len(self.measured)} configs "
                 f"measured now, {self.earlier} kept from earlier runs",
                 f"  default {default_config().label()}: {self.default_ms:.3f} ms",
                 f"  best    {self.best.label()}: {self.best_ms:.3f} ms",
                 f"  speedup over the default config: {self.speedup:.2f}x"]
        lines += [f"  rejected (wrong results): {r}" for r in self.rejected]
        return "\n".join(lines)


def gemm_shapes(traced: list[trace.TracedOp]) -> list[space.GemmShape]:
    found = []
    for t in traced:
        kind = records.GEMM_OPS.get(t.op.name)
        a, b = (np.asarray(v) for v in t.inputs[:2])
        if kind == "matmul":
            m = a.shape[-2] if a.ndim > 1 else 1
            n = b.shape[-1] if b.ndim > 1 else 1
            out = np.asarray(t.outputs[0])
            count = max(1, out.size // max(1, m * n))
            found.append(space.GemmShape(m, n, a.shape[-1], count, a.itemsize))
        elif kind == "conv2d":
            out = np.asarray(t.outputs[0])
            found.append(space.GemmShape(b.shape[0], out.shape[2] * out.shape[3],
                                         int(np.prod(b.shape[1:])), a.shape[0], a.itemsize))
    return found


def autotune(kernel: Any, *args: object, top_k: int = 8, level: int = 3,
             out: TextIO | None = sys.stderr, budget_s: float = 0.3,
             summary: bool = True) -> TuneResult:
    """Tune ``kernel``'s gemm config for ``args``; print progress and (with ``summary``)
    the speedup to ``out``. ``wiac --autotune`` prints the summary itself."""
    module, inputs = trace.specialize(kernel, args)
    ops = records.gemm_ops(module)
    if not ops:
        raise WiaUsageError(f"kernel '{kernel.name}' has no matmul or conv2d to tune")
    opt = trace.optimized(module, level)
    gemms = gemm_shapes(trace.trace(opt, kernel.name, inputs))
    dtypes = [a.dtype for a in inputs]
    rid = records.record_id(module, kernel.name, [a.shape for a in inputs], dtypes)
    earlier = {m.config.label(): m.ms for m in records.measurements(rid)}
    bits = host().vector_bits
    model = Fitted(gemms, peaks(), bits)
    for label, ms in earlier.items():
        model.add(_config(records.measurements(rid), label), ms / 1e3)
    base = default_config()
    candidates = sorted(space.prune(space.generate(bits), gemms, bits), key=model.predict)
    todo = [c for c in candidates if c.label() not in earlier and c != base]
    bar = Progress(1 + min(top_k, len(todo)), out)
    reference = CpuKernel(copy_module(module), kernel.name, level, config=base).run(inputs)
    result = TuneResult(kernel.name, "+".join(sorted(set(ops))), gemms, base, math.inf, math.inf,
                        earlier=len(earlier))

    def measure(c: GemmConfig) -> None:
        compiled = CpuKernel(copy_module(module), kernel.name, level, config=c)
        got = compiled.run(inputs)
        if not all(np.allclose(np.asarray(g), np.asarray(r), rtol=1e-3, atol=1e-4, equal_nan=True)
                   for g, r in zip(got, reference, strict=True)):
            result.rejected.append(c.label())
            bar.step(c.label(), None)
            return
        ms = median_ms(lambda: compiled.run(inputs), budget_s=budget_s)
        records.save(rid, c, ms, result.op, kernel.name)
        result.measured[c.label()] = ms
        model.add(c, ms / 1e3)
        bar.step(c.label(), ms)

    measure(base)
    first = todo[:max(1, top_k // 2)]
    for c in first:
        measure(c)
    rest = sorted((c for c in todo if c not in first), key=model.predict)
    for c in rest[:max(0, top_k - len(first))]:
        measure(c)
    bar.done()
    best = records.best(rid)
    assert best is not None  # the default was just measured and saved
    result.best, result.best_ms = best.config, best.ms
    result.default_ms = result.measured[base.label()]
    if out is not None and summary:
        print(result.summary(), file=out)
    return result


def _config(found: list[records.Measurement], label: str) -> GemmConfig:
    return next(m.config for m in found if m.config.label() == label)
