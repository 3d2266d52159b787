"""ONNX Gather with run-time indices (embedding lookups), GatherElements, ConstantOfShape.

WIA DSL has no gather builtin; it has dynamic indexing (an out-of-range index is a
run-time error) and functional slice updates in counted loops (LANGUAGE.md §5),
which is what these ops are:

- ``Gather(data, indices, axis)``: the data viewed as ``[P, A, Q]`` (before, along,
  after the axis), one slice copy per index: ``out[:, t, :] = data[:, i, :]``.
  Negative indices count from the end as ONNX says; any other index outside
  ``[-A, A)`` stops the call with the DSL's index error, never a wrong row.
- ``GatherElements(data, indices, axis)``: one scalar per element of ``indices``,
  read at the element's own coordinates with the axis coordinate replaced; the
  same bounds rules.
- ``ConstantOfShape``: ``full`` of the (static or symbolic) shape.
"""

from __future__ import annotations

import numpy as np

from ...dtypes import DType
from ..graph import Node, Val, const_val
from ..shapes import Dim, Shape, numel
from ..text import literal
from .registry import op


def _dims(shape: Shape) -> str:
    return "[" + ", ".join(d.text() for d in shape) + "]"


def _index_dtype_ok(n: Node, idx: Val) -> None:
    if not idx.dtype.is_int:
        raise n.fail(f"the indices must be integers, got {idx.dtype}")


def gather_loop(n: Node, x: Val, idx: Val, axis: int) -> Val:
    """``Gather`` as a loop of slice copies (indices known only at run time)."""
    _index_dtype_ok(n, idx)
    em, names = n.em, n.em.names
    before, along, after = numel(x.shape[:axis]), x.shape[axis], numel(x.shape[axis + 1:])
    count = numel(idx.shape)
    flat_idx = em.bind(f"reshape(cast({n.ref(idx)}, i64), [{count.text()}])", DType.I64,
                       (count,), "gather_idx")
    src = em.bind(f"reshape({n.ref(x)}, {_dims((before, along, after))})", x.dtype,
                  (before, along, after), "gather_src")
    out = names.fresh("gather_rows")
    t, i = names.fresh("t"), names.fresh("i")
    em.body += [
        f"    {out} = zeros({_dims((before, count, after))}, {x.dtype});",
        f"    for {t} in range(dim({flat_idx.ref}, 0)) {{",
        f"        {i} = {flat_idx.ref}[{t}];",
        f"        if {i} < 0 {{ {i} = {i} + dim({src.ref}, 1); }}",
        f"        {out}[:, {t}, :] = {src.ref}[:, {i}, :];",
        "    }",
    ]
    shape = x.shape[:axis] + idx.shape + x.shape[axis + 1:]
    return em.bind(f"reshape({out}, {_dims(shape)})", x.dtype, shape, "gathered")


def _axis_slice(x: Val, axis: int, text: str) -> str:
    return "[" + ", ".join([":"] * axis + [text] + [":"] * (x.rank - axis - 1)) + "]"


def _run_lengths(idx: np.ndarray) -> np.ndarray | None:
    """How often each value from ``idx[0]`` to ``idx[-1]`` repeats, when ``idx`` steps
    by 0 or 1 only (a nearest or linear upsample's index map), else None."""
    steps = np.diff(idx)
    if not ((steps == 0) | (steps == 1)).all():
        return None
    return np.bincount(idx - idx[0])


def _repeated(n: Node, x: Val, axis: int, lo: int, values: int, r: int) -> Val:
    """``values`` elements of ``x`` from ``lo`` along ``axis``, each ``r`` times."""
    part = x.shape[:axis] + (Dim(values),) + x.shape[axis + 1:]
    src = n.em.bind(f"{n.ref(x)}{_axis_slice(x, axis, f'{lo}:{lo + values}')}", x.dtype, part,
                    "take_src")
    if r == 1:
        return src
    wide = x.shape[:axis] + (Dim(values), Dim(1)) + x.shape[axis + 1:]
    copies = x.shape[:axis] + (Dim(values), Dim(r)) + x.shape[axis + 1:]
    out = x.shape[:axis] + (Dim(values * r),) + x.shape[axis + 1:]
    return n.em.bind(f"reshape(broadcast_to(reshape({src.ref}, {_dims(wide)}), {_dims(copies)}), "
                     f"{_dims(out)})", x.dtype, out, "repeated")


