"""ONNX MaxPool, AveragePool and the global pools, for 1-D, 2-D and 3-D inputs.

WIA DSL's ``max_pool`` / ``avg_pool`` are 2-D NCHW with a square kernel, one stride
and no padding; a pool inside that (ResNet's stem, most CNNs) uses them, after an
explicit pad where the node has pads. Everything else the spec allows — 1-D and 3-D
inputs, rectangular kernels, strides per axis, dilations, ``ceil_mode`` — is the
pool's definition written out: the padded input's strided window at each kernel tap,
combined by ``max`` (a balanced tree, so 125 taps nest 7 deep) or summed and scaled
by one constant of per-window counts. Windows are separable, so the count of a
window is the product of its counts per axis:

- a tap at input position ``o * stride - pad_begin + t * dilation`` is a real
  element inside ``[0, extent)``; with ``count_include_pad=1`` it counts inside
  ``[-pad_begin, extent + pad_end)`` (ONNX Runtime's rule: the padding, never the
  extension ``ceil_mode`` adds);
- ``ceil_mode`` adds one window where the floor leaves input over, unless it would
  start past the input and its begin padding; that window's missing end is padded
  with the fill (``-inf`` or the integer minimum for max, 0 for the average).
"""

from __future__ import annotations

import itertools

import numpy as np

from ...dtypes import DType
from ..graph import Node, Val, const_val
from ..shapes import Dim
from ..text import extreme_literal
from .conv import ConvGeometry, conv_geometry, pad_spatial, window
from .registry import op


def _max_fill(n: Node, x: Val) -> str:
    """The padding of a max pool: a value no real element is below."""
    if not (x.dtype.is_int or x.dtype.is_float):
        raise n.fail(f"MaxPool of {x.dtype} is not supported")
    return extreme_literal(x.dtype, lowest=True)


def _tree(fn: str, terms: list[str]) -> str:
    """``fn`` over ``terms`` as a balanced tree of binary calls."""
    while len(terms) > 1:
        pairs = [f"{fn}({a}, {b})" for a, b in zip(terms[0::2], terms[1::2], strict=False)]
        terms = pairs + (terms[-1:] if len(terms) % 2 else [])
    return terms[0]


def _counts(g: ConvGeometry, extents: tuple[int, ...], out: tuple[int, ...],
            include_pad: bool) -> np.ndarray:
    """Elements each window averages over, as an array of the output's spatial shape."""
    total = np.ones((), dtype=np.float64)
    for a, (e, o) in enumerate(zip(extents, out, strict=True)):
        begin, end = g.pads[a], g.pads[a + g.rank]
        pos = (np.arange(o)[:, None] * g.strides[a] - begin
               + np.arange(g.kernel[a])[None, :] * g.dilations[a])
        inside = pos < e + end if include_pad else (pos >= 0) & (pos < e)
        total = np.multiply.outer(total, inside.sum(axis=1))
    return total


def _fits_builtin(g: ConvGeometry, out: tuple[int, ...], extents: tuple[int, ...]) -> bool:
    """Whether ``max_pool`` / ``avg_pool`` compute this pool (after an explicit pad)."""
    return (g.rank == 2 and g.kernel[0] == g.kernel[1] and g.strides[0] == g.strides[1]
            and g.dilations == (1, 1)
            and out == tuple(g.out_extent(a, e) for a, e in enumerate(extents)))


def _builtin_pool(n: Node, x: Val, g: ConvGeometry, shape: tuple[Dim, ...],
                  extents: tuple[int, ...], out: tuple[int, ...]) -> Val:
    fn = "max_pool" if n.op == "MaxPool" else "avg_pool"
    k, s = g.kernel[0], g.strides[0]
    if not any(g.pads):
        return n.out(f"{fn}({n.ref(x)}, kernel={k}, stride={s})", x.dtype, shape)
    padded = pad_spatial(n, x, g.pads, _max_fill(n, x) if fn == "max_pool" else "0.0")
    expr = f"{fn}({padded.ref}, kernel={k}, stride={s})"
    if fn == "avg_pool" and not int(n.attr("count_include_pad", 0)):
        # average over the real elements only: scale by k*k / (real elements per window)
        scale = (k * k / _counts(g, extents, out, False)).astype(x.dtype.numpy)
        expr += f" * {n.ref(const_val(scale, x.dtype, hint=f'{n.label}_count'), 4)}"
    return n.out(expr, x.dtype, shape)


def _padded_taps(n: Node, x: Val, g: ConvGeometry, extents: tuple[int, ...],
                 out: tuple[int, ...], fill: str) -> tuple[list[tuple[int, ...]], list[str]]:
    """Every kernel tap (row-major) and its strided window of the input padded with
    ``fill`` (the end padding grown where ``ceil_mode`` adds a window)."""
    ends = tuple(max(g.pads[a + g.rank], (o - 1) * g.strides[a] + g.span(a) - e - g.pads[a])
                 for a, (e, o) in enumerate(zip(extents, out, strict=True)))
    padded = pad_spatial(n, x, (*g.pads[:g.rank], *ends), fill)
    taps = list(itertools.product(*(range(k) for k in g.kernel)))
    return taps, [window(n.ref(padded), tuple(t * d for t, d in zip(tap, g.dilations,
                                                                      strict=True)),
                         g.strides, out) for tap in taps]


