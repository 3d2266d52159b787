"""Time a compiled plan's kernels on a device, with the data already there.

``time_plan`` runs the plan once through the executor (``PlanRun``, the code the
``cuda`` and ``ptxsim`` targets run: argument building, tensor maps, dynamic shared
memory, ``when`` conditions, folded grids), recording each launch as the device
received it, then times repetitions of exactly those launches on the same buffers.

Invariants:
- Inputs are uploaded once, outputs and temporaries allocated once (by the first,
  recorded run, whose outputs are returned for checking); a timed repetition makes
  the recorded launches and nothing else. A plan's host steps (device reads and
  writes between launches, such as error flags) are not repeated: their count is in
  ``Timing.host_steps`` so a caller can say so.
- A repetition of the same launches on the same inputs computes the same outputs
  (no kernel reads what it writes across launches of one plan), so timing them
  is timing the plan.
- Every measurement is ``batches`` batches of ``reps`` repetitions between two
  device synchronizations, ``reps`` chosen so one batch takes about
  ``seconds / batches``; the result is the median batch's time per repetition.
  ``time_steps`` measures any other work (a library's reference, a copy) the same
  way, so two timings compare like with like.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from .executor import Device, LaunchCall, PlanRun

#: most repetitions in one batch (a kernel of a few microseconds)
MAX_REPS = 10_000


class TimedDevice(Device, Protocol):
    """A device that can repeat launches and wait for them (``CudaDevice``, ``SimDevice``)."""

    def prepare(self, kernel: str, grid: tuple[int, int, int], block: tuple[int, int, int],
                args: list[Any], shared_bytes: int) -> Callable[[], None]: ...
    def synchronize(self) -> None: ...
    def copy(self, dst: Any, src: Any, nbytes: int) -> None: ...


@dataclass(frozen=True)
class Timing:
    """Seconds per repetition (the median batch's), and how it was measured."""

    seconds: float
    reps: int
    batches: int
    #: kernel launches per repetition
    launches: int = 0
    #: plan steps that moved data between host and device and were not repeated
    host_steps: int = 0


def time_steps(step: Callable[[], object], synchronize: Callable[[], None], *,
               seconds: float = 0.5, batches: int = 5, warmup: bool = True) -> Timing:
    """Time ``step`` (work queued on a device; ``synchronize`` waits for it): a warm-up
    (unless ``warmup`` is False), one timed repetition to size the batches (none when
    ``seconds`` <= 0: batches of one repetition), then ``batches`` batches."""
    if warmup:
        step()
        synchronize()
    reps = 1
    if seconds > 0:
        t0 = time.perf_counter()
        step()
        synchronize()
        once = max(time.perf_counter() - t0, 1e-9)
        reps = max(1, min(MAX_REPS, math.ceil(seconds / max(1, batches) / once)))
    per_batch = []
    for _ in range(max(1, batches)):
        t0 = time.perf_counter()
        for _ in range(reps):
            step()
        synchronize()
        per_batch.append((time.perf_counter() - t0) / reps)
    return Timing(statistics.median(per_batch), reps, len(per_batch))


def record_plan(plan: dict[str, Any], device: Device,
                inputs: Sequence[Any]) -> tuple[list[Any], PlanRun, list[LaunchCall]]:
    """Run ``plan`` once on ``device``: (its outputs, the run, the launches it made)."""
    calls: list[LaunchCall] = []
    runner = PlanRun(plan, device, record=calls)
    outputs = runner.run(inputs)
    return outputs, runner, calls


def replay(device: TimedDevice, calls: Sequence[LaunchCall]) -> Callable[[], None]:
    """One repetition of ``calls`` (each launch's arguments packed once, here)."""
    launches = [device.prepare(c.kernel, c.grid, c.block, list(c.args), c.shared_bytes)
                for c in calls]

    def run() -> None:
        for launch in launches:
            launch()
    return run


def time_launches(device: TimedDevice, calls: Sequence[LaunchCall], *, seconds: float = 0.5,
                  batches: int = 5, warmup: bool = True) -> Timing:
    """The time of one repetition of ``calls`` (recorded by ``record_plan``) on ``device``."""
    t = time_steps(replay(device, calls), device.synchronize, seconds=seconds, batches=batches,
                   warmup=warmup)
    return Timing(t.seconds, t.reps, t.batches, len(calls))


def time_plan(plan: dict[str, Any], device: TimedDevice, inputs: Sequence[Any], *,
              seconds: float = 0.5, batches: int = 5) -> tuple[list[Any], Timing]:
    """The plan's outputs (first run) and the time of one repetition of its launches."""
    outputs, runner, calls = record_plan(plan, device, inputs)
    t = time_launches(device, calls, seconds=seconds, batches=batches)
    return outputs, Timing(t.seconds, t.reps, t.batches, t.launches, runner.host_steps)


def copy_bandwidth(device: TimedDevice, nbytes: int, *, seconds: float = 0.5,
                   batches: int = 5, warmup: bool = True) -> tuple[float, Timing]:
    """Device-to-device copy of ``nbytes``: (bytes per second counting the bytes read and
    the bytes written, its timing). The source is filled first (never timed on
    untouched memory)."""
    src = device.upload(np.resize(np.arange(251, dtype=np.uint8), nbytes))
    dst = device.alloc(nbytes)
    t = time_steps(lambda: device.copy(dst, src, nbytes), device.synchronize,
                   seconds=seconds, batches=batches, warmup=warmup)
    return 2 * nbytes / t.seconds, t
