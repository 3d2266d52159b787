"""Pure typing rules of the shape-changing builtins: ``@``, reductions, layout, conv/pool,
construction, quantization and indexing.

Same contract as ``typerules``: operand types and static attributes in, a
``ValueType`` (or ``UNKNOWN``) out, ``RuleError``/``ShapeRuleError`` without a
span on failure, call-time dim relations appended to ``cons``. Attributes
(axes, permutations, dims, strides) are already-evaluated compile-time values.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..dtypes import DType, promote
from ..records import record
from .typerules import (
    UNKNOWN,
    Constraints,
    Dim,
    RuleError,
    Shape,
    ShapeRuleError,
    Type,
    ValueType,
    binary_dtype,
    broadcast_dim,
    broadcast_types,
    is_known,
    mismatch,
    unify_dim,
)

# ------------------------------------------------------------------ matmul


def matmul(a: Type, b: Type, labels: Sequence[object] = ("a", "b"),
           cons: Constraints = None, op: str = "'@'") -> Type:
    """NumPy matmul: 1-D operands are promoted to a matrix and the axis dropped again;
    batch axes broadcast; the inner extents must agree."""
    if not isinstance(a, ValueType) or not isinstance(b, ValueType):
        return UNKNOWN
    for lab, t in zip(labels, (a, b), strict=False):
        if t.is_scalar:
            raise ShapeRuleError(f"{op} needs operands of rank >= 1, but {lab} is the scalar {t}")
    dtype, weak = binary_dtype("@", a, b)
    reason = mismatch(op, labels, (a, b))
    inner_a = a.shape[-1]
    inner_b = b.shape[0] if b.rank == 1 else b.shape[-2]
    unify_dim(inner_a, inner_b, reason, cons)
    rows: Shape = a.shape[-2:-1]
    cols: Shape = b.shape[-1:] if b.rank >= 2 else ()
    batch_a = ValueType(a.dtype, a.shape[:-2])
    batch_b = ValueType(b.dtype, b.shape[:-2])
    batch = broadcast_types(op, (batch_a, batch_b), labels, cons) if a.rank > 2 or b.rank > 2 else ()
    return ValueType(dtype, batch + rows + cols, weak)


# ------------------------------------------------------------------ reductions

REDUCTIONS = ("reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod",
              "argmax", "argmin")


def normalize_axis(axis: int, x: ValueType, op: str) -> int:
    if not -x.rank <= axis < x.rank:
        raise ShapeRuleError(f"axis {axis} is out of range for {x} (rank {x.rank}) in '{op}'")
    return axis % x.rank


def normalize_axes(axis: int | Sequence[int] | None, x: ValueType, op: str) -> tuple[int, ...]:
    """The sorted, non-negative axes; ``None`` means all of them."""
    if axis is None:
        return tuple(range(x.rank))
    items = [axis] if isinstance(axis, int) else list(axis)
    axes = [normalize_axis(a, x, op) for a in items]
    if len(set(axes)) != len(axes):
        raise ShapeRuleError(f"repeated axis in '{op}': {list(items)}")
    return tuple(sorted(axes))


def _reduce_dtype(op: str, x: ValueType) -> DType:
    if op in ("argmax", "argmin"):
        return DType.I64
    if op in ("reduce_sum", "reduce_prod") and not x.dtype.is_float:
        return DType.I64  # NumPy sums bools and small ints in the platform long
    if op == "reduce_mean" and not x.dtype.is_float:
        return DType.F64
    return x.dtype


def reduce(op: str, x: Type, axis: int | Sequence[int] | None = None,
           keepdims: bool = False) -> Type:
    """``reduce_*``/``argmax``/``argmin`` over ``axis`` (int, list, or None for all)."""
    if not isinstance(x, ValueType):
        return UNKNOWN
    if op not in REDUCTIONS:
        raise RuleError(f"unknown reduction '{op}'")
    if op in ("argmax", "argmin") and axis is not None and not isinstance(axis, int):
        raise RuleError(f"'{op}' takes a single axis, not a list")
    if x.is_scalar and axis is not None:
        raise ShapeRuleError(f"'{op}' of the scalar {x} has no axis {axis}")
    axes = normalize_axes(axis, x, op)
    if keepdims:
        shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
    else:
        shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
    return ValueType(_reduce_dtype(op, x), shape, x.weak)


# ------------------------------------------------------------------ layout


def transpose(x: Type, perm: Sequence[int] | None = None) -> Type:
    """``transpose(x)`` reverses the axes; ``transpose(x, perm)`` permutes them."""
    if not isinstance(x, ValueType):
        return UNKNOWN
    if perm is None:
        return x.with_shape(tuple(reversed(x.shape)))
    if sorted(a % x.rank if x.rank else a for a in perm) != list(range(x.rank)) or \
            any(not -x.rank <= a < x.rank for a in perm):
        raise ShapeRuleError(f"{list(perm)} is not a permutation of the axes of {x}")
    return x.with_shape(tuple(x.shape[a] for a in perm))


def _product(dims: Sequence[Dim]) -> tuple[int, tuple[str, ...]] | None:
    """(integer factor, sorted symbolic factors), or None when a dim is unknown."""
    n, syms = 1, []
    for d in dims:
        if d is None:
            return None
        if isinstance(d, int):
            n *= d
        else:
            syms.append(d)
    return n, tuple(sorted(syms))


def reshape(x: Type, dims: Sequence[Dim]) -> Type:
    """``reshape(x, [d...])``; one ``-1`` is inferred; element counts must agree when known."""
    if not isinstance(x, ValueType):
        return UNKNOWN
    dims = list(dims)
    if sum(1 for d in dims if d == -1) > 1:
        raise ShapeRuleError("reshape can infer at most one dim (-1)")
    if any(isinstance(d, int) and d < -1 for d in dims):
        raise ShapeRuleError(f"reshape to {dims}: dims must be >= 0")
    old, new = _product(x.shape), _product([d for d in dims if d != -1])
    target = f"[{', '.join('?' if d is None else str(d) for d in dims)}]"
    if -1 in dims:
        dims[dims.index(-1)] = _infer_dim(old, new, x, target)
    elif old is not None and new is not None and old[1] == new[1] and old[0] != new[0]:
        raise ShapeRuleError(f"cannot reshape {x} ({_count(old)} elements) to {target} "
                             f"({_count(new)} elements)")
    return x.with_shape(tuple(dims))


def _count(p: tuple[int, tuple[str, ...]]) -> str:
    return " * ".join([str(p[0])] * (p[0] != 1 or not p[1]) + list(p[1]))


def _infer_dim(old: tuple[int, tuple[str, ...]] | None, new: tuple[int, tuple[str, ...]] | None,
               x: ValueType, target: str) -> Dim:
    if old is None or new is None:
        return None
    rest = list(old[1])
    for s in new[1]:
        if s not in rest:
            return None
        rest.remove(s)
    if new[0] == 0 or old[0] % new[0]:
        raise ShapeRuleError(f"cannot reshape {x} to {target}: {_count(old)} elements "
                             f"do not divide evenly")
    n = old[0] // new[0]
    if not rest:
        return n
    return rest[0] if n == 1 and len(rest) == 1 else None


def flatten(x: Type) -> Type:
    """``flatten(x)``: ``[d0, d1 * d2 * ...]`` (axis 0 kept; a 1-D x gives ``[d0, 1]``)."""
    if not isinstance(x, ValueType):
        return UNKNOWN
    if x.is_scalar:
        raise ShapeRuleError(f"flatten needs a tensor of rank >= 1, got the scalar {x}")
    p = _product(x.shape[1:])
    rest: Dim = None
    if p is not None:
        rest = p[0] if not p[1] else (p[1][0] if p[0] == 1 and len(p[1]) == 1 else None)
    return x.with_shape((x.shape[0], rest))


def broadcast_to(x: Type, dims: Sequence[Dim], cons: Constraints = None) -> Type:
    """``broadcast_to(x, shape)``: each axis of x (right-aligned) is 1 or the target's."""
    if not isinstance(x, ValueType):
        return UNKNOWN
    target = tuple(dims)
    reason = f"cannot broadcast {x} to [{', '.join('?' if d is None else str(d) for d in target)}]"
    if x.rank > len(target):
        raise ShapeRuleError(reason)
    for d, t in zip(x.shape, target[len(target) - x.rank:], strict=False):
        if d != 1:
            unify_dim(d, t, reason, cons)
    return x.with_shape(target)


