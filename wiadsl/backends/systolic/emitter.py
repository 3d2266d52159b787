"""What the GEMM emitters share: the GEMM's description, buffers, the epilogue and
store of an output tile, the memory check.

``Gemm`` names the DRAM views of C[b] = A[b] @ W[b] (A: M x K, W: K x N). An
emitter (``tiling``: ws and is, ``os_tiling``: os) fills ``body`` with the
instruction stream and ``buffers`` with the local buffers it declares.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from ...diagnostics import WiaUsageError
from ...dtypes import DType
from .config import ArrayConfig
from .epilogue import Epilogue, emit_tile
from .isa import Buffer, Instruction, Local, Mvout, Remote
from .schedule import cdiv, spans

__all__ = ["CHUNK_ROWS", "PREFETCH", "Emitter", "Gemm", "GemmEmitter", "cdiv", "spans"]

#: rows per matmul/mvout instruction in overlap timing (lets stores start early)
CHUNK_ROWS = 256
#: ws/is: the memory plan keeps room for held tiles fetched this many folds ahead (plus
#: the one in use); the scheduler may prefetch further where more fit
PREFETCH = 2


@dataclass(frozen=True)
class Gemm:
    batches: int
    m: int
    k: int
    n: int
    lhs: str          # view name, shape [B or 1, M, K]
    rhs: str          # view name, shape [B or 1, K, N]
    out: str          # view name, shape [B, M, N]
    lhs_batched: bool
    rhs_batched: bool
    operand_dtype: DType


class Emitter:
    def __init__(self, config: ArrayConfig, g: Gemm, epi: Epilogue):
        self.c, self.g, self.epi = config, g, epi
        self.body: list[Instruction] = []
        self.buffers: list[Buffer] = []
        self.elem = g.operand_dtype.bits // 8
        _, self.ntemps = epi.storage()

    def buf(self, name: str, space: str, rows: int, cols: int, dtype: DType | None = None) -> str:
        self.buffers.append(Buffer(name, space, rows, cols, dtype))
        return name

    def epilogue_buffers(self, rows: int, cols: int = 0) -> tuple[list[str], list[str]]:
        """Temporaries and external operand buffers for output tiles up to rows x cols
        (cols: the array's width unless given)."""
        cols = cols or self.c.cols
        temps = [self.buf(f"t{i}", "acc", rows, cols) for i in range(self.ntemps)]
        exts = [self.buf(f"e{i}", "spad", 1 if e.row_invariant else rows,
                         1 if e.col_invariant else cols, e.dtype)
                for i, e in enumerate(self.epi.externals)]
        return temps, exts

    def acc_bytes(self, rows: int) -> int:
        return (2 + self.ntemps) * rows * self.c.cols * 4

    def finish_tile(self, acc: str, rows: tuple[int, int], lrows: tuple[int, int],
                    cols: tuple[int, int], b: int, temps: list[str], exts: list[str],
                    col0: int = 0) -> None:
        """Epilogue and mvout of acc[lrows, col0:col0 + w], which is out[b, rows, cols]."""
        lcols = (col0, col0 + cols[1] - cols[0])
        main = Local(acc, lrows, lcols)
        self.body += emit_tile(self.epi, main, temps, exts, b, rows, cols)
        self.body.append(Mvout(Remote(self.g.out, b, rows, cols),
                               Local(acc, lrows, lcols, self.epi.out_dtype)))

    def check_fit(self, spad: int, acc: int) -> None:
        if spad > self.c.spad_capacity or acc > self.c.acc_capacity:
            raise WiaUsageError(
                f"a {self.g.m}x{self.g.k}x{self.g.n} GEMM does not fit the memories of a "
                f"{self.c.rows}x{self.c.cols} array even in its smallest tiling (needs "
                f"{spad} scratchpad and {acc} accumulator bytes)")


class GemmEmitter(Emitter, ABC):
    """An emitter of one dataflow's GEMM loop nest (``_WS``, ``_OS``, ``_IS``)."""

    @abstractmethod
    def emit(self) -> None:
        """Fill ``body`` (and ``buffers``) with the GEMM's instruction stream."""
