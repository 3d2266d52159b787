"""The registry of targets, and the reference interpreter as one of them.

Backends implement ``backends/contract.py`` and are imported lazily, so a missing
optional dependency (say, cuda-python) only matters when that target is asked for.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..backends.contract import Backend, CompiledKernel
from ..diagnostics import WiaUsageError
from ..records import field, record

if TYPE_CHECKING:
    from ..ir.module import ModuleOp


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
