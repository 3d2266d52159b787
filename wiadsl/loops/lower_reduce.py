"""Reductions (sum/mean/prod/max/min, argmax/argmin) and ``fused_reduce``.

A reduction is a loop nest over the kept axes around a nest over the reduced
axes that carries the accumulators as block arguments; the operand expression
is evaluated inside it, so ``reduce_sum(exp(x - m))`` reads ``x`` once.

Numerics: float sums of f16/bf16 accumulate in f32 and round once at the end
(NumPy's half sums do the same); the accumulation op carries ``reassoc`` so the
backend may vectorize it (a reordered sum, like NumPy's pairwise one).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from ..dtypes import DType
from ..ir.core import Operation, OpResult, Value
from ..ir.ops_elementwise import TRANSCENDENTAL_FNS
from ..ir.types import INDEX, ScalarType, TensorType
from .builder import LoopBuilder, contiguous_strides
from .expr import Expr, Leaf, MapExpr, broadcast_extents, broadcast_ivs, buffer_leaf
from .lower import Ctx, Lowered, lowering
from .scalar import cast, clone_body

I1 = ScalarType(DType.BOOL)


def acc_dtype(kind: str, dtype: DType) -> DType:
    return DType.F32 if kind in ("sum", "mean", "prod") and dtype in (DType.F16, DType.BF16) else dtype


def identity(lb: LoopBuilder, kind: str, dtype: DType) -> Value:
    t = ScalarType(dtype)
    if kind in ("sum", "mean"):
        return lb.const(False if dtype is DType.BOOL else 0.0 if dtype.is_float else 0, t)
    if kind == "prod":
        return lb.const(1.0 if dtype.is_float else 1, t)
    big = kind == "min"
    if dtype.is_float:
        return lb.const(math.inf if big else -math.inf, t)
    if dtype is DType.BOOL:
        return lb.const(big, t)
    bits = dtype.bits
    return lb.const((1 << (bits - 1)) - 1 if big else -(1 << (bits - 1)), t)


def combine(lb: LoopBuilder, kind: str, acc: Value, x: Value) -> Value:
    fn = {"sum": "add", "mean": "add", "prod": "mul", "max": "max", "min": "min"}[kind]
    attrs = {"reassoc": True} if fn in ("add", "mul", "max", "min") else None
    return lb.op(f"arith.{fn}", [acc, x], acc.type, attrs)


Element = Callable[[LoopBuilder, list[Value]], list[Value]]


def reduce_nest(ctx: Ctx, op: Operation, extents: Sequence[Value], axes: Sequence[int],
                keepdims: bool, kinds: Sequence[str], dtypes: Sequence[DType],
                element: Element) -> list[Expr | Value]:
    """Reduce ``element(ivs)`` (one value per kind) over ``axes`` of ``extents``."""
    lb = ctx.lb
    kept = [a for a in range(len(extents)) if a not in axes]
    out_ext = [lb.idx(1) if a in axes else e for a, e in enumerate(extents) if keepdims or a not in axes]
    count = lb.numel([extents[a] for a in axes])
    if any(k in ("max", "min") for k in kinds):
        lb.check(lb.cmp("sgt", count, lb.idx(0)), ctx.message(op, "reduction of an empty tensor"))
    accs = [acc_dtype(k, d) for k, d in zip(kinds, dtypes, strict=True)]
    bufs = [lb.alloc(d, out_ext) for d in dtypes] if out_ext else []
    out_strides = contiguous_strides(lb, [extents[a] for a in kept])
    scalars: list[Value] = []

    def outer(lb2: LoopBuilder, kept_ivs: list[Value]) -> None:
        def inner(lb3: LoopBuilder, red_ivs: list[Value], depth: int, carried: list[Value]) -> list[Value]:
            if depth == len(axes):
                ivs = [None] * len(extents)
                for a, v in zip(kept, kept_ivs, strict=True):
                    ivs[a] = v
                for a, v in zip(axes, red_ivs, strict=True):
                    ivs[a] = v
                xs = element(lb3, ivs)  # type: ignore[arg-type]
                return [combine(lb3, k, c, cast(lb3, x, d))
                        for k, c, x, d in zip(kinds, carried, xs, accs, strict=True)]
            return lb3.loop(lb3.idx(0), extents[axes[depth]],
                            lambda lb4, iv, it: inner(lb4, [*red_ivs, iv], depth + 1, it), carried)
        init = [identity(lb2, k, d) for k, d in zip(kinds, accs, strict=True)]
        results = inner(lb2, [], 0, init)
        for i, (k, r, d) in enumerate(zip(kinds, results, dtypes, strict=True)):
            if k == "mean":
                r = lb2.op("arith.div", [r, cast(lb2, lb2.op("arith.cast", [count], ScalarType(DType.I64)),
                                                  r.type.dtype)], r.type)  # type: ignore[union-attr]
            r = cast(lb2, r, d)
            if out_ext:
                lb2.store(r, bufs[i], lb2.linear(kept_ivs, out_strides))
            else:
                scalars.append(r)
    # each kept index writes its own output element(s): the outer loop is parallel
    lb.nest([extents[a] for a in kept], outer, parallel=True)
    if out_ext:
        return [buffer_leaf(lb, b, owned=True) for b in bufs]
    return scalars


def _axes(op: Operation, rank: int) -> list[int]:
    return sorted(a % rank for a in op.attributes["axes"])


@lowering("tensor.reduce_sum", "tensor.reduce_mean", "tensor.reduce_prod",
          "tensor.reduce_max", "tensor.reduce_min")
def _reduce(ctx: Ctx, op: Operation) -> list[Lowered]:
    x = ctx.operand(op.operands[0])
    kind = op.name.split("_", 1)[1]
    axes = _axes(op, x.rank)
    keep = bool(op.attributes.get("keepdims", False))
    planes = _plane_reduction(x, axes)
    if planes is not None:
        return planes(ctx, op, kind, keep)
    return reduce_nest(ctx, op, x.extents, axes, keep, [kind], [x.dtype],
                       lambda lb, ivs: [x.at(lb, ivs)])


def _plane_reduction(x: Expr, axes: list[int]) -> Callable[[Ctx, Operation, str, bool], list[Lowered]] | None:
    """A reduction over the last two axes of an operand laid out plane by plane
    (``epilogue.plane_flat``: a global average pool) as one loop over the plane's
    flat index: a row-by-row nest reduced each short row across its lanes (16
    horizontal sums for a 16x16 plane) where one vector sum over the plane does."""
    from .builder import const_value
    from .epilogue import plane_flat
    r = x.rank
    hw = [const_value(e) for e in x.extents[-2:]] if r >= 2 else []
    if axes != [r - 2, r - 1] or None in hw or not plane_flat(x, int(hw[0]), int(hw[1])):  # type: ignore[arg-type]
        return None

    def lower(ctx: Ctx, op: Operation, kind: str, keep: bool) -> list[Lowered]:
        lb = ctx.lb
        extents = [*x.extents[:-2], lb.idx(int(hw[0]) * int(hw[1]))]  # type: ignore[arg-type]
        (out,) = reduce_nest(ctx, op, extents, [r - 2], keep, [kind], [x.dtype],
                             lambda lb2, ivs: [x.at(lb2, [*ivs[:-1], lb2.idx(0), ivs[-1]])])
        if not keep or not isinstance(out, Leaf):
            return [out]
        ext = [*out.extents, lb.idx(1)]  # [..., 1] -> [..., 1, 1]: the same elements
        return [Leaf(out.buf, ext, contiguous_strides(lb, ext), out.offset, out.owned, True, False)]
    return lower


def _costly(v: Value) -> bool:
    """Whether ``v``'s elements come from a transcendental function (``TRANSCENDENTAL_FNS``),
    whose second evaluation per element costs more than a store and a load: its producer
    is one, or has one in the body that computes ``v`` (a fused reduction's epilogue,
    the body of any other fused op). Softmax's exp(x - m), read by its sum and again by
    its division, took 8.3 ms at 4096 x 1024 on one AMD Zen 3 thread evaluated twice,
    7.1-7.6 computed once."""
    if not isinstance(v, OpResult):
        return False
    op = v.op
    regions = op.regions[1:] if op.name == "tensor.fused_reduce" else op.regions
    names = [op.name] + [inner.name for r in regions for blk in r.blocks for inner in blk.ops]
    return any(name.split(".", 1)[-1] in TRANSCENDENTAL_FNS for name in names)


@lowering("tensor.fused_reduce")
def _fused_reduce(ctx: Ctx, op: Operation) -> list[Lowered]:
    # an operand the epilogue reads again, computed by a transcendental function, is
    # computed once, into a buffer (row by row, in L1 when fuse-parallel merges the loops)
    again = op.regions[1].blocks[0].args if len(op.regions) == 2 else []
    operands = [ctx.buffer(v) if j < len(again) and again[j].has_uses and _costly(v)
                and isinstance(ctx.operand(v), MapExpr) else ctx.operand(v)
                for j, v in enumerate(op.operands)]
    lb = ctx.lb
    extents = broadcast_extents(lb, [o.extents for o in operands], ctx.message(op, "shape"))
    kinds = op.kinds()  # type: ignore[attr-defined]
    axes = sorted(a % len(extents) for a in op.attributes["axes"])
    keep = bool(op.attributes.get("keepdims", False))
    body = op.regions[0].blocks[0]
    yielded = [t.dtype for t in body.ops[-1].operand_types]  # type: ignore[union-attr]

    def element(lb2: LoopBuilder, ivs: list[Value]) -> list[Value]:
        args = [o.at(lb2, broadcast_ivs(lb2, o.extents, ivs, extents)) for o in operands]
        return clone_body(lb2, body, args)
    reduced = reduce_nest(ctx, op, extents, axes, True, kinds, yielded, element)
    results: list[Lowered] = []
    for r in reduced:
        assert not isinstance(r, Value)
        results.append(r if keep else _drop_axes(ctx, r, axes))
    if len(op.regions) == 2:
        epi = op.regions[1].blocks[0]
        n_out = len(op.results) - len(kinds)
        for j in range(n_out):
            fn = (lambda jj: lambda lb2, args: clone_body(lb2, epi, args)[jj])(j)
            results.append(MapExpr(fn, [*operands, *reduced], extents,  # type: ignore[list-item]
                                   op.results[len(kinds) + j].type.dtype))  # type: ignore[union-attr]
    return results


def _drop_axes(ctx: Ctx, leaf: Expr, axes: Sequence[int]) -> Lowered:
    """A keepdims result viewed without its reduced axes (a scalar when none remain)."""
    from .expr import Leaf
    assert isinstance(leaf, Leaf)
    keep = [a for a in range(leaf.rank) if a not in axes]
    if not keep:
        return ctx.lb.load(leaf.buf, ctx.lb.idx(0))
    return Leaf(leaf.buf, [leaf.extents[a] for a in keep], [leaf.strides[a] for a in keep],
                leaf.offset, False, True)


@lowering("tensor.argmax", "tensor.argmin")
def _argreduce(ctx: Ctx, op: Operation) -> list[Lowered]:
    x = ctx.operand(op.operands[0])
    lb = ctx.lb
    axes = _axes(op, x.rank)
    keep = bool(op.attributes.get("keepdims", False))
    better = "ogt" if op.name == "tensor.argmax" else "olt"
    extents = x.extents
    kept = [a for a in range(x.rank) if a not in axes]
    count = lb.numel([extents[a] for a in axes])
    lb.check(lb.cmp("sgt", count, lb.idx(0)), ctx.message(op, "of an empty tensor"))
    out_ext = [lb.idx(1) if a in axes else e for a, e in enumerate(extents) if keep or a not in axes]
    i64 = ScalarType(DType.I64)
    buf = lb.alloc(DType.I64, out_ext) if out_ext else None
    red_strides = contiguous_strides(lb, [extents[a] for a in axes])
    out_strides = contiguous_strides(lb, [extents[a] for a in kept])
    found: list[Value] = []

    def outer(lb2: LoopBuilder, kept_ivs: list[Value]) -> None:
        def at(lb3: LoopBuilder, flat: Value) -> Value:
            ivs = [None] * x.rank
            rest = flat
            for a, s in zip(axes, red_strides, strict=True):
                ivs[a] = lb3.floordiv(rest, s)
                rest = lb3.mod(rest, s)
            for a, v in zip(kept, kept_ivs, strict=True):
                ivs[a] = v
            return x.at(lb3, ivs)  # type: ignore[arg-type]

        def step(lb3: LoopBuilder, i: Value, it: list[Value]) -> list[Value]:
            best, where = it
            v = at(lb3, i)
            take = _is_better(lb3, better, v, best, x.dtype)
            return [lb3.select(take, v, best), lb3.select(take, i, where)]
        _, where = lb2.loop(lb2.idx(1), count, step, [at(lb2, lb2.idx(0)), lb2.idx(0)])
        r = lb2.op("arith.cast", [where], i64)
        if buf is None:
            found.append(r)
        else:
            lb2.store(r, buf, lb2.linear(kept_ivs, out_strides))
    lb.nest([extents[a] for a in kept], outer, parallel=True)
    return [buffer_leaf(lb, buf, owned=True)] if buf is not None else found


def _is_better(lb: LoopBuilder, pred: str, v: Value, best: Value, dtype: DType) -> Value:
    """NumPy's argmax/argmin order: the first NaN wins, else the first extreme."""
    if not dtype.is_float:
        ipred = {"ogt": "sgt", "olt": "slt"}[pred]
        if dtype is DType.BOOL:
            v, best = (lb.op("arith.cast", [a], ScalarType(DType.I8)) for a in (v, best))
        return lb.b.value("arith.cmpi", [v, best], I1, {"predicate": ipred})
    strictly = lb.b.value("arith.cmpf", [v, best], I1, {"predicate": pred})
    v_nan = lb.b.value("arith.cmpf", [v, v], I1, {"predicate": "une"})
    best_ok = lb.b.value("arith.cmpf", [best, best], I1, {"predicate": "oeq"})
    return lb.or_(strictly, lb.and_(v_nan, best_ok))


__all__ = ["INDEX", "TensorType", "reduce_nest"]