def concat(xs: Sequence[Type], axis: int, labels: Sequence[object],
           cons: Constraints = None) -> Type:
    """``concat([a, b, ...], axis)``: same rank, equal dims off ``axis``, extents add up."""
    if not xs:
        raise RuleError("concat needs at least one tensor")
    if not is_known(*xs):
        return UNKNOWN
    ts = [t for t in xs if isinstance(t, ValueType)]
    first = ts[0]
    if first.is_scalar:
        raise ShapeRuleError(f"concat needs tensors of rank >= 1, but {labels[0]} is {first}")
    ax = _concat_axis(axis, first)
    dtype, weak = first.dtype, first.weak
    shape = list(first.shape)
    for lab, t in zip(labels[1:], ts[1:], strict=False):
        reason = mismatch("'concat'", (labels[0], lab), (first, t))
        if t.rank != first.rank:
            raise ShapeRuleError(reason + " (different ranks)")
        dtype, weak = promote(dtype, weak, t.dtype, t.weak)
        for i, d in enumerate(t.shape):
            if i != ax:
                shape[i] = unify_dim(shape[i], d, reason, cons)
        a, b = shape[ax], t.shape[ax]
        shape[ax] = a + b if isinstance(a, int) and isinstance(b, int) else None
    return ValueType(dtype, tuple(shape), weak)


