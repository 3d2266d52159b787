"""Indexing and shape ops: extract/insert, slices, reshape, concat.

Slices and reshapes of a buffer are views (``Leaf`` with strides/offset), free
until a consumer needs a buffer. Integer indices wrap when negative and are
checked against the extent at run time; slice bounds follow Python's
``slice.indices`` (clamped; a step of 0 is a runtime error).
"""

from __future__ import annotations

from ..dtypes import DType
from ..ir.core import Operation, OpResult, Value
from ..ir.ops import AxisSpec
from ..ir.types import TensorType
from .builder import LoopBuilder, const_value, contiguous_strides
from .expr import Expr, Leaf, MapExpr, ScalarExpr, broadcast_ivs, buffer_leaf
from .lower import Ctx, Lowered, lowering
from .lower_elementwise import index_value
from .scalar import cast, copy_leaf, fill


def wrap_index(ctx: Ctx, op: Operation, i: Value, n: Value, axis: int) -> Value:
    lb = ctx.lb
    j = lb.select(lb.cmp("slt", i, lb.idx(0)), lb.add(i, n), i)
    ok = lb.and_(lb.cmp("sge", j, lb.idx(0)), lb.cmp("slt", j, n))
    lb.check(ok, ctx.message(op, f"index is out of range for axis {axis}"))
    return j


def _bound(lb: LoopBuilder, s: Value, n: Value, lower: Value, upper: Value) -> Value:
    neg = lb.cmp("slt", s, lb.idx(0))
    return lb.select(neg, lb.max(lb.add(s, n), lower), lb.min(s, upper))


def slice_axis(ctx: Ctx, op: Operation, spec: AxisSpec, parts: list[Value], n: Value,
               axis: int) -> tuple[Value, Value, Value]:
    """(start, length, step) of Python's ``slice(start, stop, step)`` over ``n``."""
    lb = ctx.lb
    it = iter(parts)
    start = next(it) if spec.start else None
    stop = next(it) if spec.stop else None
    step = next(it) if spec.step else lb.idx(1)
    lb.check(lb.cmp("ne", step, lb.idx(0)), ctx.message(op, f"slice step is zero on axis {axis}"))
    neg = lb.cmp("slt", step, lb.idx(0))
    lower = lb.select(neg, lb.idx(-1), lb.idx(0))
    upper = lb.select(neg, lb.sub(n, lb.idx(1)), n)
    s = _bound(lb, start, n, lower, upper) if start is not None else lb.select(neg, upper, lower)
    e = _bound(lb, stop, n, lower, upper) if stop is not None else lb.select(neg, lower, upper)
    up = lb.select(lb.cmp("sgt", e, s), lb.add(lb.floordiv(lb.sub(lb.sub(e, s), lb.idx(1)), step), lb.idx(1)),
                   lb.idx(0))
    down = lb.select(lb.cmp("sgt", s, e),
                     lb.add(lb.floordiv(lb.sub(lb.sub(s, e), lb.idx(1)), lb.sub(lb.idx(0), step)), lb.idx(1)),
                     lb.idx(0))
    return s, lb.select(neg, down, up), step


def slice_view(ctx: Ctx, op: Operation, leaf: Leaf, parts: list[Value]) -> Leaf:
    """The view ``leaf[layout]`` (integer axes dropped)."""
    lb = ctx.lb
    specs = op.layout()  # type: ignore[attr-defined]
    offset, extents, strides = leaf.offset, [], []
    pos = 0
    for axis in range(leaf.rank):
        n, stride = leaf.extents[axis], leaf.strides[axis]
        spec = specs[axis] if axis < len(specs) else AxisSpec(False)
        mine = parts[pos:pos + spec.num_operands]
        pos += spec.num_operands
        if spec.is_index:
            offset = lb.add(offset, lb.mul(wrap_index(ctx, op, mine[0], n, axis), stride))
            continue
        if spec == AxisSpec(False):
            extents.append(n)
            strides.append(stride)
            continue
        s, length, step = slice_axis(ctx, op, spec, mine, n, axis)
        offset = lb.add(offset, lb.mul(s, stride))
        extents.append(length)
        strides.append(lb.mul(stride, step))
    flat = leaf.flat and _contiguous(specs, leaf.rank)
    return Leaf(leaf.buf, extents, strides, offset, False, flat)


