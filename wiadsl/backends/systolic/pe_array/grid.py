"""What the PE grids share: operand access, accumulator writes, and their events.

A grid is told when an array instruction issues and then advanced one cycle at a
time (``step``); it reads its operands from the scratchpad in the cycles the
hardware would (one row per cycle through the edge skew registers) and writes each
result row into the accumulators in the cycle it leaves the de-skew registers. It
reports what the scoreboard needs as ``Event``s: when an instruction has read its
last scratchpad row (``read_end``) and when its last accumulator row has landed
(``done``; for a preload: when the streaming may start).

Arithmetic: int operands (i8) are held as int64, every partial sum is exact, and the
accumulator add wraps to int32 — bit-exact with the event simulator. Float operands
(f16, bf16, f32) are multiplied and summed in f32 one PE at a time, top to bottom (or
k by k in os): the same values within f32 rounding, in a different order than BLAS.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ....diagnostics import WiaRuntimeError
from ..isa import Local


class Buffers(Protocol):
    """The machine's local memories (``simulator._Machine`` provides this)."""

    def tile(self, x: Local) -> np.ndarray: ...


@dataclass(frozen=True)
class Event:
    kind: str   # "read_end" or "done"
    op: Any     # the scoreboard's record of the instruction
    time: int   # the cycle from which it holds


class Grid(ABC):
    """R x C PEs: index grids, the operand kind of the section, accumulator writes."""

    def __init__(self, rows: int, cols: int, memory: Buffers):
        self.rows, self.cols, self.memory = rows, cols, memory
        self.ii, self.jj = np.indices((rows, cols))
        self.arith: type | None = None
        self.ops: dict[int, Any] = {}
        #: the last cycle any data of an issued instruction is still in the PEs
        self.busy_until = -1

    def operand(self, x: Local) -> np.ndarray:
        """A scratchpad tile as the PEs' arithmetic type (fixed by the first operand)."""
        raw = self.memory.tile(x)
        arith = np.int64 if raw.dtype.kind in "iu" else np.float32
        if self.arith is None:
            self.arith = arith
        elif self.arith is not arith:
            raise WiaRuntimeError("cycle-true array: int and float operands mixed in one section")
        return raw.astype(arith)

    def write(self, dst: Local, index: int, values: np.ndarray, accumulate: bool,
              column: bool = False) -> None:
        """Land one result row (or column, ``column=True``) of ``dst`` in the accumulators:
        overwrite, or add to the words already there (int32 wrap, f32 add)."""
        words = self.memory.tile(dst)
        target = words[:, index] if column else words[index, :]
        values = values[:len(target)]
        if self.arith is np.int64:
            total = values + (target.view(np.int32).astype(np.int64) if accumulate else 0)
            target[...] = total.astype(np.int32).view(np.uint32)
        else:
            part: np.ndarray = values.astype(np.float32)
            if accumulate:
                part = target.view(np.float32) + part
            target[...] = part.astype(np.float32).view(np.uint32)

    @abstractmethod
    def step(self, cycle: int) -> list[Event]:
        """Advance every register by one cycle; what became known in it."""

    @abstractmethod
    def flush(self) -> None:
        """Forget wave remnants once the grid has been idle past ``busy_until``."""

    def idle(self, cycle: int) -> bool:
        return cycle > self.busy_until
