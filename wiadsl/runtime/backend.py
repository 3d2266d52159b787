"""The contract between the jit API and a backend, and the registry of targets.

A backend turns the optimized IR of one kernel specialization into something it
can run. The jit API owns everything around it: argument checking, the
specialization cache, output delivery. Backends are imported lazily, so a
missing optional dependency (say, cuda-python) only matters when that target is
asked for.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ..diagnostics import WiaUsageError
from ..records import record

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

    The jit then skips its general checks on repeated calls (``CallPlan``), so the
    call ``call_for`` gives must take nothing it was not made for.
    """

    def call_for(self, shapes: tuple[tuple[int, ...], ...]
                 ) -> Callable[[Sequence[object]], list[object] | None] | None:
        """For inputs of ``shapes`` (after a ``run`` at them): a call that runs ``args``
        and returns outputs in order when each is exactly an ndarray (not a subclass)
        of the compiled dtype and of ``shapes``, C-contiguous and aligned, and else
        returns None, having run nothing. None when there is no such call."""
        ...

    def fast_for(self, shapes: tuple[tuple[int, ...], ...],
                 delivered: Sequence[tuple[np.dtype, tuple[int, ...]]]
                 ) -> Callable[[tuple[object, ...]], object] | None:
        """Like ``call_for``, but the call takes the argument tuple and returns what the
        jit delivers -- given ``delivered``, the (dtype, shape) of each output the
        checked call delivered: the output, or a tuple of them, a rank-0 one as a
        NumPy scalar -- or ``NOT_RUN``. None when there is no such call."""
        ...


#: What a ``FastKernel.fast_for`` call answers for arguments it does not take.
NOT_RUN = object()


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


@record
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