def take_constant(n: Node, x: Val, idx: np.ndarray, axis: int) -> Val:
    """``np.take(x, idx, axis)`` for a constant 1-D ``idx`` within ``[0, extent)``, in the
    cheapest form its pattern allows:

    - an arithmetic progression (a strided slice; a downsample);
    - each value repeated ``r`` times, the first and last runs shorter or longer (an
      integer upsample, edges clamped as interpolation clamps them): one broadcast
      repeat plus edge copies, concatenated;
    - anything else: ``Gather``'s loop of slice copies.
    """
    idx = np.asarray(idx, np.int64).reshape(-1)
    shape = x.shape[:axis] + (Dim(len(idx)),) + x.shape[axis + 1:]
    steps = np.diff(idx)
    if len(idx) == 1 or (steps == steps[0]).all() and steps[0] >= 1:
        step = int(steps[0]) if len(idx) > 1 else 1
        stop = int(idx[-1]) + 1
        text = f"{idx[0]}:{stop}" + (f":{step}" if step != 1 else "")
        return n.em.bind(f"{n.ref(x)}{_axis_slice(x, axis, text)}", x.dtype, shape, "taken")
    runs = _run_lengths(idx)
    if runs is None or (len(runs[1:-1]) and (runs[1:-1] != runs[1]).any()):
        return gather_loop(n, x, const_val(idx, DType.I64, hint=f"{n.label}_idx"), axis)
    inner = runs[1:-1]
    r = int(inner[0]) if len(inner) else int(max(runs))
    first, last, lo = int(runs[0]), int(runs[-1]), int(idx[0])
    parts = []
    if first > r:
        parts.append(_repeated(n, x, axis, lo, 1, first - r))
    core = _repeated(n, x, axis, lo, len(runs), r)
    cut = (r - min(first, r), len(runs) * r - (r - min(last, r)))
    if cut != (0, len(runs) * r):
        core_shape = x.shape[:axis] + (Dim(cut[1] - cut[0]),) + x.shape[axis + 1:]
        core = n.em.bind(f"{core.ref}{_axis_slice(x, axis, f'{cut[0]}:{cut[1]}')}", x.dtype,
                         core_shape, "taken")
    parts.append(core)
    if last > r:
        parts.append(_repeated(n, x, axis, lo + len(runs) - 1, 1, last - r))
    if len(parts) == 1:
        return parts[0]
    return n.em.bind(f"concat([{', '.join(p.ref or '' for p in parts)}], axis={axis})", x.dtype,
                     shape, "taken")


