"""Row group + concrete operand -> one vector section (views, buffers, tiled body).

The operand is presented as a [P, Q] matrix by its view (``rowplan.py`` says which):
each row of P becomes one output element (reductions, pools) or one output row (a
copy). Tiles are at most ``CHUNK_ROWS`` x ``cols``; a row longer than one tile is
reduced by ``vec.rKIND.acc`` over its column tiles. Two scratchpad buffers
alternate between tiles and two accumulator buffers between row chunks, so the DMA
of the next tile overlaps the vector unit's work on this one.

Mean (``reduce_mean``, ``avg_pool``): the row sum in the accumulation type (f32)
divided by the element count, which the section reads as a constant input ``n``,
as NumPy's mean divides its sum.

Invariant (as ``lower.py``): the section's ``in`` DRAM buffers are the keys of
``Lowered.inputs``; its one ``out`` buffer is ``Lowered.output``.
"""

from __future__ import annotations

from math import prod
from typing import Any

import numpy as np

from ...diagnostics import WiaUsageError
from ...dtypes import DType
from ...ir.core import Value
from .config import ArrayConfig
from .isa import (
    Buffer,
    Dram,
    Instruction,
    Label,
    Local,
    Mvin,
    Mvout,
    Remote,
    Section,
    Vec,
    VecReduce,
    View,
)
from .lowered import Lowered, Names, describe
from .rowplan import RowGroup
from .tiling import CHUNK_ROWS

Matrix = tuple[int, int]  # (P, Q)


def _spans(total: int, step: int) -> list[tuple[int, int]]:
    return [(s, min(total, s + step)) for s in range(0, total, step)]


def _source_view(group: RowGroup, shape: tuple[int, ...], name: str
                 ) -> tuple[View, Matrix, tuple[int, ...]] | None:
    """The operand's view, its [P, Q] matrix and the result shape; None if empty."""
    op, attrs = group.op, group.attrs
    if group.layout == "pool":
        (kh, kw), (sh, sw) = attrs["kernel"], attrs["stride"]
        ho, wo = (shape[-2] - kh) // sh + 1, (shape[-1] - kw) // sw + 1
        out = (*shape[:-2], ho, wo)
        matrix = (prod(out), kh * kw)
        window = (("kernel", (kh, kw)), ("stride", (sh, sw)), ("shape", (1, *matrix)))
        return (View(f"{name}.w", "window", name, window), matrix, out) if ho > 0 < wo else None
    if group.layout == "reduce":
        axes = op.axes()  # type: ignore[attr-defined]
        kept = tuple(a for a in range(len(shape)) if a not in axes)
        order = (*kept, *axes)
        keep = bool(attrs.get("keepdims", False))
        out = tuple(1 if a in axes else d for a, d in enumerate(shape) if keep or a not in axes)
        matrix = (prod(shape[a] for a in kept), prod(shape[a] for a in axes))
        split, target = shape, tuple(shape[a] for a in order)
    elif op.name == "tensor.transpose":
        split, order = shape, tuple(attrs["perm"])
        out = target = tuple(shape[a] for a in order)
        matrix = (prod(target[:-1]), target[-1])
    else:  # reshape: the operand read in the result's shape
        out = tuple(d for d in group.output.type.shape)  # type: ignore[union-attr]
        split = target = out
        order = tuple(range(len(out)))
        matrix = (prod(out[:-1]), out[-1] if out else 1)
    params = (("split", split), ("axes", order), ("target", target), ("shape", (1, *matrix)))
    return (View(f"{name}.p", "perm", name, params), matrix, out) if 0 not in matrix else None


