"""The ``systolic`` target of ``wiadsl.jit``: options -> ArrayConfig -> SystolicKernel.

Options (``wiadsl.jit(src, target="systolic", ...)``): ``array=(R, C)``,
``dataflow="ws"|"os"|"is"``, ``timing="overlap"|"scalesim"``, ``operands="dram"|"resident"``
(resident: operands on chip, DMA free — SCALE-Sim's assumption), ``spad``, ``acc`` (bytes),
``dma_bw`` (bytes/cycle), ``dma_latency`` (cycles), ``vec_lanes``, ``cycle_true=True``
(run the array register by register, arrays up to 16x16: ``pe_array``). Bad options raise
WiaUsageError. The backend compiles per shape (``specialize_shapes``): sections
need static extents, which the call's arrays provide.
"""

from __future__ import annotations

from typing import Any

from ...ir.module import ModuleOp
from .config import config_from_options
from .kernel import SystolicKernel


class SystolicBackend:
    name = "systolic"
    specialize_shapes = True

    def compile(self, module: ModuleOp, kernel: str, options: dict[str, Any]) -> SystolicKernel:
        return SystolicKernel(module, kernel, config_from_options(options))


BACKEND = SystolicBackend()
