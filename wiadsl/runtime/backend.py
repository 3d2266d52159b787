"""The contract between the jit API and a backend, and the registry of targets.

A backend turns the optimized IR of one kernel specialization into something it
can run. The jit API owns everything around it: argument checking, the
specialization cache, output delivery. Backends are imported lazily, so a
missing optional dependency (say, cuda-python) only matters when that target is
asked for.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ..diagnostics import WiaUsageError

if TYPE_CHECKING:
    from ..ir.module import ModuleOp


class CompiledKernel(Protocol):
    """One kernel compiled for one specialization."""

    stats: dict[str, Any]

    def run(self, inputs: Sequence[np.ndarray]) -> Sequence[object]:
        """Run on checked inputs (declaration order); return outputs in order."""
        ...


class FastKernel(CompiledKernel, Protocol):
    """A compiled kernel that can check a call itself (optional; the CPU's does).

    The jit then skips its general checks on repeated calls (``CallPlan``), so
    ``try_run`` must take nothing it was not compiled for.
    """

    def try_run(self, args: Sequence[object]) -> list[object] | None:
        """Run on ``args`` and return outputs in order when each is exactly what this
        specialization was compiled for -- an ndarray (not a subclass) of its dtype
        and shape, C-contiguous and aligned; else return None, having run nothing."""
        ...


class IntoKernel(CompiledKernel, Protocol):
    """A compiled kernel that can compute results in the caller's output buffers
    (optional; the CPU's does, by destination passing). The jit uses it for calls
    that pass output buffers (``f(x, y=buf)``)."""

    def run_into(self, inputs: Sequence[np.ndarray],
                 buffers: Sequence[np.ndarray | None]) -> Sequence[object]:
        """``run``, with one buffer (or None) per output; an output computed in its
        buffer comes back as that very array, any other as a fresh one."""
        ...


class Backend(Protocol):
    name: str
    #: True when the backend wants every extent static (it compiles per shape).
    specialize_shapes: bool

    def compile(self, module: ModuleOp, kernel: str, options: dict[str, Any]) -> CompiledKernel:
        ...


@dataclass
class InterpretedKernel:
    """The reference interpreter as a backend: the IR runs op by op on NumPy."""

    module: ModuleOp
    kernel: str
    stats: dict[str, Any] = field(default_factory=dict)

    def run(self, inputs: Sequence[np.ndarray]) -> Sequence[object]:
        from ..ir.interpreter import run_func

        return run_func(self.module, self.kernel, list(inputs))


class InterpreterBackend:
    name = "interp"
    specialize_shapes = False

    def compile(self, module: ModuleOp, kernel: str, options: dict[str, Any]) -> CompiledKernel:
        if options:
            raise WiaUsageError(f"target 'interp' takes no options, got {', '.join(options)}")
        return InterpretedKernel(module, kernel)


#: target name -> "module:attribute" of a Backend instance (imported on first use).
TARGETS: dict[str, str] = {
    "interp": "wiadsl.runtime.backend:INTERPRETER",
    "cpu": "wiadsl.backends.llvm.backend:BACKEND",
    "systolic": "wiadsl.backends.systolic.backend:BACKEND",
    "ptxsim": "wiadsl.backends.ptx.simbackend:BACKEND",
    "cuda": "wiadsl.backends.ptx.cuda:BACKEND",
}

INTERPRETER = InterpreterBackend()


def get_backend(target: str) -> Backend:
    """The backend for ``target``, or a WiaUsageError saying what is available."""
    if target not in TARGETS:
        raise WiaUsageError(f"unknown target '{target}'; targets: {', '.join(TARGETS)}")
    module_name, attr = TARGETS[target].split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise WiaUsageError(f"target '{target}' is not available here: {exc}") from None
    return getattr(module, attr)