class _Body:
    """Buffers and instructions of one row section."""

    def __init__(self, config: ArrayConfig, group: RowGroup, dtype: DType):
        self.c, self.g, self.dtype = config, group, dtype
        self.buffers: list[Buffer] = []
        self.body: list[Instruction] = []
        self.copy = group.fn == "copy"
        # sums accumulate in the unit's wide type; the mean divides that
        self.acc_dtype = (DType.I32 if dtype.is_int else DType.F32) if group.fn in (
            "sum", "mean") else dtype

    def rows_per_chunk(self, p: int, q: int) -> int:
        """Rows per chunk: two tiles of each kind (double buffering) must fit."""
        cols = min(q, self.c.cols)
        spad_row = 2 * cols * (self.dtype.bits // 8)
        acc_row = 2 * (cols if self.copy else 1) * 4
        spad_left = self.c.spad_capacity - (4 if self.g.fn == "mean" else 0)  # the count
        rows = min(p, CHUNK_ROWS, spad_left // spad_row, self.c.acc_capacity // acc_row)
        if rows < 1:
            raise WiaUsageError(
                f"'{self.g.op.name}' does not fit the memories of a {self.c.rows}x"
                f"{self.c.cols} array (one row of tiles needs {spad_row} scratchpad and "
                f"{acc_row} accumulator bytes)")
        return rows

    def emit(self, src: str, out: str, matrix: Matrix, count: str | None) -> None:
        p, q = matrix
        rows, cols = self.rows_per_chunk(p, q), min(q, self.c.cols)
        spad = [self._buf(f"a{i}", "spad", rows, cols, self.dtype) for i in (0, 1)]
        acc = [self._buf(f"c{i}", "acc", rows, cols if self.copy else 1) for i in (0, 1)]
        if count is not None:
            self._buf("e0", "spad", 1, 1, DType.F32)
            self.body.append(Mvin(Local("e0", (0, 1), (0, 1)), Remote(count, 0, (0, 1), (0, 1))))
        tiles = 0
        for chunk, (r0, r1) in enumerate(_spans(p, rows)):
            c, h = acc[chunk % 2], r1 - r0
            self.body.append(Label(f"r{r0}"))
            for q0, q1 in _spans(q, cols):
                # alternate scratchpad tiles: the next mvin need not wait for this read
                tile = Local(spad[tiles % 2], (0, h), (0, q1 - q0))
                tiles += 1
                self.body.append(Mvin(tile, Remote(src, 0, (r0, r1), (q0, q1))))
                if self.copy:
                    dst = Local(c, (0, h), (0, q1 - q0), self.dtype)
                    self.body.append(Vec("cast", dst, (tile,)))
                    self.body.append(Mvout(Remote(out, 0, (r0, r1), (q0, q1)), dst))
                else:
                    kind = "sum" if self.g.fn == "mean" else self.g.fn
                    dst = Local(c, (0, h), (0, 1), self.acc_dtype)
                    self.body.append(VecReduce(kind, dst, tile, q0 > 0))
            if not self.copy:
                self._finish_rows(Local(c, (0, h), (0, 1)), out, (r0, r1), count is not None)

    def _finish_rows(self, c: Local, out: str, rows: tuple[int, int], mean: bool) -> None:
        words = Local(c.buffer, c.rows, c.cols, self.acc_dtype)
        if mean:
            self.body.append(Vec("div", words, (words, Local("e0", (0, 1), (0, 1)))))
        self.body.append(Mvout(Remote(out, 0, rows, (0, 1)),
                               Local(c.buffer, c.rows, c.cols, self.dtype)))

    def _buf(self, name: str, space: str, rows: int, cols: int,
             dtype: DType | None = None) -> str:
        self.buffers.append(Buffer(name, space, rows, cols, None if space == "acc" else dtype))
        return name


def lower_rows(group: RowGroup, config: ArrayConfig, env: dict[int, Any], name: str
               ) -> Lowered | None:
    """The section for row group ``group`` with its operand from ``env``; None when
    the tensor is empty (the host runs the op)."""
    x: Value = group.externals[0]  # type: ignore[assignment]
    array = np.asarray(env[id(x)])
    dtype: DType = group.ext_dtypes[0]
    if array.ndim == 0 or array.size == 0:
        return None
    names = Names()
    src = names(x, x.name_hint)
    out = names(group.output, group.output.name_hint)
    made = _source_view(group, tuple(array.shape), src)
    if made is None:
        return None
    view, matrix, out_shape = made
    cols = matrix[1] if group.fn == "copy" else 1
    out_view = View(f"{out}.o", "mat", out, (("target", out_shape),
                                             ("shape", (1, matrix[0], cols))))
    drams = [Dram(src, dtype, tuple(array.shape), "in")]
    inputs: dict[str, Value | np.ndarray] = {src: x}
    views = [view, out_view]
    count = None
    if group.fn == "mean":
        n = names("count", "n")
        inputs[n] = np.full((1,), matrix[1], np.float32)
        drams.append(Dram(n, DType.F32, (1,), "in"))
        views.append(View(f"{n}.x", "mat", n, (("target", (1,)), ("shape", (1, 1, 1)))))
        count = f"{n}.x"
    drams.append(Dram(out, dtype, out_shape, "out"))
    body = _Body(config, group, dtype)
    body.emit(view.name, out_view.name, matrix, count)
    section = Section(name, "vector", describe(group), tuple(drams), tuple(views),
                      tuple(body.buffers), tuple(body.body))
    return Lowered(section, inputs, out)
