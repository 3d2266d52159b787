"""The cost model: an analytic roofline estimate, refined by a fit on measurements.

``analytic(config, shapes, peaks)`` estimates seconds for a kernel's gemms:
the FMA work (padded to whole micro-tiles) at the per-thread FMA peak scaled by
the micro-kernel's efficiency (enough independent accumulators to hide FMA
latency, FMAs per load, vector width, loop overhead), plus the memory traffic of
packing B, re-reading A from L2 and loading/storing C once per K block.

``Fitted`` corrects it: ``log(measured) = log(analytic) + w . features(config)``,
fitted by ridge regression on every measurement so far (so configs the analytic
model over- or under-rates move in the ranking). With fewer than ``MIN_FIT``
measurements it predicts the analytic estimate unchanged.

Invariant: both models only rank configs; neither decides correctness, and the
tuner keeps a config only after measuring it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..backends.llvm.gemm import PARALLEL_FLOPS, THREADS, GemmConfig
from ..profile.machine import Peaks
from .space import GemmShape

MIN_FIT = 3
RIDGE = 0.1
CALL_S = 2e-8  # one micro-kernel call and its loop bookkeeping


def analytic(c: GemmConfig, shapes: list[GemmShape], peaks: Peaks, host_bits: int) -> float:
    total = 0.0
    peak_thread = peaks.gflops / peaks.threads * 1e9
    bw_thread = peaks.gbs / peaks.threads * 1e9
    for s in shapes:
        lanes = c.vector_bits // (8 * s.itemsize)
        nr = c.nv * lanes
        # the driver's split (gemm.GemmBuilder.driver): columns when there are enough,
        # else rows; the estimate is one thread's share
        by_cols = s.n >= 2 * nr * THREADS
        parallel = (THREADS > 1 and s.m * s.n * s.k >= PARALLEL_FLOPS
                    and (by_cols or s.m >= 2 * c.mr * THREADS))
        m = math.ceil(s.m / THREADS) if parallel and not by_cols else s.m
        n = math.ceil(s.n / THREADS) if parallel and by_cols else s.n
        full, tail = (m // c.mr) * c.mr, m % c.mr
        n_pad = math.ceil(n / nr) * nr
        width = c.vector_bits / host_bits
        latency = min(1.0, c.mr * c.nv / 8)          # 2 FMA pipes x 4 cycles in flight
        loads = min(1.0, c.mr * c.nv / (c.nv + c.mr))  # FMAs per load, 2 loads a cycle
        loop = 1 - 0.15 / c.unroll
        fma = 2 * full * n_pad * s.k / (peak_thread * width * latency * loads * loop)
        fma += 2 * tail * n_pad * s.k / (peak_thread * width * min(1.0, c.nv / 8))
        k_blocks = math.ceil(s.k / c.kc)
        pack = 2 * s.k * n_pad * s.itemsize / bw_thread
        a_l2 = m * s.k * s.itemsize * math.ceil(n / nr) / (4 * bw_thread)
        c_mem = 2 * m * n * s.itemsize * k_blocks / bw_thread
        calls = math.ceil(m / c.mr) * math.ceil(n / nr) * k_blocks * CALL_S
        total += s.count * (fma + pack + a_l2 + c_mem + calls)
    return total


def features(c: GemmConfig, shapes: list[GemmShape]) -> np.ndarray:
    waste = 0.0
    for s in shapes:
        nr = c.nv * c.vector_bits // (8 * s.itemsize)
        waste += (math.ceil(s.n / nr) * nr - s.n) / max(s.n, 1) + (s.m % c.mr) / max(s.m, 1)
    return np.array([1.0, c.mr / 8, c.nv / 2, c.vector_bits / 256, math.log2(c.kc) / 8,
                     math.log2(c.mc) / 7, c.unroll / 4, waste])


@dataclass
class Fitted:
    """The analytic model times a correction fitted on (config, measured seconds)."""

    shapes: list[GemmShape]
    peaks: Peaks
    host_bits: int
    weights: np.ndarray | None = None
    seen: list[tuple[GemmConfig, float]] = field(default_factory=list)

    def add(self, config: GemmConfig, seconds: float) -> None:
        self.seen.append((config, seconds))
        if len(self.seen) >= MIN_FIT:
            x = np.stack([features(c, self.shapes) for c, _ in self.seen])
            r = np.array([math.log(t) - math.log(self.base(c)) for c, t in self.seen])
            self.weights = np.linalg.solve(x.T @ x + RIDGE * np.eye(x.shape[1]), x.T @ r)

    def base(self, c: GemmConfig) -> float:
        return max(analytic(c, self.shapes, self.peaks, self.host_bits), 1e-12)

    def predict(self, c: GemmConfig) -> float:
        if self.weights is None:
            return self.base(c)
        return self.base(c) * math.exp(float(features(c, self.shapes) @ self.weights))
