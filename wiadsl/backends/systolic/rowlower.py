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

from collections.abc import Callable
from dataclasses import dataclass
from math import prod
from typing import Any

import numpy as np

from ...diagnostics import WiaUsageError
from ...dtypes import DType
from ...ir.core import Value
from .config import ArrayConfig
from .epilogue import Epilogue, External, emit_tile
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
from .lowered import Lowered, Names, describe, invariance
from .rowplan import RowGroup
from .tiling import CHUNK_ROWS
from .views import Relayout, perm_index

Matrix = tuple[int, int]  # (P, Q)
Range = tuple[int, int]


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


@dataclass(frozen=True)
class _Post:
    """A row section's epilogue: its program, which of its externals is the row
    result (read in the accumulator where the reduction left it, as ``dtype``), and
    the view its output is written through."""

    epi: Epilogue
    resident: int
    dtype: DType
    out: str


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

    def rows_per_chunk(self, p: int, q: int, epi: Epilogue | None, post: _Post | None) -> int:
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
             epi: Epilogue | None = None, post: _Post | None = None) -> None:
        """The body; ``src`` is the operand's view, or with a prologue ``epi`` the
        operand is computed per tile from its external operands instead; with an
        epilogue ``post`` a second pass over each chunk's tiles writes its output."""
        p, q = matrix
        rows, cols = self.rows_per_chunk(p, q, epi, post), min(q, self.c.cols)
        second = self._second_pass(post, rows, cols, q) if post is not None else None
        acc = [self._buf(f"c{i}", "acc", rows, cols if self.copy else 1) for i in (0, 1)]
        load = self._prologue(epi, rows, cols) if epi is not None else self._loader(src, rows, cols)
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

    def _second_pass(self, post: _Post, rows: int, cols: int, q: int
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


def _prologue_operands(group: RowGroup, env: dict[int, Any], names: Names,
                       ) -> tuple[list[np.ndarray], tuple[int, ...]] | None:
    """The prologue's external arrays and the shape of the operand they make."""
    prologue = group.prologue
    assert prologue is not None
    arrays = [np.asarray(env[id(v)] if isinstance(v, Value) else v) for v in prologue.externals]
    relaid = [_relaid_shape(a.shape, prologue.ext_relayouts.get(i)) for i, a in enumerate(arrays)]
    try:
        return arrays, tuple(np.broadcast_shapes(*relaid))
    except ValueError:
        return None


def _relaid_shape(shape: tuple[int, ...], rel: Relayout | None) -> tuple[int, ...]:
    return rel.apply(shape) if rel is not None else tuple(shape)


def _row_view(name: str, dram: str, source: tuple[int, ...], rel: Relayout | None,
              x_shape: tuple[int, ...], order: tuple[int, ...], matrix: Matrix) -> View:
    """A prologue operand as the reduction's [P, Q] matrix: its re-layout (if any),
    leading unit axes up to the operand's rank, the reduction's axis order, then the
    broadcast to the operand's shape (a transpose commutes with broadcasting)."""
    if rel is not None and rel.kind == "reshape":
        split, moved = rel.ints, tuple(range(len(rel.ints)))
    else:
        split = tuple(source)
        moved = rel.ints if rel is not None else tuple(range(len(source)))
    pad = len(x_shape) - len(split)
    split = (1,) * pad + tuple(split)
    axes_padded = tuple(range(pad)) + tuple(pad + a for a in moved)
    params = (("split", split), ("axes", tuple(axes_padded[a] for a in order)),
              ("target", tuple(x_shape[a] for a in order)), ("shape", (1, *matrix)))
    return View(name, "perm", dram, params)


def lower_rows(group: RowGroup, config: ArrayConfig, env: dict[int, Any], name: str
               ) -> Lowered | None:
    """The section for row group ``group`` with its operands from ``env``; None when
    the tensor is empty (the host runs the op)."""
    names = Names()
    x = group.op.operands[0]
    dtype: DType = x.type.dtype  # type: ignore[union-attr]
    drams: list[Dram] = []
    inputs: dict[str, Value | np.ndarray] = {}
    if group.prologue is None:
        arrays, shape = [np.asarray(env[id(x)])], tuple(np.shape(env[id(x)]))
    else:
        made_ops = _prologue_operands(group, env, names)
        if made_ops is None:
            return None
        arrays, shape = made_ops
    if len(shape) == 0 or 0 in shape:
        return None
    src = names(x, x.name_hint)
    made = _source_view(group, shape, src)
    if made is None:
        return None
    view, matrix, out_shape = made
    views = [view]
    epi = None
    if group.prologue is None:
        drams.append(Dram(src, dtype, shape, "in"))
        inputs[src] = x
    else:
        views, epi = _prologue_views(group, arrays, shape, view, matrix, names, drams, inputs)
    out = names(group.output, group.output.name_hint)
    cols = matrix[1] if group.fn == "copy" else 1
    out_view = View(f"{out}.o", "mat", out, (("target", out_shape),
                                             ("shape", (1, matrix[0], cols))))
    post = None
    if group.epilogue is not None:
        made_post = _epilogue_views(group, env, shape, out_shape, view, matrix, names, drams,
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


def _operand_view(value: Value | np.ndarray, dtype: DType, i: int, array: np.ndarray,
                  rel: Relayout | None, shape: tuple[int, ...], order: tuple[int, ...],
                  matrix: Matrix, names: Names, drams: list[Dram],
                  inputs: dict[str, Value | np.ndarray]) -> View:
    """A section input (declared once) and its view in the reduction's layout."""
    hint = value.name_hint if isinstance(value, Value) else None
    dram = names(value, hint or f"k{i}")
    if dram not in inputs:
        inputs[dram] = value
        drams.append(Dram(dram, dtype, tuple(array.shape), "in"))
    return _row_view(f"{dram}.x{i}", dram, tuple(array.shape), rel, shape, order, matrix)


def _external(view: View, dtype: DType, array: np.ndarray) -> External:
    index = perm_index(tuple(array.shape), *(view.param(k) for k in
                                             ("split", "axes", "target", "shape")))
    return External(view.name, dtype, *invariance(index))


def _prologue_views(group: RowGroup, arrays: list[np.ndarray], shape: tuple[int, ...],
                    view: View, matrix: Matrix, names: Names, drams: list[Dram],
                    inputs: dict[str, Value | np.ndarray]) -> tuple[list[View], Epilogue]:
    """Views of the prologue's operands in the reduction's layout, and its program."""
    prologue = group.prologue
    assert prologue is not None
    order = view.param("axes")
    views, externals = [], []
    for i, (value, dt) in enumerate(zip(prologue.externals, prologue.ext_dtypes)):
        views.append(_operand_view(value, dt, i, arrays[i], prologue.ext_relayouts.get(i),
                                   shape, order, matrix, names, drams, inputs))
        externals.append(_external(views[-1], dt, arrays[i]))
    return views, Epilogue(tuple(prologue.steps), tuple(externals), prologue.steps[-1].dtype)


def _epilogue_views(group: RowGroup, env: dict[int, Any], shape: tuple[int, ...],
                    r_shape: tuple[int, ...], view: View, matrix: Matrix, names: Names,
                    drams: list[Dram],
                    inputs: dict[str, Value | np.ndarray]
                    ) -> tuple[list[View], _Post, View, DType] | None:
    """The epilogue's operand views in the reduction's layout, its program, and the view
    of its output; None unless its result has the shape of the reduced operand."""
    post = group.epilogue
    assert post is not None
    # the row result (never stored) has the reduction's keepdims shape: shapes only
    arrays = [np.empty(r_shape) if v is group.op.result else
              np.asarray(env[id(v)] if isinstance(v, Value) else v) for v in post.externals]
    try:
        if tuple(np.broadcast_shapes(shape, *(a.shape for a in arrays))) != shape:
            return None
    except ValueError:
        return None
    order = view.param("axes")
    views, externals, resident = [], [], -1
    for i, (value, dt) in enumerate(zip(post.externals, post.ext_dtypes)):
        if value is group.op.result:
            resident = i
            externals.append(External("", dt, False, True))
            continue
        views.append(_operand_view(value, dt, i, arrays[i], None, shape, order, matrix,
                                   names, drams, inputs))
        externals.append(_external(views[-1], dt, arrays[i]))
    out = names(post.output, post.output.name_hint)
    out_dtype: DType = post.steps[-1].dtype
    out_view = View(f"{out}.o", "perm", out, (
        ("split", shape), ("axes", order), ("target", tuple(shape[a] for a in order)),
        ("shape", (1, *matrix))))
    epi = Epilogue(tuple(post.steps), tuple(externals), out_dtype)
    r_dtype: DType = group.op.result.type.dtype  # type: ignore[union-attr]
    return views, _Post(epi, resident, r_dtype, out_view.name), \
        out_view, out_dtype  # type: ignore[union-attr]
