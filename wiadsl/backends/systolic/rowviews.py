"""The views of a row section's operands: how the DMA presents them as the [P, Q]
matrix a row op works on (one row per output element of a reduction or pool).

- ``source_view``: the row op's own operand (``perm`` or ``window`` view), the
  matrix and the result shape;
- ``prologue_views`` / ``epilogue_views``: the operands of the vector groups fused
  before a reduction (they compute its operand tile by tile) or behind it (they use
  its result), each as a ``perm`` view in the reduction's layout.

Invariant: element (0, p, q) of every view is the element the row op's operand has
at row p, column q of its matrix (broadcasting and re-layouts included), so the
vector unit's tile-wise work computes what the IR ops compute.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import Any

import numpy as np

from ...dtypes import DType
from ...ir.core import Value
from .epilogue import Epilogue, External
from .isa import Dram, View
from .lowered import Names, invariance
from .rowgroup import RowGroup
from .views import Relayout, perm_index

Matrix = tuple[int, int]  # (P, Q)


def source_view(group: RowGroup, shape: tuple[int, ...], name: str
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
class RowEpilogue:
    """A row section's epilogue: its program, which of its externals is the row
    result (read in the accumulator where the reduction left it, as ``dtype``), and
    the view its output is written through."""

    epi: Epilogue
    resident: int
    dtype: DType
    out: str


def prologue_operands(group: RowGroup, env: dict[int, Any], names: Names,
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


def prologue_views(group: RowGroup, arrays: list[np.ndarray], shape: tuple[int, ...],
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


def epilogue_views(group: RowGroup, env: dict[int, Any], shape: tuple[int, ...],
                    r_shape: tuple[int, ...], view: View, matrix: Matrix, names: Names,
                    drams: list[Dram],
                    inputs: dict[str, Value | np.ndarray]
                    ) -> tuple[list[View], RowEpilogue, View, DType] | None:
    """The epilogue's operand views in the reduction's layout, its program, and the view
    of its output; None unless its result has the shape of the reduced operand."""
    post = group.epilogue
    assert post is not None
    # the row result (never stored) has the reduction's keepdims shape: shapes only
    arrays = [np.empty(r_shape) if v is group.result else
              np.asarray(env[id(v)] if isinstance(v, Value) else v) for v in post.externals]
    try:
        # the epilogue's own result shape, its operands broadcast together: with dynamic
        # dims the plan cannot tell (fuzz seed 14900000000265: in0[N] + cast(
        # reduce_min(in3[M], keepdims)) at N = 1, M = 2 came out with M elements)
        if tuple(np.broadcast_shapes(*(a.shape for a in arrays))) != shape:
            return None
    except ValueError:
        return None
    order = view.param("axes")
    views, externals, resident = [], [], -1
    for i, (value, dt) in enumerate(zip(post.externals, post.ext_dtypes)):
        if value is group.result:
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
    r_dtype: DType = group.result.type.dtype  # type: ignore[union-attr]
    return views, RowEpilogue(epi, resident, r_dtype, out_view.name), \
        out_view, out_dtype  # type: ignore[union-attr]
