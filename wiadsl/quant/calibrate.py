"""Calibration: observe the activations of every matmul/conv2d on sample inputs.

``calibrate(module, kernel, samples, observer)`` runs the (optimized, f32) IR in
the reference interpreter on each sample and feeds operand 0 of every product op
(``tensor.matmul``, ``tensor.conv2d`` and their fused forms) to one observer per
op; ``annotate`` writes each op's chosen range as ``quant_range = [lo, hi]``,
the attribute the ``quantize-int8`` pass reads.

Observers (per tensor; ranges always include 0):
- ``MinMax``: the running min and max over all samples;
- ``Percentile(p)``: the ``100 - p`` and ``p`` percentiles of all observed values
  (clips outliers; a reservoir of at most ``limit`` values per op keeps memory
  bounded: a uniform subsample, fixed seed, so calibration is deterministic).
Invariant: observing never changes what the interpreter computes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..ir.core import Operation
from ..ir.interpreter import Interpreter, convert_arg
from ..ir.module import ModuleOp

PRODUCT_OPS = ("tensor.matmul", "tensor.conv2d", "tensor.fused_matmul", "tensor.fused_conv2d")


@dataclass
class MinMax:
    """Running [min, max] of everything observed."""

    lo: float = float("inf")
    hi: float = float("-inf")

    def observe(self, x: np.ndarray) -> None:
        if x.size:
            self.lo = min(self.lo, float(np.min(x)))
            self.hi = max(self.hi, float(np.max(x)))

    def range(self) -> tuple[float, float]:
        return (min(self.lo, 0.0), max(self.hi, 0.0)) if self.lo <= self.hi else (0.0, 0.0)


@dataclass
class Percentile:
    """[100 - p, p] percentiles of a bounded uniform subsample of what was observed."""

    p: float = 99.99
    limit: int = 1 << 20
    values: list[np.ndarray] = field(default_factory=list)
    seen: int = 0
    rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(0))

    def observe(self, x: np.ndarray) -> None:
        flat = np.asarray(x, np.float32).reshape(-1)
        self.seen += flat.size
        keep = max(1, int(self.limit * flat.size / max(self.seen, 1)))
        if flat.size > keep:
            flat = self.rng.choice(flat, keep, replace=False)
        self.values.append(flat)

    def range(self) -> tuple[float, float]:
        if not self.values:
            return (0.0, 0.0)
        allv = np.concatenate(self.values)
        lo, hi = np.percentile(allv, [100.0 - self.p, self.p])
        return min(float(lo), 0.0), max(float(hi), 0.0)


Observer = MinMax | Percentile


def observer_factory(method: str, percentile: float = 99.99) -> Callable[[], Observer]:
    if method == "minmax":
        return MinMax
    if method == "percentile":
        return lambda: Percentile(percentile)
    raise ValueError(f"calibration method must be 'minmax' or 'percentile', got {method!r}")


class _Observing(Interpreter):
    """The reference interpreter, reporting operand 0 of the watched ops."""

    def __init__(self, module: ModuleOp, watched: dict[int, Observer]):
        super().__init__(module)
        self.watched = watched

    def execute(self, op: Operation, values: list[Any]) -> list[Any]:
        obs = self.watched.get(id(op))
        if obs is not None:
            obs.observe(np.asarray(values[0]))
        return super().execute(op, values)


def product_ops(module: ModuleOp, kernel: str) -> list[Operation]:
    return [op for op in module[kernel].walk() if op.name in PRODUCT_OPS]


def calibrate(module: ModuleOp, kernel: str, samples: Sequence[Sequence[Any]],
              make: Callable[[], Observer]) -> dict[int, Observer]:
    """One observer per product op of ``kernel`` (keyed by ``id(op)``), fed every sample."""
    func = module[kernel]
    watched = {id(op): make() for op in product_ops(module, kernel)}
    interp = _Observing(module, watched)
    for sample in samples:
        args = [convert_arg(func, i, a) for i, a in enumerate(sample)]
        interp.call(func, args)
    return watched


def annotate(module: ModuleOp, kernel: str, observers: dict[int, Observer]) -> int:
    """Set ``quant_range`` on every observed op; the number annotated."""
    n = 0
    for op in product_ops(module, kernel):
        obs = observers.get(id(op))
        if obs is not None:
            lo, hi = obs.range()
            op.attributes["quant_range"] = [float(lo), float(hi)]
            n += 1
    return n