def _contiguous(specs: list[AxisSpec], rank: int) -> bool:
    """Whether ``x[specs]`` of a contiguous ``x`` is contiguous: leading integer
    indices, then at most one unit-step slice, then whole axes."""
    full = AxisSpec(False)
    padded = specs + [full] * (rank - len(specs))
    k = 0
    while k < rank and padded[k].is_index:
        k += 1
    if k == rank:
        return True
    return not padded[k].step and all(s == full for s in padded[k + 1:])


def _as_leaf(ctx: Ctx, v: Value) -> Leaf:
    x = ctx.operand(v)
    return x if isinstance(x, Leaf) else ctx.buffer(v)


@lowering("tensor.extract")
def _extract(ctx: Ctx, op: Operation) -> list[Lowered]:
    x = ctx.operand(op.operands[0])
    ivs = [wrap_index(ctx, op, index_value(ctx, v), n, k)
           for k, (v, n) in enumerate(zip(op.operands[1:], x.extents, strict=True))]
    return [x.at(ctx.lb, ivs)]


@lowering("tensor.extract_slice")
def _extract_slice(ctx: Ctx, op: Operation) -> list[Lowered]:
    leaf = _as_leaf(ctx, op.operands[0])
    view = slice_view(ctx, op, leaf, [index_value(ctx, v) for v in op.operands[1:]])
    if not view.extents:
        return [ctx.lb.load(view.buf, view.offset)]
    return [view]


def destination(ctx: Ctx, op: Operation) -> Leaf:
    """The destination buffer, updated in place when that is safe, else a copy."""
    dest = op.operands[1]
    leaf = ctx.operand(dest)
    if isinstance(leaf, Leaf) and leaf.owned and leaf.whole and ctx.live.dead_after(op, dest):
        return leaf
    return copy_leaf(ctx.lb, leaf)


def _reads(expr: Expr, buf: Value) -> bool:
    if isinstance(expr, Leaf):
        return expr.buf is buf
    if isinstance(expr, MapExpr):
        return any(_reads(o, buf) for o in expr.operands)
    return False


@lowering("tensor.insert")
def _insert(ctx: Ctx, op: Operation) -> list[Lowered]:
    value = ctx.scalar(op.operands[0])
    dest = destination(ctx, op)
    lb = ctx.lb
    ivs = [wrap_index(ctx, op, index_value(ctx, v), n, k)
           for k, (v, n) in enumerate(zip(op.operands[2:], dest.extents, strict=True))]
    lb.store(cast(lb, value, dest.dtype), dest.buf, lb.linear(ivs, dest.strides))
    return [dest]


def filled_around(ctx: Ctx, op: Operation, parts: list[Value]) -> Leaf | None:
    """The destination of ``insert_slice`` into a ``full(v)`` that nothing else reads
    (a zero-padded copy: ``padded = full(...); padded[1:33, 1:33] = x``) as a buffer
    holding ``v`` around the slice only: the slice is about to overwrite the rest, so
    filling it first wrote the whole buffer twice. Unit-step slices (no integer
    indices); None for anything else."""
    fill = op.operands[1]
    if not isinstance(fill, OpResult) or fill.op.name != "tensor.full":
        return None
    expr = ctx.operand(fill)
    if isinstance(expr, Leaf):  # materialized: something else reads it
        return None
    rank = len(expr.extents)
    specs = op.layout()  # type: ignore[attr-defined]
    specs = specs + [AxisSpec(False)] * (rank - len(specs))
    if any(spec.is_index or spec.step for spec in specs):
        return None
    lb = ctx.lb
    extents = list(expr.extents)
    value = cast(lb, ctx.scalar(fill.op.operands[0]), expr.dtype)
    buf = lb.alloc(expr.dtype, extents)
    dest = buffer_leaf(lb, buf, True)
    starts, lengths, pos = [], [], 0
    for axis, spec in enumerate(specs):
        mine = parts[pos:pos + spec.num_operands]
        pos += spec.num_operands
        if spec == AxisSpec(False):
            starts.append(lb.idx(0))
            lengths.append(extents[axis])
            continue
        start, length, _ = slice_axis(ctx, op, spec, mine, extents[axis], axis)
        starts.append(start)
        lengths.append(length)
    for k in range(rank):  # the bands before and after the slice along axis k
        end = lb.add(starts[k], lengths[k])
        for lo, count in ((lb.idx(0), starts[k]), (end, lb.sub(extents[k], end))):
            if const_value(count) == 0:
                continue
            box_lo = [*starts[:k], lo, *[lb.idx(0)] * (rank - k - 1)]

            def band(lb2: LoopBuilder, ivs: list[Value], box_lo: list[Value] = box_lo) -> None:
                at = [lb2.add(i, o) for i, o in zip(ivs, box_lo, strict=True)]
                lb2.store(value, buf, lb2.linear(at, dest.strides))
            lb.nest([*lengths[:k], count, *extents[k + 1:]], band, parallel=True)  # disjoint
    return dest


