"""ONNX ops defined by index patterns: Range, Trilu, CumSum, InstanceNormalization.

- ``Range`` of constant start / limit / delta folds to a constant (exporters write
  it for position ids of a static length).
- ``Trilu`` keeps the lower or upper triangle (diagonal offset ``k``) of the last
  two axes: a constant boolean mask and ``where``.
- ``CumSum`` along a static axis is a product with a constant triangular matrix of
  ones (``exclusive`` drops the diagonal, ``reverse`` flips the triangle): one
  ``matmul``, which the backends already make fast, instead of a sequential loop.
- ``InstanceNormalization``: per sample and channel, over the spatial axes.
"""

from __future__ import annotations

import numpy as np

from ..graph import Node, Val, const_val
from ..shapes import Dim
from ..text import literal
from .registry import op


def _scalar(n: Node, i: int, what: str) -> np.ndarray:
    value = n.const(i, what)
    assert value is not None
    if value.size != 1:
        raise n.fail(f"{what} (input {i}) must be a scalar, got shape {list(value.shape)}")
    return value.reshape(())


@op("Range")
def _range(n: Node) -> list[Val]:
    start, limit, delta = (_scalar(n, i, w) for i, w in enumerate(("start", "limit", "delta")))
    if delta == 0:
        raise n.fail("delta is 0")
    # ONNX's count, ceil((limit - start) / delta), computed in the inputs' dtype
    count = max(int(np.ceil((limit - start) / delta)), 0)
    values = (start + delta * np.arange(count)).astype(start.dtype)
    if values.size == 0:
        raise n.fail("the range is empty (not supported)")
    return [const_val(values, n.x(0).dtype)]


@op("Trilu")
def _trilu(n: Node) -> list[Val]:
    x = n.x()
    if x.rank < 2:
        raise n.fail("the input needs at least two axes")
    k = int(_scalar(n, 1, "k")) if n.input(1, required=False) is not None else 0
    upper = bool(int(n.attr("upper", 1)))
    zero = literal(0, x.dtype)
    if not all(d.is_static for d in x.shape[-2:]):  # a causal mask of [seq, seq]: from indices
        r, c = (n.em.extent(d) for d in x.shape[-2:])
        i, j = f"reshape(arange({r}), [{r}, 1])", f"reshape(arange({c}), [1, {c}])"
        kept = f"{i} <= {j} - {k}" if upper else f"{i} >= {j} - {k}"
        return [n.out(f"where({kept}, {n.ref(x)}, {zero})", x.dtype, x.shape)]
    rows, cols = x.shape[-2].value, x.shape[-1].value
    keep = np.triu(np.ones((rows, cols), bool), k) if upper else np.tril(np.ones((rows, cols), bool), k)
    if x.const is not None:
        return [const_val(np.where(keep, x.const, np.zeros_like(x.const)), x.dtype)]
    mask = n.ref(const_val(keep, hint=f"{n.label}_mask"))
    return [n.out(f"where({mask}, {n.ref(x)}, {zero})", x.dtype, x.shape)]


@op("CumSum")
def _cumsum(n: Node) -> list[Val]:
    x = n.x()
    axis = n.axis(int(_scalar(n, 1, "the axis")), x.rank)
    if not x.shape[axis].is_static:
        raise n.fail(f"a cumulative sum along symbolic axis {axis} is not supported")
    if not (x.dtype.is_float or x.dtype.is_int):
        raise n.fail(f"a cumulative sum of {x.dtype} is not supported")
    m = x.shape[axis].value
    # y[..., j] = sum over i of x[..., i] * T[i, j]; T[i, j] = 1 where i feeds j.
    i, j = np.indices((m, m))
    feeds = (i >= j) if int(n.attr("reverse", 0)) else (i <= j)
    if int(n.attr("exclusive", 0)):
        feeds &= i != j
    tri = n.ref(const_val(feeds.astype(x.dtype.numpy), x.dtype, hint=f"{n.label}_tri"))
    if axis == x.rank - 1:
        return [n.out(f"{n.ref(x)} @ {tri}", x.dtype, x.shape)]
    perm = [*range(axis), *range(axis + 1, x.rank), axis]
    back = [int(p) for p in np.argsort(perm)]
    moved = tuple(x.shape[p] for p in perm)
    t = n.em.bind(f"transpose({n.ref(x)}, {perm}) @ {tri}", x.dtype, moved, "cumsum")
    return [n.out(f"transpose({t.ref}, {back})", x.dtype, x.shape)]


@op("InstanceNormalization")
def _instance_norm(n: Node) -> list[Val]:
    x, scale, bias = n.x(0), n.x(1), n.x(2)
    if x.rank < 3:
        raise n.fail(f"the input must have spatial axes (rank {x.rank})")
    eps = literal(float(n.attr("epsilon", 1e-5)), x.dtype)
    axes = list(range(2, x.rank))
    per_channel = (x.shape[1],) + (Dim(1),) * len(axes)
    gamma, beta = (_channels(n, v, per_channel) for v in (scale, bias))
    stat = x.shape[:2] + (Dim(1),) * len(axes)
    xr = n.ref(x)
    mu = n.em.bind(f"reduce_mean({xr}, axis={axes}, keepdims=true)", x.dtype, stat, "mean")
    xc = n.em.bind(f"{xr} - {mu.ref}", x.dtype, x.shape, "centered")
    inv = n.em.bind(f"rsqrt(reduce_mean({xc.ref} * {xc.ref}, axis={axes}, keepdims=true) + {eps})",
                    x.dtype, stat, "inv_std")
    return [n.out(f"{xc.ref} * {inv.ref} * {gamma} + {beta}", x.dtype, x.shape)]


def _channels(n: Node, v: Val, shape: tuple[Dim, ...]) -> str:
    """A per-channel ``[C]`` operand as ``[C, 1, ...]`` text."""
    if v.const is not None:
        c = const_val(v.const.reshape([d.value for d in shape]), v.dtype, hint=v.hint)
        return n.ref(c, len(shape) + 1)
    return f"reshape({n.ref(v)}, [{', '.join(d.text() for d in shape)}])"
