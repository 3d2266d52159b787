"""Target ``ptxsim``: emit PTX plus a launch plan and run it in the PTX simulator.

Expose as ``wiadsl.backends.ptx.simbackend:BACKEND`` (the registry lives in
``wiadsl/runtime/backend.py``). Shapes are specialized per call (static extents
make every size a PTX immediate), so ``specialize_shapes`` is True.

Invariant: simulated buffers are NumPy byte arrays; every launch goes through
``sim.launch``, which checks bounds (an out-of-range access is an error).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...diagnostics import WiaUsageError
from ...ir.module import ModuleOp
from .emit import emit_ptx
from .executor import PlanRun
from .isa import DEFAULT_ARCH


@dataclass
class SimDevice:
    """Device memory as NumPy byte arrays; launches run in the simulator."""

    ptx: str
    launches: int = 0
    thread_instructions: int = 0

    def alloc(self, nbytes: int) -> np.ndarray:
        return np.zeros(nbytes, np.uint8)

    def upload(self, data: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(data).reshape(-1).view(np.uint8).copy()

    def download(self, buf: np.ndarray, dtype: np.dtype, count: int, offset: int = 0) -> np.ndarray:
        size = np.dtype(dtype).itemsize
        return buf[offset * size:(offset + count) * size].view(dtype).copy()

    def write(self, buf: np.ndarray, data: np.ndarray, offset: int) -> None:
        raw = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        size = data.dtype.itemsize
        buf[offset * size:offset * size + raw.size] = raw

    def launch(self, kernel: str, grid, block, args: list[Any], shared_bytes: int) -> None:
        from .sim import launch

        stats = launch(self.ptx, kernel, grid, block, args, shared_bytes)
        self.launches += 1
        self.thread_instructions += stats.thread_instructions


@dataclass
class PlannedKernel:
    """A kernel specialization: PTX, plan and a device factory; ``run`` executes the plan."""

    ptx: str
    plan: dict[str, Any]
    make_device: Any
    stats: dict[str, Any] = field(default_factory=dict)

    def run(self, inputs: Sequence[np.ndarray]) -> Sequence[object]:
        device = self.make_device(self.ptx)
        runner = PlanRun(self.plan, device)
        out = runner.run(inputs)
        self.stats = {"launches": runner.launches, "kernels": len(self.plan["kernels"]),
                      "thread_instructions": getattr(device, "thread_instructions", None)}
        return out


def shapes_of(module: ModuleOp, kernel: str, inputs: Sequence[np.ndarray]) -> dict[str, tuple]:
    func = module[kernel]
    return {a.name_hint: np.shape(x) for a, x in zip(func.args, inputs, strict=False)
            if a.name_hint and np.ndim(x) > 0}


@dataclass
class ShapeSpecialized:
    """Compiles lazily on the first call's shapes (the jit key already includes them)."""

    module: ModuleOp
    kernel: str
    arch: str
    make_device: Any
    compiled: PlannedKernel | None = None
    stats: dict[str, Any] = field(default_factory=dict)

    def run(self, inputs: Sequence[np.ndarray]) -> Sequence[object]:
        if self.compiled is None:
            ptx, plan = emit_ptx(self.module, self.kernel, self.arch,
                                 shapes_of(self.module, self.kernel, inputs))
            self.compiled = PlannedKernel(ptx, plan, self.make_device)
        out = self.compiled.run(inputs)
        self.stats = dict(self.compiled.stats)
        return out


class SimBackend:
    name = "ptxsim"
    specialize_shapes = True

    def compile(self, module: ModuleOp, kernel: str, options: dict[str, Any]) -> ShapeSpecialized:
        unknown = set(options) - {"arch"}
        if unknown:
            raise WiaUsageError(f"target 'ptxsim' takes only 'arch', got {', '.join(sorted(unknown))}")
        return ShapeSpecialized(module, kernel, options.get("arch", DEFAULT_ARCH), SimDevice)


BACKEND = SimBackend()