def _concat_axis(axis: int, t: ValueType) -> int:
    if not -t.rank <= axis < t.rank:
        raise ShapeRuleError(f"axis {axis} is out of range for {t} (rank {t.rank}) in 'concat'")
    return axis % t.rank


# ------------------------------------------------------------------ neural


def _spatial(op: str, n: Dim, k: Dim, stride: int, padding: int, what: str) -> Dim:
    """One output extent ``(n + 2p - k) // s + 1``; unknown when an input is symbolic."""
    if not isinstance(n, int) or not isinstance(k, int):
        return None
    out = (n + 2 * padding - k) // stride + 1
    if out <= 0:
        raise ShapeRuleError(f"'{op}' output would be empty: input {what} {n} with padding "
                             f"{padding} is smaller than the kernel {what} {k}")
    return out


def _check_window(op: str, stride: int, padding: int) -> None:
    if stride < 1:
        raise ShapeRuleError(f"'{op}' stride must be >= 1, got {stride}")
    if padding < 0:
        raise ShapeRuleError(f"'{op}' padding must be >= 0, got {padding}")


def conv2d(x: Type, w: Type, stride: int = 1, padding: int = 0,
           labels: Sequence[object] = ("x", "w"), cons: Constraints = None) -> Type:
    """NCHW input ``x``, OIHW weight ``w`` -> ``[N, O, H', W']``."""
    if not isinstance(x, ValueType) or not isinstance(w, ValueType):
        return UNKNOWN
    _check_window("conv2d", stride, padding)
    for lab, t, layout in zip(labels, (x, w), ("NCHW", "OIHW"), strict=False):
        if t.rank != 4:
            raise ShapeRuleError(f"'conv2d' needs a rank-4 {layout} {lab}, got {t}")
    dtype, weak = binary_dtype("*", x, w)
    unify_dim(x.shape[1], w.shape[1], mismatch("'conv2d'", labels, (x, w)) +
              " (input channels differ)", cons)
    h = _spatial("conv2d", x.shape[2], w.shape[2], stride, padding, "height")
    wd = _spatial("conv2d", x.shape[3], w.shape[3], stride, padding, "width")
    return ValueType(dtype, (x.shape[0], w.shape[0], h, wd), weak)


def pool(op: str, x: Type, kernel: int = 2, stride: int | None = None) -> Type:
    """``max_pool``/``avg_pool`` over the last two axes of an NCHW ``x``; stride defaults to kernel."""
    if not isinstance(x, ValueType):
        return UNKNOWN
    stride = kernel if stride is None else stride
    if kernel < 1:
        raise ShapeRuleError(f"'{op}' kernel must be >= 1, got {kernel}")
    _check_window(op, stride, 0)
    if x.rank != 4:
        raise ShapeRuleError(f"'{op}' needs a rank-4 NCHW tensor, got {x}")
    h = _spatial(op, x.shape[2], kernel, stride, 0, "height")
    w = _spatial(op, x.shape[3], kernel, stride, 0, "width")
    dtype = x.dtype
    if op == "avg_pool" and not dtype.is_float:
        dtype = DType.F64
    return ValueType(dtype, (x.shape[0], x.shape[1], h, w), x.weak)


# ------------------------------------------------------------------ construction


def _check_dims(dims: Sequence[Dim], op: str) -> Shape:
    for d in dims:
        if isinstance(d, int) and d < 0:
            raise ShapeRuleError(f"'{op}' dims must be >= 0, got {d}")
    return tuple(dims)


def filled(op: str, dims: Sequence[Dim], dtype: DType) -> ValueType:
    """``zeros``/``ones`` (and ``full`` once its dtype is known)."""
    return ValueType(dtype, _check_dims(dims, op))


def full(dims: Sequence[Dim], value: Type, dtype: DType | None) -> Type:
    """``full(shape, v, dtype)``; without a dtype the result has v's (weak default) dtype."""
    if not isinstance(value, ValueType):
        return UNKNOWN if dtype is None else filled("full", dims, dtype)
    if not value.is_scalar:
        raise ShapeRuleError(f"the fill value of 'full' must be a scalar, got {value}")
    return filled("full", dims, value.dtype if dtype is None else dtype)


def extent(x: Type, axis: int) -> Type:
    """``dim(x, axis)``: a weak ``i64`` scalar, as a dim name is (LANGUAGE.md §3)."""
    if isinstance(x, ValueType):
        if x.is_scalar:
            raise ShapeRuleError(f"'dim' needs a tensor of rank >= 1, got the scalar {x}")
        normalize_axis(axis, x, "dim")
    return ValueType(DType.I64, (), True)


