"""ONNX Split and Pad, as slices and concatenations.

- ``Split``: the ``split`` sizes (input since opset 13, attribute before), or
  ``num_outputs`` (opset 18: equal parts, the last one smaller), or equal parts for
  as many outputs as the node has; each output is a slice of the split axis.
- ``Pad``: ``constant`` (bands of the fill value), ``edge`` (the first / last slice
  repeated) and ``reflect`` (the mirrored slices, without the edge) on any axes
  (``axes``, opset 18), the pads an attribute (opset < 11) or a constant input.
  Negative pads crop. Padded axes must be static.
"""

from __future__ import annotations

import numpy as np

from ..graph import Node, Val, const_val
from ..shapes import Dim
from ..text import literal
from .registry import op


def _slice_text(rank: int, axis: int, piece: str) -> str:
    items = [":"] * rank
    items[axis] = piece
    return ", ".join(items)


def _split_sizes(n: Node, extent: int, outputs: int) -> list[int]:
    sizes = n.attr("split") if n.opset < 13 else None
    if n.opset >= 13 and n.input(1, required=False) is not None:
        sizes = n.const(1, "split")
    if sizes is not None:
        sizes = [int(s) for s in np.asarray(sizes).reshape(-1)]
        if len(sizes) != outputs or sum(sizes) != extent or min(sizes) < 0:
            raise n.fail(f"split={sizes} does not split an extent of {extent} into "
                         f"{outputs} outputs")
        return sizes
    parts = int(n.attr("num_outputs", outputs))
    if parts != outputs:
        raise n.fail(f"num_outputs={parts} but the node has {outputs} outputs")
    step = -(-extent // parts)
    sizes = [max(0, min(step, extent - i * step)) for i in range(parts)]
    if n.attr("num_outputs") is None and extent % parts:
        raise n.fail(f"an extent of {extent} does not split into {parts} equal parts")
    return sizes


@op("Split")
def _split(n: Node) -> list[Val]:
    x = n.x()
    axis = n.axis(int(n.attr("axis", 0)), x.rank)
    if not x.shape[axis].is_static:
        raise n.fail(f"splitting symbolic axis {axis} ({x.shape[axis]}) is not supported")
    sizes = _split_sizes(n, x.shape[axis].value, len(n.proto.output))
    results, start = [], 0
    for i, size in enumerate(sizes):
        if size == 0:
            raise n.fail(f"output {i} would be empty (not supported)")
        stop = start + size
        if x.const is not None:
            index = [slice(None)] * x.rank
            index[axis] = slice(start, stop)
            results.append(const_val(x.const[tuple(index)], x.dtype))
        else:
            shape = x.shape[:axis] + (Dim(size),) + x.shape[axis + 1:]
            piece = _slice_text(x.rank, axis, f"{start}:{stop}")
            results.append(n.out(f"{n.ref(x)}[{piece}]", x.dtype, shape, i))
        start = stop
    return results


def _pads(n: Node, rank: int) -> tuple[list[int], list[int]]:
    """(before, after) per axis of the input."""
    if n.opset < 11:
        pads = [int(p) for p in n.attr("pads")]
        axes = list(range(rank))
    else:
        value = n.const(1, "the pads")
        assert value is not None
        pads = [int(p) for p in value.reshape(-1)]
        given = n.const(3, "the axes") if len(n.vals) > 3 else None
        axes = [n.axis(int(a), rank) for a in given.reshape(-1)] if given is not None \
            else list(range(rank))
    if len(pads) != 2 * len(axes):
        raise n.fail(f"pads={pads} must have 2 entries per padded axis ({len(axes)} axes)")
    before, after = [0] * rank, [0] * rank
    for k, a in enumerate(axes):
        before[a], after[a] = pads[k], pads[k + len(axes)]
    return before, after


def _fill_value(n: Node, x: Val) -> str:
    if n.opset < 11:
        value = n.attr("value", 0.0)
    else:
        given = n.const(2, "the constant value") if len(n.vals) > 2 else None
        value = 0 if given is None or given.size == 0 else given.reshape(-1)[0]
    return literal(value, x.dtype)


def _bands(n: Node, x: Val, axis: int, count: int, side: str, mode: str, fill: str,
           shape: list[Dim]) -> str:
    """The text of the ``count`` slices added on one ``side`` of ``axis``."""
    extent = shape[axis].value
    if mode == "constant":
        band = shape.copy()
        band[axis] = Dim(count)
        return f"full([{', '.join(d.text() for d in band)}], {fill}, {x.dtype})"
    if mode == "edge":
        edge = "0:1" if side == "before" else f"{extent - 1}:{extent}"
        band = shape.copy()
        band[axis] = Dim(count)
        dims = ", ".join(d.text() for d in band)
        return f"broadcast_to({n.ref(x)}[{_slice_text(x.rank, axis, edge)}], [{dims}])"
    if count >= extent:
        raise n.fail(f"reflect padding of {count} needs an extent above it (axis {axis} "
                     f"has {extent})")
    # reflect: mirrored, without the edge element itself
    piece = f"{count}:0:-1" if side == "before" else f"{extent - 2}:{extent - 2 - count}:-1"
    if side == "after" and extent - 2 - count < 0:
        piece = f"{extent - 2}::-1"
    return f"{n.ref(x)}[{_slice_text(x.rank, axis, piece)}]"


@op("Pad")
def _pad(n: Node) -> list[Val]:
    x = n.x()
    mode = n.attr("mode", "constant")
    if mode not in ("constant", "edge", "reflect", "wrap"):
        raise n.fail(f"mode={mode} is not supported (constant, edge, reflect, wrap)")
    before, after = _pads(n, x.rank)
    fill = _fill_value(n, x)
    padded = [a for a in range(x.rank) if before[a] or after[a]]
    for axis in padded:
        if not x.shape[axis].is_static:
            raise n.fail(f"padding symbolic axis {axis} ({x.shape[axis]}) is not supported")
    if mode == "constant" and padded and min(before + after) >= 0:  # one fill, one copy
        v = n.em.pad_constant(x, n.ref(x), list(before), list(after), fill)
        return [n.out(n.ref(v), x.dtype, v.shape)]
    v = x
    for axis in range(x.rank):
        if not before[axis] and not after[axis]:
            continue
        if not v.shape[axis].is_static:
            raise n.fail(f"padding symbolic axis {axis} ({v.shape[axis]}) is not supported")
        v = _pad_axis(n, v, axis, before[axis], after[axis], mode, fill)
    return [v] if v is x else [n.out(n.ref(v), x.dtype, v.shape)]


def _pad_axis(n: Node, x: Val, axis: int, before: int, after: int, mode: str, fill: str) -> Val:
    shape = list(x.shape)
    extent = shape[axis].value
    if min(before, after) < 0:  # negative pads crop first
        lo, hi = max(0, -before), extent - max(0, -after)
        if hi <= lo:
            raise n.fail(f"the pads crop axis {axis} ({extent}) to nothing")
        shape[axis] = Dim(hi - lo)
        x = n.em.bind(f"{n.ref(x)}[{_slice_text(x.rank, axis, f'{lo}:{hi}')}]", x.dtype,
                      tuple(shape), "cropped")
        before, after = max(0, before), max(0, after)
        if not before and not after:
            return x
    if mode == "wrap":
        parts = _wrapped(n, x, axis, before, after)
    else:
        parts = []
        if before:
            parts.append(_bands(n, x, axis, before, "before", mode, fill, shape))
        parts.append(n.ref(x))
        if after:
            parts.append(_bands(n, x, axis, after, "after", mode, fill, shape))
    shape[axis] = Dim(shape[axis].value + before + after)
    return n.em.bind(f"concat([{', '.join(parts)}], axis={axis})", x.dtype, tuple(shape),
                     "padded")


def _wrapped(n: Node, x: Val, axis: int, before: int, after: int) -> list[str]:
    """The pieces of ``x`` padded periodically along ``axis`` (``mode=wrap``: element
    ``j`` of the result is ``x[(j - before) mod extent]``): its runs of consecutive
    source elements, each one slice (pads longer than the axis repeat it whole)."""
    extent = x.shape[axis].value
    idx = np.arange(-before, extent + after) % extent
    cuts = np.flatnonzero(np.diff(idx) != 1) + 1
    return [f"{n.ref(x)}[{_slice_text(x.rank, axis, f'{run[0]}:{run[-1] + 1}')}]"
            for run in np.split(idx, cuts)]