@lowering("tensor.insert_slice")
def _insert_slice(ctx: Ctx, op: Operation) -> list[Lowered]:
    lb = ctx.lb
    src = ctx.operand(op.operands[0])
    parts = [index_value(ctx, v) for v in op.operands[2:]]
    dest = filled_around(ctx, op, parts) or destination(ctx, op)
    view = slice_view(ctx, op, dest, parts)
    if _reads(src, dest.buf):
        src = copy_leaf(lb, src)  # the source overlaps what we are about to overwrite
    if src.rank > view.rank:
        lb.check(lb.const(False, _i1()), ctx.message(op, "source has a higher rank than the slice"))
    for k, e in enumerate(src.extents[max(0, src.rank - view.rank):]):
        target = view.extents[view.rank - min(src.rank, view.rank) + k]
        ok = lb.or_(lb.cmp("eq", e, target), lb.cmp("eq", e, lb.idx(1)))
        lb.check(ok, ctx.message(op, "cannot assign the source to a slice of a different shape"))
    dtype = dest.dtype

    def body(lb2: LoopBuilder, ivs: list[Value]) -> None:
        v = src.at(lb2, broadcast_ivs(lb2, src.extents, ivs))
        lb2.store(cast(lb2, v, dtype), view.buf, lb2.add(view.offset, lb2.linear(ivs, view.strides)))
    # each iteration writes its own element of the slice and reads the source, which
    # does not overlap it (copied above if it did): the copy may split over threads
    # (a max pool's padded input, 64 x 112 x 112 in ResNet-18, was a serial loop)
    lb.nest(view.extents, body, parallel=True)
    return [dest]


def _i1():  # type: ignore[no-untyped-def]
    from ..ir.types import ScalarType
    return ScalarType(DType.BOOL)


@lowering("tensor.reshape")
def _reshape(ctx: Ctx, op: Operation) -> list[Lowered]:
    lb = ctx.lb
    x = ctx.operand(op.operands[0])
    t = op.result.type
    assert isinstance(t, TensorType)
    it = iter(ctx.scalar(v) for v in op.operands[1:])
    extents = [lb.idx(d) if d is not None else next(it) for d in t.shape]
    for e in extents:
        lb.check(lb.cmp("sge", e, lb.idx(0)), ctx.message(op, "negative extent"))
    lb.check(lb.cmp("eq", lb.numel(extents), lb.numel(x.extents)),
             ctx.message(op, "element counts differ"))
    if isinstance(x, ScalarExpr):  # a scalar has no buffer: it broadcasts to the one element
        return [MapExpr(lambda lb2, a: a[0], [x], extents, t.dtype)]
    leaf = x if isinstance(x, Leaf) and x.flat else ctx.buffer(op.operands[0])
    return [Leaf(leaf.buf, extents, contiguous_strides(lb, extents), leaf.offset, False, True)]


@lowering("tensor.concat")
def _concat(ctx: Ctx, op: Operation) -> list[Lowered]:
    lb = ctx.lb
    parts = [ctx.operand(v) for v in op.operands]
    axis = op.attributes["axis"] % parts[0].rank
    extents = list(parts[0].extents)
    total = lb.idx(0)
    for p in parts:
        total = lb.add(total, p.extents[axis])
        for k in range(len(extents)):
            if k != axis:
                lb.check(lb.cmp("eq", p.extents[k], extents[k]),
                         ctx.message(op, f"extents of axis {k} differ"))
    extents[axis] = total
    out = lb.alloc(parts[0].dtype, extents)
    strides = contiguous_strides(lb, extents)
    start = lb.idx(0)
    for p in parts:
        view = Leaf(out, p.extents, strides, lb.mul(start, strides[axis]), False, False)
        fill_view(lb, p, view)
        start = lb.add(start, p.extents[axis])
    return [buffer_leaf(lb, out, owned=True)]


def fill_view(lb: LoopBuilder, src: Expr, view: Leaf) -> None:
    def body(lb2: LoopBuilder, ivs: list[Value]) -> None:
        lb2.store(src.at(lb2, ivs), view.buf, lb2.add(view.offset, lb2.linear(ivs, view.strides)))
    lb.nest(view.extents, body)


__all__ = ["fill"]
