"""Vector-unit programs: the elementwise ops applied to each output tile.

An ``Epilogue`` is shape-free: a list of ``VecStep``s whose sources are the
array's result (``anchor``), an earlier step (``step``) or an external operand
tile (``ext``, loaded from a DRAM view). ``emit_tile`` turns it into ``vec``
instructions for one tile, keeping live values in accumulator buffers (the main
tile plus temporaries, reused once dead: linear scan).

Invariant: the last step's value (or the anchor's) ends in the main tile, read as
``out_dtype``; each source is read as the dtype its IR operand has, so the IR's
conversions (bf16 rounding of a matmul result, i8 wrap) happen where the IR
has them.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...dtypes import DType
from .isa import Instruction, Local, Mvin, Remote, Vec

Src = tuple[str, int, DType]  # ("anchor" | "step" | "ext", index, read dtype)


@dataclass(frozen=True)
class VecStep:
    fn: str
    dtype: DType
    srcs: tuple[Src, ...]


@dataclass(frozen=True)
class External:
    """An epilogue operand: its view, dtype, and which tile axes it is constant along."""

    view: str
    dtype: DType
    row_invariant: bool
    col_invariant: bool


@dataclass(frozen=True)
class Epilogue:
    steps: tuple[VecStep, ...]
    externals: tuple[External, ...]
    out_dtype: DType

    @property
    def has_anchor(self) -> bool:
        return any(kind == "anchor" for step in self.steps for kind, _, _ in step.srcs) or \
            not self.steps

    def storage(self) -> tuple[list[int], int]:
        """Storage slot of each value (anchor = value 0, step j = value j + 1) and the
        number of temporaries. Slot 0 is the main tile and receives the final value
        (every other value is dead by then; vec ops may work in place)."""
        n = len(self.steps) + 1
        last_use = [0] * n
        for j, step in enumerate(self.steps):
            for kind, idx, _ in step.srcs:
                if kind != "ext":
                    last_use[0 if kind == "anchor" else idx + 1] = j + 1
        live: dict[int, int] = {0: 0} if self.has_anchor else {}
        free: list[int] = [] if self.has_anchor else [0]
        slot, temps = [0] * n, 0
        for v in range(1, n):
            for u in [u for u in live if last_use[u] <= v]:
                free.append(live.pop(u))
            if v == n - 1:
                s = 0
            elif free:
                free.sort()
                s = free.pop(0)
            else:
                temps += 1
                s = temps
            slot[v] = s
            live[v] = s
        return slot, temps


def emit_tile(epi: Epilogue, main: Local, temps: list[str], ext_bufs: list[str],
              batch: int, rows: tuple[int, int], cols: tuple[int, int],
              resident: dict[int, Local] | None = None) -> list[Instruction]:
    """Instructions applying ``epi`` to the tile in ``main`` (rows/cols: its place in
    the output view; ``ext_bufs``: one scratchpad buffer per external operand;
    ``resident``: externals already in a buffer — a row reduction's result — that
    are read there instead of loaded)."""
    out: list[Instruction] = []
    ext: list[Local] = []
    h, w = rows[1] - rows[0], cols[1] - cols[0]
    for i, (e, buf) in enumerate(zip(epi.externals, ext_bufs)):
        if resident and i in resident:
            ext.append(resident[i])
            continue
        rr = (rows[0], rows[0] + 1) if e.row_invariant else rows
        cc = (cols[0], cols[0] + 1) if e.col_invariant else cols
        tile = (1 if e.row_invariant else h, 1 if e.col_invariant else w)
        out.append(Mvin(Local(buf, (0, tile[0]), (0, tile[1])), Remote(e.view, batch, rr, cc)))
        ext.append(Local(buf, (0, tile[0]), (0, tile[1])))
    slots, _ = epi.storage()
    names = [main.buffer, *temps]

    def at(slot: int, dtype: DType) -> Local:
        return Local(names[slot], (0, h) if slot else main.rows,
                     (0, w) if slot else main.cols, dtype)

    for j, step in enumerate(epi.steps):
        srcs = []
        for kind, idx, dtype in step.srcs:
            if kind == "ext":
                srcs.append(Local(ext[idx].buffer, ext[idx].rows, ext[idx].cols, dtype))
            else:
                srcs.append(at(slots[0 if kind == "anchor" else idx + 1], dtype))
        out.append(Vec(step.fn, at(slots[j + 1], step.dtype), tuple(srcs)))
    return out
