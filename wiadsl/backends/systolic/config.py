"""The machine a listing targets: array shape, dataflow, memories, DMA and timing mode.

Invariants:
- ``rows``/``cols`` >= 1; ``dataflow`` is ``ws``, ``os`` or ``is`` (weight-, output-
  or input-stationary); ``timing`` is
  ``overlap`` (the default machine) or ``scalesim`` (the SCALE-Sim compatibility
  mode: every instruction waits for the previous one to finish, DMA is free, and
  memory capacities are unlimited — SCALE-Sim's compute model).
- ``operands`` is ``dram`` (the default: inputs come from host memory and results go
  back through the DMA, each transfer costing bandwidth and latency) or ``resident``
  (SCALE-Sim's assumption, for a like-for-like comparison with its count in overlap
  timing: the inputs are on chip at cycle 0 and the results stay there, so ``mvin``
  and ``mvout`` take no DMA time and no latency; the program, its buffers and their
  reuse hazards are unchanged). It is printed on the ``.target`` line when not
  ``dram``; with ``scalesim`` timing DMA is free anyway.
- Sizes are in bytes; accumulator words are 32 bits wide.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ...diagnostics import WiaUsageError

DATAFLOWS = ("ws", "os", "is")
TIMINGS = ("overlap", "scalesim")
#: where a section's inputs and results live (``ArrayConfig.operands``)
OPERANDS = ("dram", "resident")
#: A capacity that never binds (compatibility mode models no memory limits).
UNLIMITED = 1 << 62
#: the largest array side the cycle-true mode accepts
CYCLE_TRUE_MAX = 16


@dataclass(frozen=True)
class ArrayConfig:
    """One systolic machine. Defaults follow a TPU-v1-like design point."""

    rows: int = 128
    cols: int = 128
    dataflow: str = "ws"
    timing: str = "overlap"
    spad_bytes: int = 8 << 20
    acc_bytes: int = 4 << 20
    dma_bytes_per_cycle: int = 256
    dma_latency: int = 64
    vec_lanes: int = 128
    #: ``dram``: DMA from/to host memory costs time; ``resident``: operands on chip (no cost)
    operands: str = "dram"
    #: run the array register by register (pe_array/); a simulator choice, not part of
    #: the machine, so it stays out of the ``.target`` line
    cycle_true: bool = False

    def __post_init__(self) -> None:
        if self.rows < 1 or self.cols < 1:
            raise WiaUsageError(f"systolic array must be at least 1x1, got {self.rows}x{self.cols}")
        if self.dataflow not in DATAFLOWS:
            raise WiaUsageError(f"dataflow must be one of {', '.join(DATAFLOWS)}, "
                                f"got '{self.dataflow}'")
        if self.timing not in TIMINGS:
            raise WiaUsageError(f"timing must be one of {', '.join(TIMINGS)}, got '{self.timing}'")
        if self.operands not in OPERANDS:
            raise WiaUsageError(f"operands must be one of {', '.join(OPERANDS)}, "
                                f"got '{self.operands}'")
        for key in ("spad_bytes", "acc_bytes", "dma_bytes_per_cycle", "vec_lanes"):
            if getattr(self, key) < 1:
                raise WiaUsageError(f"systolic option {key} must be positive")
        if self.dma_latency < 0:
            raise WiaUsageError("systolic option dma_latency must be >= 0")
        if self.cycle_true and max(self.rows, self.cols) > CYCLE_TRUE_MAX:
            raise WiaUsageError(f"cycle_true=True runs arrays up to {CYCLE_TRUE_MAX}x"
                                f"{CYCLE_TRUE_MAX} (it steps every PE every cycle), got "
                                f"{self.rows}x{self.cols}")

    @property
    def scalesim(self) -> bool:
        return self.timing == "scalesim"

    @property
    def free_dma(self) -> bool:
        """Whether mvin/mvout cost nothing: compatibility timing or resident operands."""
        return self.scalesim or self.operands == "resident"

    @property
    def spad_capacity(self) -> int:
        return UNLIMITED if self.scalesim else self.spad_bytes

    @property
    def acc_capacity(self) -> int:
        return UNLIMITED if self.scalesim else self.acc_bytes

    def header(self) -> str:
        """The ``.target`` line of a listing (parsed back by the assembler)."""
        # operands=dram (the default) is left out: listings written before it existed
        # read back unchanged
        resident = f" operands={self.operands}" if self.operands != "dram" else ""
        return (f".target rows={self.rows} cols={self.cols} dataflow={self.dataflow} "
                f"timing={self.timing} spad={self.spad_bytes} acc={self.acc_bytes} "
                f"dma_bw={self.dma_bytes_per_cycle} dma_latency={self.dma_latency} "
                f"vec_lanes={self.vec_lanes}{resident}")


#: option name (API and ``.target`` line) -> ArrayConfig field
_FIELDS = {"dataflow": "dataflow", "timing": "timing", "spad": "spad_bytes",
           "acc": "acc_bytes", "dma_bw": "dma_bytes_per_cycle", "dma_latency": "dma_latency",
           "vec_lanes": "vec_lanes", "rows": "rows", "cols": "cols",
           "operands": "operands"}
#: options whose values are strings
_STRINGS = ("dataflow", "timing", "operands")


def config_from_options(options: dict[str, Any]) -> ArrayConfig:
    """An ArrayConfig from jit options: ``array=(R, C)`` plus the keys of ``_FIELDS``.

    ``vec_lanes`` defaults to the array width (one accumulator row per cycle).
    """
    opts = dict(options)
    fields: dict[str, Any] = {}
    if "array" in opts:
        array = opts.pop("array")
        if (not isinstance(array, (tuple, list)) or len(array) != 2
                or not all(isinstance(n, int) and not isinstance(n, bool) for n in array)):
            raise WiaUsageError(f"array must be a pair of integers (rows, cols), got {array!r}")
        fields["rows"], fields["cols"] = array
    if "cycle_true" in opts:
        flag = opts.pop("cycle_true")
        if not isinstance(flag, bool):
            raise WiaUsageError(f"systolic option cycle_true must be True or False, got {flag!r}")
        fields["cycle_true"] = flag
    for key, value in opts.items():
        if key not in _FIELDS:
            known = ", ".join(["array", *_FIELDS, "cycle_true"])
            raise WiaUsageError(f"unknown systolic option '{key}'; options: {known}")
        expect_str = key in _STRINGS
        if expect_str != isinstance(value, str) or isinstance(value, bool):
            raise WiaUsageError(f"systolic option {key} has a bad value {value!r}")
        fields[_FIELDS[key]] = value
    fields.setdefault("vec_lanes", fields.get("cols", ArrayConfig.cols))
    return ArrayConfig(**fields)


def config_from_header(pairs: dict[str, str]) -> ArrayConfig:
    """The ArrayConfig of a ``.target`` line's ``key=value`` pairs."""
    fields: dict[str, Any] = {}
    for key, text in pairs.items():
        if key not in _FIELDS:
            raise WiaUsageError(f"unknown .target key '{key}'")
        fields[_FIELDS[key]] = text if key in _STRINGS else int(text)
    return ArrayConfig(**fields)


def with_timing(config: ArrayConfig, timing: str) -> ArrayConfig:
    return replace(config, timing=timing)