@op("GatherND")
def _gather_nd(n: Node) -> list[Val]:
    """``GatherND`` with constant indices (what an exporter writes for fixed positions):
    the index tuples become flat rows of the data viewed as ``[P, rest...]``, a slice
    when they are consecutive, else ``Gather``'s loop of slice copies."""
    x = n.x(0)
    batch = int(n.attr("batch_dims", 0))
    if n.x(1).const is None:
        return [_gather_nd_loop(n, x, n.x(1), batch)]
    idx = n.const(1, "the indices")
    assert idx is not None
    if idx.ndim < 1 or not np.issubdtype(idx.dtype, np.integer):
        raise n.fail("the indices must be an integer tensor of rank >= 1")
    if batch:
        idx = _with_batch_coordinates(n, x, idx, batch)
    r = int(idx.shape[-1])
    if r > x.rank or not all(d.is_static for d in x.shape[:r]):
        raise n.fail(f"the indices address {r} leading axes; they must be static axes of the data")
    lead = tuple(d.value for d in x.shape[:r])
    tuples = idx.reshape(-1, r).astype(np.int64)
    if ((tuples < -np.array(lead)) | (tuples >= np.array(lead))).any():
        raise n.fail(f"an index is out of range for the data's leading extents {list(lead)}")
    flat = np.ravel_multi_index(tuple((tuples % np.array(lead)).T), lead) if r else np.zeros(len(tuples), np.int64)
    rest = x.shape[r:]
    shape = tuple(Dim(int(d)) for d in idx.shape[:-1]) + rest
    rows = Dim(int(np.prod(lead))) if r else Dim(1)
    if x.const is not None:
        return [const_val(x.const.reshape(rows.value, *x.const.shape[r:])[flat].reshape(
            [d.value for d in shape]), x.dtype)]
    src = n.em.bind(f"reshape({n.ref(x)}, {_dims((rows, *rest))})", x.dtype, (rows, *rest), "gather_src")
    if len(flat) and (np.diff(flat) == 1).all():
        tail = ", :" * len(rest)
        picked = n.em.bind(f"{src.ref}[{flat[0]}:{flat[-1] + 1}{tail}]", x.dtype,
                           (Dim(len(flat)), *rest), "gathered")
        return [n.out(f"reshape({picked.ref}, {_dims(shape)})", x.dtype, shape)]
    flat_idx = const_val(flat.reshape(idx.shape[:-1]), DType.I64, hint=f"{n.label}_rows")
    v = gather_loop(n, src, flat_idx, 0)
    return [n.out(n.ref(v), v.dtype, v.shape)]


def _with_batch_coordinates(n: Node, x: Val, idx: np.ndarray, batch: int) -> np.ndarray:
    """``batch_dims`` leading axes shared by data and indices as explicit coordinates:
    each index tuple gets its own batch position in front, so ``batch_dims=0`` on the
    result addresses the same elements with the same output shape."""
    if not 0 < batch < min(x.rank, idx.ndim):
        raise n.fail(f"batch_dims={batch} must be below the ranks of the data ({x.rank}) and "
                     f"the indices ({idx.ndim})")
    if [d.value if d.is_static else None for d in x.shape[:batch]] != list(idx.shape[:batch]):
        raise n.fail(f"the first {batch} axes of the data {list(x.shape[:batch])} and the "
                     f"indices {list(idx.shape[:batch])} must agree")
    lead = idx.shape[:-1]
    grid = np.indices(idx.shape[:batch]).reshape(batch, *idx.shape[:batch], *[1] * (len(lead) - batch))
    coords = np.broadcast_to(np.moveaxis(grid, 0, -1), (*lead, batch))
    return np.concatenate([coords, idx.astype(np.int64)], axis=-1)


def _gather_nd_loop(n: Node, x: Val, idx: Val, batch: int) -> Val:
    """``GatherND`` with run-time indices (torch's advanced indexing ``mask[rows, cols]``):
    one copy per index tuple, ``out[b, t, ...] = x[b, i0, i1, ..., :]`` over the
    ``batch_dims`` leading axes flattened into one (static) ``b``, where the DSL's own
    indexing wraps negative indices and stops the call on one out of range."""
    _index_dtype_ok(n, idx)
    r = idx.shape[-1].value if idx.rank and idx.shape[-1].is_static else None
    if r is None or not 1 <= r <= x.rank - batch or not 0 <= batch < idx.rank:
        raise n.fail(f"the run-time indices need a static last axis of 1 to the data's rank "
                     f"({x.rank}) less batch_dims ({batch})")
    if batch and not all(d.is_static for d in x.shape[:batch]):
        raise n.fail(f"batch_dims={batch} with run-time indices needs static batch axes")
    em, names = n.em, n.em.names
    lead, rest = idx.shape[:-1], x.shape[batch + r:]
    batches, count = numel(x.shape[:batch]), numel(lead[batch:])
    b, t = names.fresh("b"), names.fresh("t")
    # no batch axes: x as it is, so an index out of range names the caller's axis
    per = [b] if batch else []
    rows = [batches] if batch else []
    tuples = em.bind(f"reshape(cast({n.ref(idx)}, i64), {_dims((*rows, count, Dim(r)))})",
                     DType.I64, (*rows, count, Dim(r)), "gather_tuples")
    src = em.bind(f"reshape({n.ref(x)}, {_dims((batches, *x.shape[batch:]))})", x.dtype,
                  (batches, *x.shape[batch:]), "gather_src") if batch else x
    out = names.fresh("gathered")
    picks = ", ".join(per + [f"{tuples.ref}[{', '.join(per + [t])}, {j}]" for j in range(r)]
                      + [":"] * len(rest))
    inner = [f"for {t} in range(dim({tuples.ref}, {len(per)})) {{",
             f"    {out}[{', '.join(per + [t] + [':'] * len(rest))}] = {n.ref(src)}[{picks}];",
             "}"]
    loops = [f"for {b} in range({batches.text()}) {{", *["    " + ln for ln in inner], "}"] \
        if batch else inner
    em.body += [f"    {out} = zeros({_dims((*rows, count, *rest))}, {x.dtype});",
                *["    " + ln for ln in loops]]
    shape = lead + rest
    return n.out(f"reshape({out}, {_dims(shape)})", x.dtype, shape)


