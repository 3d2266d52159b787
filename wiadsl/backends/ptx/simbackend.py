"""Target ``ptxsim``: emit PTX plus a launch plan and run it in the PTX simulator.

Expose as ``wiadsl.backends.ptx.simbackend:BACKEND`` (the registry lives in
``wiadsl/runtime/backend.py``). Shapes are specialized per call (static extents
make every size a PTX immediate), so ``specialize_shapes`` is True. Options:
``arch``, ``opt_level`` (default 2, as wiac's -O), ``fast_math`` and ``allow_tf32``; the PTX is built by
``program.ptx_program``, as ``wiac -o x.ptx`` builds it.

Invariant: simulated buffers are NumPy byte arrays; every launch goes through
``sim.launch``, which checks bounds (an out-of-range access is an error).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ...ir.module import ModuleOp
from .executor import PlanRun
from .isa import DEFAULT_ARCH
from .program import TargetOptions, ptx_program
from .sim.tensormap import TensorMap, TensorMapArg


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

    def tensor_map(self, buf: np.ndarray, tm: TensorMap) -> TensorMapArg:
        """The simulator's tensor map argument: ``tm``'s address is the offset into ``buf``."""
        return TensorMapArg(buf, replace(tm, address=0), tm.address)

    def launch(self, kernel: str, grid, block, args: list[Any], shared_bytes: int) -> None:
        from .sim import launch

        stats = launch(self.ptx, kernel, grid, block, args, shared_bytes)
        self.launches += 1
        self.thread_instructions += stats.thread_instructions

    def prepare(self, kernel: str, grid, block, args: list[Any],
                shared_bytes: int) -> Callable[[], None]:
        """This launch as a function, to repeat it (``timing.py``; the simulator runs each
        launch to completion, so there is nothing to wait for)."""
        return lambda: self.launch(kernel, grid, block, args, shared_bytes)

    def synchronize(self) -> None:
        """Launches complete before ``launch`` returns."""

    def copy(self, dst: np.ndarray, src: np.ndarray, nbytes: int) -> None:
        dst[:nbytes] = src[:nbytes]


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
    options: TargetOptions
    make_device: Any
    compiled: PlannedKernel | None = None
    stats: dict[str, Any] = field(default_factory=dict)

    def specialize(self, inputs: Sequence[np.ndarray]) -> PlannedKernel:
        """The PTX and plan for these inputs' shapes (no device needed): what ``wiac -O<l>
        --arch A -D ... -o x.ptx`` writes for the same shapes (``program.ptx_program``)."""
        if self.compiled is None:
            shapes = shapes_of(self.module, self.kernel, inputs)
            ptx, plan = ptx_program(self.module, {self.kernel: shapes}, self.options)
            self.compiled = PlannedKernel(ptx, plan, self.make_device)
        return self.compiled

    def run(self, inputs: Sequence[np.ndarray]) -> Sequence[object]:
        compiled = self.specialize(inputs)
        out = compiled.run(inputs)
        self.stats = dict(compiled.stats)
        return out


class SimBackend:
    name = "ptxsim"
    specialize_shapes = True

    def compile(self, module: ModuleOp, kernel: str, options: dict[str, Any]) -> ShapeSpecialized:
        return ShapeSpecialized(module, kernel, TargetOptions.from_target(self.name, options, DEFAULT_ARCH),
                                SimDevice)


BACKEND = SimBackend()