def _max_with_indices(n: Node, x: Val, g: ConvGeometry, shape: tuple[Dim, ...],
                      extents: tuple[int, ...], out: tuple[int, ...]) -> list[Val]:
    """MaxPool and its Indices output: the taps in order, a later one replacing the
    best only when greater (the first maximum wins, as ONNX Runtime picks it); each
    tap's index is a constant of the output's spatial shape (its input position,
    flattened row-major, or column-major with ``storage_order=1``) plus the element's
    (n, c) plane offset."""
    order = int(n.attr("storage_order", 0))
    taps, windows = _padded_taps(n, x, g, extents, out, extreme_literal(x.dtype, lowest=True))
    grid = np.meshgrid(*(np.arange(o) * g.strides[a] - g.pads[a] for a, o in enumerate(out)),
                       indexing="ij")
    plane = int(np.prod(extents))
    dims = [d.text() for d in x.shape[:2]]
    offset = n.em.bind(f"reshape(arange({dims[0]} * {dims[1]}), [{dims[0]}, {dims[1]}"
                       f"{', 1' * g.rank}]) * {plane}", DType.I64,
                       (*x.shape[:2], *(Dim(1),) * g.rank), "plane")
    best = n.em.bind(windows[0], x.dtype, shape, "best")
    where_ = None
    for k, (tap, win) in enumerate(zip(taps, windows, strict=True)):
        pos = [c + t * d for c, t, d in zip(grid, tap, g.dilations, strict=True)]
        flat = np.ravel_multi_index(tuple(np.clip(p, 0, e - 1) for p, e in zip(pos, extents, strict=True)),
                                    extents, order="F" if order else "C")
        idx = n.ref(const_val(flat.astype(np.int64), DType.I64, hint=f"{n.label}_idx{k}"), x.rank)
        if where_ is None:
            where_ = n.em.bind(f"{offset.ref} + {idx}", DType.I64, shape, "argbest")
            continue
        cand = n.em.bind(win, x.dtype, shape, "tap")
        better = f"{cand.ref} > {best.ref}"
        where_ = n.em.bind(f"where({better}, {offset.ref} + {idx}, {where_.ref})", DType.I64,
                           shape, "argbest")
        best = n.em.bind(f"where({better}, {cand.ref}, {best.ref})", x.dtype, shape, "best")
    assert where_ is not None
    return [n.out(n.ref(best), x.dtype, shape), n.out(n.ref(where_), DType.I64, shape, 1)]


def _tap_pool(n: Node, x: Val, g: ConvGeometry, shape: tuple[Dim, ...],
              extents: tuple[int, ...], out: tuple[int, ...]) -> Val:
    """The pool as its definition: one strided window of the padded input per tap."""
    is_max = n.op == "MaxPool"
    _, terms = _padded_taps(n, x, g, extents, out, _max_fill(n, x) if is_max else "0.0")
    if is_max:
        return n.out(_tree("max", terms), x.dtype, shape)
    counts = _counts(g, extents, out, bool(int(n.attr("count_include_pad", 0))))
    scale = const_val((1.0 / counts).astype(x.dtype.numpy), x.dtype, hint=f"{n.label}_count")
    return n.out(f"({' + '.join(terms)}) * {n.ref(scale, x.rank)}", x.dtype, shape)


@op("MaxPool", "AveragePool")
def _pool(n: Node) -> list[Val]:
    x = n.x()
    kernel = tuple(int(k) for k in n.attr("kernel_shape", []))
    if not 1 <= len(kernel) <= 3 or min(kernel) < 1:
        raise n.fail(f"kernel_shape={list(kernel)} must have 1 to 3 positive entries")
    indices = len(n.proto.output) > 1 and bool(n.proto.output[1])
    if indices and n.op != "MaxPool":
        raise n.fail("only MaxPool has an Indices output")
    if n.op == "AveragePool" and not x.dtype.is_float:
        raise n.fail(f"AveragePool of {x.dtype} is not supported (float inputs only)")
    g = conv_geometry(n, x, kernel)
    extents = tuple(d.value for d in x.shape[2:])
    ceil = bool(int(n.attr("ceil_mode", 0)))
    out = tuple((g.ceil_extent if ceil else g.out_extent)(a, e) for a, e in enumerate(extents))
    if min(out) < 1:
        raise n.fail(f"the kernel {list(kernel)} does not fit the padded input {list(extents)}")
    shape = (*x.shape[:2], *(Dim(o) for o in out))
    if indices:
        return _max_with_indices(n, x, g, shape, extents, out)
    build = _builtin_pool if _fits_builtin(g, out, extents) else _tap_pool
    return [build(n, x, g, shape, extents, out)]


@op("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(n: Node) -> list[Val]:
    x = n.x()
    if x.rank < 3:
        raise n.fail(f"the input must have spatial axes (rank {x.rank})")
    axes = list(range(2, x.rank))
    fn = "reduce_mean" if n.op == "GlobalAveragePool" else "reduce_max"
    shape = x.shape[:2] + (Dim(1),) * len(axes)
    return [n.out(f"{fn}({n.ref(x)}, axis={axes}, keepdims=true)", x.dtype, shape)]