@op("GatherElements")
def _gather_elements(n: Node) -> list[Val]:
    x, idx = n.x(0), n.x(1)
    _index_dtype_ok(n, idx)
    axis = n.axis(int(n.attr("axis", 0)), x.rank)
    if idx.rank != x.rank:
        raise n.fail(f"the indices have rank {idx.rank}, the data rank {x.rank}")
    if x.const is not None and idx.const is not None:
        taken = np.take_along_axis(x.const, np.where(idx.const < 0, idx.const + x.const.shape[axis],
                                                     idx.const), axis)
        return [const_val(taken, x.dtype)]
    em, names = n.em, n.em.names
    out, i = names.fresh("gathered"), names.fresh("i")
    coords = [names.fresh(f"c{k}") for k in range(x.rank)]
    lines = [f"    {out} = zeros({_dims(idx.shape)}, {x.dtype});"]
    # One loop per axis of the indices: the element's coordinates, no division.
    for k, c in enumerate(coords):
        lines.append(f"    {'    ' * k}for {c} in range(dim({n.ref(idx)}, {k})) {{")
    pad = "    " * (x.rank + 1)
    at = ", ".join(coords)
    lines += [f"{pad}{i} = cast({n.ref(idx)}[{at}], i64);",
              f"{pad}if {i} < 0 {{ {i} = {i} + dim({n.ref(x)}, {axis}); }}"]
    src = ", ".join(i if k == axis else c for k, c in enumerate(coords))
    lines.append(f"{pad}{out}[{at}] = {n.ref(x)}[{src}];")
    lines += [f"    {'    ' * k}}}" for k in reversed(range(x.rank))]
    em.body += lines
    return [n.out(out, x.dtype, idx.shape)]


@op("ConstantOfShape")
def _constant_of_shape(n: Node) -> list[Val]:
    shape = tuple(n.dims(0, "the shape"))
    value = n.attr("value")
    array = np.zeros(1, np.float32) if value is None else np.asarray(value).reshape(-1)
    if array.size != 1:
        raise n.fail(f"value must hold one element, got {array.size}")
    v = const_val(array)  # (a uint8 value is held shifted, another held type widened)
    assert v.const is not None
    fill = v.const.reshape(-1)[0]
    if all(d.is_static for d in shape) and numel(shape).value <= 16:
        out = const_val(np.full([d.value for d in shape], fill), v.dtype)
    elif any(d.is_static and d.value == 0 for d in shape):
        raise n.fail("an empty result cannot be written in WIA DSL")
    else:
        out = n.out(f"full({_dims(shape)}, {literal(fill, v.dtype)}, {v.dtype})", v.dtype, shape)
    out.offset, out.held = v.offset, v.held
    return [out]

