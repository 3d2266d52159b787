"""ONNX op translators, part 2: shape, layout, reductions, casts, constants.

Shape operands (Reshape's shape, Squeeze's axes, Slice's bounds...) must be
constants: the importer writes static reshape targets from the tracked symbolic
shapes. On constant data these ops fold in NumPy, so the shape arithmetic of
exported graphs (Shape -> Gather -> Concat -> Reshape) disappears at import.
"""

from __future__ import annotations

import numpy as np

from ...dtypes import DType
from ..graph import ONNX_DTYPES, ONNX_TYPE_NAMES, Node, Val, checked, const_val
from ..shapes import Dim, Shape, broadcast, is_static, numel, static
from ..storage import HELD
from ..symbolic import shape_value
from .gather import gather_loop
from .registry import op


def _dims_text(shape: Shape) -> str:
    return "[" + ", ".join(d.text() for d in shape) + "]"


def _reshaped(n: Node, x: Val, shape: Shape) -> Val:
    if x.const is not None:
        return Val(x.dtype, shape, const=x.const.reshape(static(shape)), offset=x.offset,
                   hint=x.hint)
    if shape == x.shape:
        return x
    v = n.out(f"reshape({n.ref(x)}, {_dims_text(shape)})", x.dtype, shape)
    v.offset = x.offset
    return v


