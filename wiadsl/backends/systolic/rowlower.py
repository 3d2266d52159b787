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

Fused vector groups (``rowplan.py``): a prologue computes each operand tile in the
accumulator (``emit_tile``) before the reduction reads it; an epilogue runs in a
second pass over each row chunk's column tiles, reading the row result where the
reduction left it, and writes the section's output. Operand views: ``rowviews.py``.

Invariant (as ``lower.py``): the section's ``in`` DRAM buffers are the keys of
``Lowered.inputs``; its one ``out`` buffer is ``Lowered.output``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...diagnostics import WiaUsageError
from ...dtypes import DType
from ...ir.core import Value
from .config import ArrayConfig
from .epilogue import Epilogue, emit_tile
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
from .rowgroup import RowGroup
from .rowviews import (
    Matrix,
    RowEpilogue,
    epilogue_views,
    prologue_operands,
    prologue_views,
    source_view,
)
from .tiling import CHUNK_ROWS

Range = tuple[int, int]


def _spans(total: int, step: int) -> list[tuple[int, int]]:
    return [(s, min(total, s + step)) for s in range(0, total, step)]


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

    def rows_per_chunk(self, p: int, q: int, epi: Epilogue | None, post: RowEpilogue | None) -> int:
        """Rows per chunk: two tiles of each kind (double buffering) must fit, or the
        prologue's and epilogue's operand tiles (4 bytes an element at most), main
        tiles and temps."""
        cols = min(q, self.c.cols)
        spad_row = 2 * cols * (self.dtype.bits // 8)
        acc_row = 2 * (cols if self.copy else 1) * 4
        if epi is not None:
            spad_row = max(1, len(epi.externals)) * cols * 4
            acc_row += (1 + epi.storage()[1]) * cols * 4
        if post is not None:
            spad_row += len(post.epi.externals) * cols * 4
            acc_row += (1 + post.epi.storage()[1]) * cols * 4
        spad_left = self.c.spad_capacity - (4 if self.g.fn == "mean" else 0)  # the count
        rows = min(p, CHUNK_ROWS, spad_left // spad_row, self.c.acc_capacity // acc_row)
        if rows < 1:
            raise WiaUsageError(
                f"'{self.g.op.name}' does not fit the memories of a {self.c.rows}x"
                f"{self.c.cols} array (one row of tiles needs {spad_row} scratchpad and "
                f"{acc_row} accumulator bytes)")
        return rows

    def emit(self, src: str, out: str, matrix: Matrix, count: str | None,
             epi: Epilogue | None = None, post: RowEpilogue | None = None) -> None:
        """The body; ``src`` is the operand's view, or with a prologue ``epi`` the
        operand is computed per tile from its external operands instead; with an
        epilogue ``post`` a second pass over each chunk's tiles writes its output."""
        p, q = matrix
        rows, cols = self.rows_per_chunk(p, q, epi, post), min(q, self.c.cols)
        acc = [self._buf(f"c{i}", "acc", rows, cols if self.copy else 1) for i in (0, 1)]
        load = self._prologue(epi, rows, cols) if epi is not None else self._loader(src, rows, cols)
        # after the prologue's buffers: the second pass numbers its own after them
        second = self._second_pass(post, rows, cols, q) if post is not None else None
        if count is not None:
            self._buf("e0", "spad", 1, 1, DType.F32)
            self.body.append(Mvin(Local("e0", (0, 1), (0, 1)), Remote(count, 0, (0, 1), (0, 1))))
        for chunk, (r0, r1) in enumerate(_spans(p, rows)):
            c, h = acc[chunk % 2], r1 - r0
            self.body.append(Label(f"r{r0}"))
            for q0, q1 in _spans(q, cols):
                tile = load((r0, r1), (q0, q1))
                if self.copy:
                    dst = Local(c, (0, h), (0, q1 - q0), self.dtype)
                    self.body.append(Vec("cast", dst, (tile,)))
                    self.body.append(Mvout(Remote(out, 0, (r0, r1), (q0, q1)), dst))
                else:
                    kind = "sum" if self.g.fn == "mean" else self.g.fn
                    dst = Local(c, (0, h), (0, 1), self.acc_dtype)
                    self.body.append(VecReduce(kind, dst, tile, q0 > 0))
            if not self.copy:
                self._finish_rows(Local(c, (0, h), (0, 1)), out, (r0, r1), count is not None,
                                  second)

    def _loader(self, src: str, rows: int, cols: int) -> Callable[[Range, Range], Local]:
        """Tiles of the operand view, into scratchpad buffers that alternate per tile
        (the next mvin need not wait for this tile's read)."""
        spad = [self._buf(f"a{i}", "spad", rows, cols, self.dtype) for i in (0, 1)]
        count = [0]

        def load(r: Range, q: Range) -> Local:
            tile = Local(spad[count[0] % 2], (0, r[1] - r[0]), (0, q[1] - q[0]))
            count[0] += 1
            self.body.append(Mvin(tile, Remote(src, 0, r, q)))
            return tile
        return load

    def _prologue(self, epi: Epilogue, rows: int, cols: int) -> Callable[[Range, Range], Local]:
        """Tiles of the operand computed by the prologue's vector steps in ``c2``."""
        main = self._buf("c2", "acc", rows, cols)
        temps = [self._buf(f"t{i}", "acc", rows, cols) for i in range(epi.storage()[1])]
        exts = [self._buf(f"e{i + 1}", "spad", 1 if e.row_invariant else rows,
                          1 if e.col_invariant else cols, e.dtype)
                for i, e in enumerate(epi.externals)]

        def load(r: Range, q: Range) -> Local:
            tile = Local(main, (0, r[1] - r[0]), (0, q[1] - q[0]))
            self.body.extend(emit_tile(epi, tile, temps, exts, 0, r, q))
            return Local(main, tile.rows, tile.cols, epi.out_dtype)
        return load

    def _finish_rows(self, c: Local, out: str, rows: Range, mean: bool,
                     second: Callable[[Local, Range], None] | None) -> None:
        words = Local(c.buffer, c.rows, c.cols, self.acc_dtype)
        if mean:
            self.body.append(Vec("div", words, (words, Local("e0", (0, 1), (0, 1)))))
        if second is not None:
            second(c, rows)
            return
        self.body.append(Mvout(Remote(out, 0, rows, (0, 1)),
                               Local(c.buffer, c.rows, c.cols, self.dtype)))

    def _second_pass(self, post: RowEpilogue, rows: int, cols: int, q: int
                     ) -> Callable[[Local, Range], None]:
        """The epilogue over a chunk's column tiles, its output written per tile."""
        main = self._buf("c3", "acc", rows, cols)
        first = len([b for b in self.buffers if b.name.startswith("t")])
        temps = [self._buf(f"t{first + i}", "acc", rows, cols)
                 for i in range(post.epi.storage()[1])]
        base = 1 + len([b for b in self.buffers if b.name.startswith("e")])
        exts = ["" if i == post.resident else  # read in the accumulator, never loaded
                self._buf(f"e{base + i}", "spad", 1 if e.row_invariant else rows,
                          1 if e.col_invariant else cols, e.dtype)
                for i, e in enumerate(post.epi.externals)]

        def run(c: Local, r: Range) -> None:
            resident = {post.resident: Local(c.buffer, c.rows, c.cols, post.dtype)}
            for q0, q1 in _spans(q, cols):
                tile = Local(main, (0, r[1] - r[0]), (0, q1 - q0))
                self.body.extend(emit_tile(post.epi, tile, temps, exts, 0, r, (q0, q1),
                                           resident))
                self.body.append(Mvout(Remote(post.out, 0, r, (q0, q1)),
                                       Local(main, tile.rows, tile.cols, post.epi.out_dtype)))
        return run

    def _buf(self, name: str, space: str, rows: int, cols: int,
             dtype: DType | None = None) -> str:
        self.buffers.append(Buffer(name, space, rows, cols, None if space == "acc" else dtype))
        return name


def lower_rows(group: RowGroup, config: ArrayConfig, env: dict[int, Any], name: str
               ) -> Lowered | None:
    """The section for row group ``group`` with its operands from ``env``; None when
    the tensor is empty (the host runs the op)."""
    names = Names()
    x = group.op.operands[0]
    dtype: DType = group.result.type.dtype  # type: ignore[union-attr]
    drams: list[Dram] = []
    inputs: dict[str, Value | np.ndarray] = {}
    if group.prologue is None:
        arrays, shape = [np.asarray(env[id(x)])], tuple(np.shape(env[id(x)]))
    else:
        made_ops = prologue_operands(group, env, names)
        if made_ops is None:
            return None
        arrays, shape = made_ops
    if len(shape) == 0 or 0 in shape:
        return None
    src = names(x, x.name_hint)
    made = source_view(group, shape, src)
    if made is None:
        return None
    view, matrix, out_shape = made
    views = [view]
    epi = None
    if group.prologue is None:
        drams.append(Dram(src, dtype, shape, "in"))
        inputs[src] = x
    else:
        views, epi = prologue_views(group, arrays, shape, view, matrix, names, drams, inputs)
    out = names(group.output, group.output.name_hint)
    cols = matrix[1] if group.fn == "copy" else 1
    out_view = View(f"{out}.o", "mat", out, (("target", out_shape),
                                             ("shape", (1, matrix[0], cols))))
    post = None
    if group.epilogue is not None:
        made_post = epilogue_views(group, env, shape, out_shape, view, matrix, names, drams,
                                    inputs)
        if made_post is None:
            return None
        post_views, post, out_view, out_dtype = made_post
        views += post_views
    views.append(out_view)
    count = None
    if group.fn == "mean":
        n = names("count", "n")
        inputs[n] = np.full((1,), matrix[1], np.float32)
        drams.append(Dram(n, DType.F32, (1,), "in"))
        views.append(View(f"{n}.x", "mat", n, (("target", (1,)), ("shape", (1, 1, 1)))))
        count = f"{n}.x"
    if post is None:
        drams.append(Dram(out, dtype, out_shape, "out"))
    else:
        drams.append(Dram(out, out_dtype, shape, "out"))
    body = _Body(config, group, dtype)
    body.emit(view.name, out_view.name, matrix, count, epi, post)
    section = Section(name, "vector", describe(group), tuple(drams), tuple(views),
                      tuple(body.buffers), tuple(body.body))
    return Lowered(section, inputs, out)

