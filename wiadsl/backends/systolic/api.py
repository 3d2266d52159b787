"""Entry points for tools: the listing of a kernel for given shapes, and the stats text.

``emit_sasm`` is what ``wiac k.wia -D M=256 ... -o k.sasm`` writes; ``format_stats``
(re-exported from ``stats``) is what ``wiac --run --target systolic`` prints.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...diagnostics import WiaUsageError
from ...ir.module import ModuleOp
from ...ir.types import TensorType
from .config import config_from_options
from .isa import Program
from .kernel import SystolicKernel
from .stats import format_stats

__all__ = ["emit_sasm", "emit_sasm_program", "format_stats", "trace_kernel"]


def trace_kernel(module: ModuleOp, kernel: str, shapes: dict[str, tuple[int, ...]],
                 **options: Any) -> SystolicKernel:
    """Run ``kernel`` once on synthetic inputs of ``shapes`` (tensor params; scalars
    take 1) so every section is compiled; returns the kernel (listing, stats)."""
    if kernel not in module:
        raise WiaUsageError(f"no function named '{kernel}' in the module")
    compiled = SystolicKernel(module, kernel, config_from_options(options))
    inputs = []
    for arg in compiled.func.args:
        name = arg.name_hint or f"arg{arg.index}"
        t = arg.type
        if isinstance(t, TensorType):
            if name not in shapes:
                raise WiaUsageError(f"emit_sasm needs the shape of tensor parameter '{name}'")
            shape = tuple(shapes[name])
            if len(shape) != t.rank or any(d is not None and d != n for d, n in zip(t.shape, shape)):
                raise WiaUsageError(f"shape {shape} of '{name}' does not match its type {t}")
            inputs.append(np.ones(shape, t.dtype.numpy))
        else:
            inputs.append(np.ones((), np.int64 if not hasattr(t, "dtype") else t.dtype.numpy))
    compiled.run(inputs)
    return compiled


def emit_sasm(module: ModuleOp, kernel: str, array: tuple[int, int] = (128, 128),
              dataflow: str = "ws", shapes: dict[str, tuple[int, ...]] | None = None,
              **options: Any) -> str:
    """The systolic assembly of ``kernel`` for input ``shapes`` (param name -> shape).

    Shapes fix every extent; the listing is traced from one run on synthetic data
    (ones), so data-dependent control flow follows that run. Options as for the
    ``systolic`` target (``timing``, ``spad``...). WiaUsageError on bad input.
    """
    traced = trace_kernel(module, kernel, shapes or {}, array=array, dataflow=dataflow, **options)
    return traced.listing().text()


def emit_sasm_program(module: ModuleOp, kernels: dict[str, dict[str, tuple[int, ...]]],
                      array: tuple[int, int] = (128, 128), dataflow: str = "ws",
                      **options: Any) -> str:
    """The listings of several kernels (name -> input shapes) in one text, one
    ``.kernel NAME`` line before each (``asm.parse_program`` reads it back)."""
    listings = {name: trace_kernel(module, name, shapes, array=array, dataflow=dataflow,
                                   **options).listing() for name, shapes in kernels.items()}
    config = next(iter(listings.values())).config  # one machine: the same options for all
    return Program(config, listings).text()