def extent_value(x: Type, axis: int) -> Dim:
    """The compile-time extent ``dim(x, axis)`` reads: an int, a dim name, or None."""
    if not isinstance(x, ValueType) or x.is_scalar or not -x.rank <= axis < x.rank:
        return None
    return x.shape[axis]


def arange(n: Type, extent: Dim) -> Type:
    """``arange(n)``: ``i64[n]`` (``f64`` for a float n); ``extent`` is n when static."""
    if not isinstance(n, ValueType):
        return UNKNOWN
    if not n.is_scalar or n.dtype is DType.BOOL:
        raise RuleError(f"'arange' needs a scalar number, got {n}")
    if n.dtype.is_float:
        size = math.ceil(extent) if isinstance(extent, (int, float)) else None
        return ValueType(DType.F64, (max(size, 0) if size is not None else None,))
    return ValueType(DType.I64, (max(extent, 0) if isinstance(extent, int) else extent,))


# ------------------------------------------------------------------ quantization


def quantize(op: str, x: Type, scale: Type, zero_point: Type,
             labels: Sequence[object] = ("x", "scale", "zero_point"),
             cons: Constraints = None) -> Type:
    """``quantize`` -> i8, ``dequantize`` -> f32, ``fake_quant`` -> x's dtype."""
    if not is_known(x, scale, zero_point):
        return UNKNOWN
    assert isinstance(x, ValueType) and isinstance(scale, ValueType)
    assert isinstance(zero_point, ValueType)
    if op in ("quantize", "fake_quant") and not x.dtype.is_float:
        raise RuleError(f"'{op}' needs a float tensor, got {x}")
    if op == "dequantize" and not x.dtype.is_int:
        raise RuleError(f"'dequantize' needs an integer tensor, got {x}")
    shape = broadcast_types(f"'{op}'", (x, scale, zero_point), labels, cons)
    dtype = {"quantize": DType.I8, "dequantize": DType.F32}.get(op, x.dtype)
    return ValueType(dtype, shape)


# ------------------------------------------------------------------ indexing


@record(frozen=True)
class IndexAt:
    """A scalar index; ``value`` when it is a compile-time constant."""

    value: int | None


@record(frozen=True)
class SliceOf:
    """``start:stop:step``; a bound is None when omitted or not a compile-time constant
    (``dynamic`` says whether any given bound was not constant)."""

    start: int | None = None
    stop: int | None = None
    step: int | None = None
    dynamic: bool = False


def index(x: Type, items: Sequence[IndexAt | SliceOf]) -> Type:
    """``x[items]``: a scalar index drops its axis, a slice keeps it (extent from static bounds)."""
    if not isinstance(x, ValueType):
        return UNKNOWN
    if len(items) > x.rank:
        raise ShapeRuleError(f"too many indices for {x}: {len(items)} given for rank {x.rank}")
    shape: list[Dim] = []
    for axis, (item, dim) in enumerate(zip(items, x.shape, strict=False)):
        if isinstance(item, IndexAt):
            _check_index(item.value, dim, axis, x)
        else:
            shape.append(_slice_extent(item, dim))
    return x.with_shape(tuple(shape) + x.shape[len(items):])


def _check_index(i: int | None, dim: Dim, axis: int, x: ValueType) -> None:
    if i is not None and isinstance(dim, int) and not -dim <= i < dim:
        raise ShapeRuleError(f"index {i} is out of range for axis {axis} of {x} (extent {dim})")


def _slice_extent(s: SliceOf, dim: Dim) -> Dim:
    if s.step == 0:
        raise ShapeRuleError("slice step cannot be zero")
    whole = s.start in (None, 0) and s.stop is None and s.step in (None, 1)
    if whole and not s.dynamic:
        return dim
    if s.dynamic or not isinstance(dim, int):
        return None
    return len(range(*slice(s.start, s.stop, s.step).indices(dim)))


def slice_update(target: Type, items: Sequence[IndexAt | SliceOf], value: Type,
                 labels: Sequence[object] = ("target", "value"), cons: Constraints = None) -> Type:
    """``target[items] = value``: value broadcasts to the region; the result is target's type
    (the value is cast to target's dtype, as NumPy's setitem does)."""
    if not isinstance(target, ValueType):
        return UNKNOWN
    region = index(target, items)
    if isinstance(value, ValueType) and isinstance(region, ValueType):
        reason = (f"cannot assign {value} to {labels[0]}[...] of shape "
                  f"[{', '.join('?' if d is None else str(d) for d in region.shape)}]")
        if value.rank > region.rank:
            raise ShapeRuleError(reason)
        for d, r in zip(value.shape, region.shape[region.rank - value.rank:], strict=False):
            broadcast_dim(d, r, reason, cons) if d == 1 else unify_dim(d, r, reason, cons)
    return target.strong()