@op("Reshape")
def _reshape(n: Node) -> list[Val]:
    x = n.x()
    target = n.dims(1, "the shape")
    allowzero = int(n.attr("allowzero", 0))
    dims: list[Dim | None] = []
    for i, d in enumerate(target):
        if d == Dim(0) and not allowzero:
            if i >= x.rank:
                raise n.fail(f"shape entry {i} is 0 (copy) but the input has rank {x.rank}")
            dims.append(x.shape[i])
        elif d == Dim(-1):
            dims.append(None)
        elif d.coef < 0:
            raise n.fail(f"shape entry {d} is invalid")
        else:
            dims.append(d)
    if dims.count(None) > 1:
        raise n.fail("more than one -1 in the shape")
    if None in dims:
        known = numel([d for d in dims if d is not None])
        dims[dims.index(None)] = checked(n, lambda: numel(x.shape) // known)
    shape = tuple(d for d in dims if d is not None)
    if numel(shape) != numel(x.shape):
        raise n.fail(f"cannot reshape {_dims_text(x.shape)} to {_dims_text(shape)}")
    return [_reshaped(n, x, shape)]


@op("Flatten")
def _flatten(n: Node) -> list[Val]:
    x = n.x()
    axis = int(n.attr("axis", 1))
    axis = axis + x.rank if axis < 0 else axis
    if not 0 <= axis <= x.rank:
        raise n.fail(f"axis {axis} is out of range for rank {x.rank}")
    shape = (numel(x.shape[:axis]), numel(x.shape[axis:]))
    if axis == 1 and x.rank >= 2 and x.const is None:
        return [n.out(f"flatten({n.ref(x)})", x.dtype, shape)]
    return [_reshaped(n, x, shape)]


def _axes(n: Node, rank: int, attr_until: int, required: bool = False) -> list[int] | None:
    """Axes from the attribute (opset < attr_until) or input 1, normalized; None if absent."""
    raw = n.attr("axes") if n.opset < attr_until else n.const(1, "axes")
    if raw is None:
        if required:
            raise n.fail("axes are required")
        return None
    axes = sorted(n.axis(int(a), rank) for a in np.asarray(raw).reshape(-1))
    if len(set(axes)) != len(axes):
        raise n.fail(f"repeated axes {axes}")
    return axes


@op("Squeeze")
def _squeeze(n: Node) -> list[Val]:
    x = n.x()
    axes = _axes(n, x.rank, 13)
    if axes is None:
        if not is_static(x.shape):
            raise n.fail("Squeeze without axes of a tensor with symbolic dims")
        axes = [i for i, d in enumerate(x.shape) if d == Dim(1)]
    for a in axes:
        if x.shape[a] != Dim(1):
            raise n.fail(f"axis {a} has extent {x.shape[a]}, not 1")
    return [_reshaped(n, x, tuple(d for i, d in enumerate(x.shape) if i not in axes))]


@op("Unsqueeze")
def _unsqueeze(n: Node) -> list[Val]:
    x = n.x()
    raw = n.attr("axes") if n.opset < 13 else n.const(1, "axes")
    if raw is None:
        raise n.fail("axes are required")
    rank = x.rank + len(np.asarray(raw).reshape(-1))
    axes = sorted(n.axis(int(a), rank) for a in np.asarray(raw).reshape(-1))
    dims = iter(x.shape)
    shape = tuple(Dim(1) if i in axes else next(dims) for i in range(rank))
    return [_reshaped(n, x, shape)]


@op("Transpose")
def _transpose(n: Node) -> list[Val]:
    x = n.x()
    perm = [int(p) for p in n.attr("perm", list(reversed(range(x.rank))))]
    if sorted(perm) != list(range(x.rank)):
        raise n.fail(f"perm {perm} is not a permutation of {x.rank} axes")
    shape = tuple(x.shape[p] for p in perm)
    if x.const is not None:
        return [Val(x.dtype, shape, const=np.transpose(x.const, perm), offset=x.offset,
                    hint=x.hint)]
    return [n.out(f"transpose({n.ref(x)}, {perm})", x.dtype, shape)]


@op("Concat")
def _concat(n: Node) -> list[Val]:
    xs = [n.x(i) for i in range(len(n.vals))]
    axis = n.axis(int(n.attr("axis")), xs[0].rank)
    if all(x.const is not None for x in xs):
        return [const_val(np.concatenate([x.const for x in xs], axis), xs[0].dtype)]
    extent = Dim(0)
    for x in xs:
        extent = checked(n, lambda x=x, e=extent: e + x.shape[axis])
    shape = xs[0].shape[:axis] + (extent,) + xs[0].shape[axis + 1:]
    refs = ", ".join(n.ref(x, 0) for x in xs)
    return [n.out(f"concat([{refs}], axis={axis})", xs[0].dtype, shape)]


@op("Expand")
def _expand(n: Node) -> list[Val]:
    x = n.x()
    target = tuple(n.dims(1, "the shape"))
    shape = checked(n, lambda: broadcast(x.shape, target))
    if shape == x.shape:
        return [x]
    return [n.out(f"broadcast_to({n.ref(x)}, {_dims_text(shape)})", x.dtype, shape)]


@op("Shape")
def _shape(n: Node) -> list[Val]:
    return [shape_value(n, n.x().shape)]


@op("Gather")
def _gather(n: Node) -> list[Val]:
    x = n.x()
    axis = n.axis(int(n.attr("axis", 0)), x.rank)
    idx = n.x(1).const
    if idx is None or idx.ndim != 0 and x.const is None:
        v = gather_loop(n, x, n.x(1), axis)  # indices known at run time
        return [n.out(n.ref(v), v.dtype, v.shape)]
    if x.const is not None:
        return [const_val(np.take(x.const, idx, axis=axis), x.dtype)]
    k = int(idx)
    items = [":"] * axis + [str(k)]
    shape = x.shape[:axis] + x.shape[axis + 1:]
    return [n.out(f"{n.ref(x)}[{', '.join(items)}]", x.dtype, shape)]


@op("Slice")
def _slice(n: Node) -> list[Val]:
    x = n.x()
    if n.opset < 10:
        starts, ends = n.attr("starts"), n.attr("ends")
        axes, steps = n.attr("axes"), None
    else:  # ends may be a shape value: x[:, 0:seq] of a position table (BERT's exports)
        starts, ends = n.const(1, "starts"), n.dims(2, "ends")
        axes, steps = n.const(3, "axes"), n.const(4, "steps")
    starts = [int(s) for s in starts]
    ends = [Dim.of(int(e)) if not isinstance(e, Dim) else e for e in ends]
    axes_l = [n.axis(int(a), x.rank) for a in axes] if axes is not None else \
        list(range(len(starts)))
    steps_l = [int(s) for s in steps] if steps is not None else [1] * len(starts)
    items, shape = [":"] * x.rank, list(x.shape)
    index = [slice(None)] * x.rank
    for a, s, end, t in zip(axes_l, starts, ends, steps_l):
        if not end.is_static:
            if (s, t) != (0, 1):
                raise n.fail(f"a slice of axis {a} to the dynamic end {end} must start at 0 "
                             f"with step 1 (starts={s}, steps={t})")
            if end != x.shape[a]:  # the first `end` elements (at most the extent, as ONNX clamps)
                shape[a] = end
                items[a] = f"0:{n.em.extent(end)}"
                index[a] = None  # type: ignore[call-overload]
            continue
        e = end.value
        if not x.shape[a].is_static:
            raise n.fail(f"slicing symbolic axis {a} ({x.shape[a]}) is not supported")
        if t == 0:
            raise n.fail("a slice step of 0")
        lo, hi, step = slice(s, e, t).indices(x.shape[a].value)
        shape[a] = Dim(len(range(lo, hi, step)))
        # indices() gives stop -1 for "through index 0" with a negative step
        index[a] = slice(lo, hi if hi >= 0 else None, step)
        items[a] = f"{lo}:{hi}:{step}" if hi >= 0 else f"{lo}::{step}"
    if x.const is not None and None not in index:
        return [const_val(x.const[tuple(index)], x.dtype)]
    return [n.out(f"{n.ref(x)}[{', '.join(items)}]", x.dtype, tuple(shape))]


#: ONNX op: (the reduction as a template over {x} and {args}, the opset from which
#: axes are an input instead of an attribute)
_REDUCE = {"ReduceSum": ("reduce_sum({x}{args})", 13),
           "ReduceMean": ("reduce_mean({x}{args})", 18),
           "ReduceMax": ("reduce_max({x}{args})", 18), "ReduceMin": ("reduce_min({x}{args})", 18),
           "ReduceProd": ("reduce_prod({x}{args})", 18),
           "ReduceSumSquare": ("reduce_sum({x} * {x}{args})", 18),
           "ReduceL1": ("reduce_sum(abs({x}){args})", 18),
           "ReduceL2": ("sqrt(reduce_sum({x} * {x}{args}))", 18),
           "ReduceLogSum": ("log(reduce_sum({x}{args}))", 18)}


#: what each reduction gives over an empty set (the spec's identities): None for the
#: type's lowest value (max) and highest (min), -inf/+inf for floats
_EMPTY = {"ReduceSum": 0, "ReduceMean": np.nan, "ReduceMax": None, "ReduceMin": None,
          "ReduceProd": 1, "ReduceSumSquare": 0, "ReduceL1": 0, "ReduceL2": 0,
          "ReduceLogSum": -np.inf, "ReduceLogSumExp": -np.inf}


def _reduction_axes(n: Node, x: Val, since: int) -> list[int] | None:
    """The reduced axes (every axis by default); None: a no-op (empty ``axes`` with
    ``noop_with_empty_axes``)."""
    axes = _axes(n, x.rank, since)
    if not axes:
        if axes is not None and n.attr("noop_with_empty_axes", 0):
            return None
        axes = list(range(x.rank))
    return axes


def _empty_reduction(n: Node, x: Val, axes: list[int], keep: bool) -> Val | None:
    """The constant result when a reduced axis is statically empty (NumPy raises for
    max/min there; ONNX defines every reduction's value)."""
    if not any(x.shape[a] == Dim(0) for a in axes):
        return None
    kept = [Dim(1) if i in axes else d for i, d in enumerate(x.shape) if keep or i not in axes]
    if not is_static(tuple(kept)):
        raise n.fail("a reduction over an empty axis with symbolic dims elsewhere")
    value = _EMPTY[n.op]
    if value is None:  # max: the type's lowest value, min: its highest
        lowest = n.op == "ReduceMax"
        if x.dtype is DType.BOOL:
            value = not lowest
        elif x.dtype.is_int:
            info = np.iinfo(x.dtype.numpy)
            value = info.min if lowest else info.max
        else:
            value = -np.inf if lowest else np.inf
    array = np.full([d.value for d in kept], value, dtype=x.dtype.numpy)
    return const_val(array, x.dtype)


@op(*_REDUCE)
def _reduce(n: Node) -> list[Val]:
    fn, since = _REDUCE[n.op]
    x = n.x()
    keep = bool(n.attr("keepdims", 1))
    axes = _reduction_axes(n, x, since)
    if axes is None:
        return [x]
    empty = _empty_reduction(n, x, axes, keep)
    if empty is not None:
        return [empty]
    shape = tuple(Dim(1) if i in axes else d for i, d in enumerate(x.shape)
                  if keep or i not in axes)
    flags = ", keepdims=true" if keep else ""
    return [n.out(fn.format(x=n.ref(x), args=f", axis={axes}{flags}"), x.dtype, shape)]


@op("ReduceLogSumExp")
def _reduce_log_sum_exp(n: Node) -> list[Val]:
    """log(sum(exp(x))) with the maximum taken out first, so it does not overflow."""
    x = n.x()
    keep = bool(n.attr("keepdims", 1))
    axes = _reduction_axes(n, x, 18)
    if axes is None:
        return [x]
    empty = _empty_reduction(n, x, axes, keep)
    if empty is not None:
        return [empty]
    kept = tuple(Dim(1) if i in axes else d for i, d in enumerate(x.shape))
    xr = n.ref(x)
    m = n.em.bind(f"reduce_max({xr}, axis={axes}, keepdims=true)", x.dtype, kept, "max")
    # an infinite (or NaN) maximum shifts by 0: x - inf would be NaN for -inf slices
    safe = n.em.bind(f"where({m.ref} - {m.ref} != 0.0, 0.0, {m.ref})", x.dtype, kept, "shift")
    lse = f"log(reduce_sum(exp({xr} - {safe.ref}), axis={axes}, keepdims=true)) + {safe.ref}"
    if keep:
        return [n.out(lse, x.dtype, kept)]
    shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
    return [n.out(f"reshape({lse}, [{', '.join(d.text() for d in shape)}])", x.dtype, shape)]


@op("ArgMax", "ArgMin")
def _arg(n: Node) -> list[Val]:
    x = n.x()
    axis = n.axis(int(n.attr("axis", 0)), x.rank)
    keep = bool(n.attr("keepdims", 1))
    shape = tuple(Dim(1) if i == axis else d for i, d in enumerate(x.shape)
                  if keep or i != axis)
    flags = ", keepdims=true" if keep else ""
    fn = n.op.lower()
    if n.attr("select_last_index", 0):
        # the last index of the extreme: the first one of the reversed axis, mirrored
        flipped = ", ".join("::-1" if i == axis else ":" for i in range(x.rank))
        expr = f"dim({n.ref(x)}, {axis}) - 1 - {fn}({n.ref(x)}[{flipped}], axis={axis}{flags})"
        return [n.out(expr, DType.I64, shape)]
    return [n.out(f"{fn}({n.ref(x)}, axis={axis}{flags})", DType.I64, shape)]


@op("Cast")
def _cast(n: Node) -> list[Val]:
    x, to = n.x(), int(n.attr("to"))
    dtype = ONNX_DTYPES.get(to) or (HELD[to].storage if to in HELD else None)
    if dtype is None:
        raise n.fail(f"casting to {ONNX_TYPE_NAMES.get(to, to)} is not supported "
                     "(WIA DSL has no such dtype)")
    if x.const is not None:
        return [Val(dtype, x.shape, const=x.const.astype(dtype.numpy))]
    if dtype is x.dtype:  # the same value (no longer of a held type: ``storage``)
        return [Val(dtype, x.shape, ref=n.ref(x))]
    return [n.out(f"cast({n.ref(x)}, {dtype})", dtype, x.shape)]


@op("Constant")
def _constant(n: Node) -> list[Val]:
    for key, kind in (("value", None), ("value_float", DType.F32), ("value_floats", DType.F32),
                      ("value_int", DType.I64), ("value_ints", DType.I64)):
        value = n.attr(key)
        if value is not None:
            return [const_val(np.asarray(value), kind)]
    names = [a.name for a in n.proto.attribute]
    raise n.fail(f"constant attribute {names} is not supported")
