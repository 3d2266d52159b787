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

from ..dtypes import DType
from .onnx_graph import Node, Val, const_val
from .onnx_ops import op
from .onnx_shapes import Shape, numel
from .onnx_text import literal


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
    v = const_val(array)
    if all(d.is_static for d in shape) and numel(shape).value <= 16:
        return [const_val(np.full([d.value for d in shape], array[0]), v.dtype)]
    if any(d.is_static and d.value == 0 for d in shape):
        raise n.fail("an empty result cannot be written in WIA DSL")
    fill = literal(array[0], v.dtype)
    return [n.out(f"full({_dims(shape)}, {fill}, {v.dtype})", v.dtype, shape)]

