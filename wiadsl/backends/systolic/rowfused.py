"""``tensor.fused_reduce`` (what the fuse pass makes of softmax and layer_norm) as a
row group: its body #0 becomes the prologue, its optional epilogue body #1 the
epilogue (reading the reduced values where the reduction leaves them).

Only what one row section can write is taken: one reduction kind (max, min, sum,
mean) and at most one epilogue result, with the reduced values then used by nothing
else (a section has one output); the epilogue needs keepdims over the last axes.
Everything else stays on the host.

Invariant: the group computes the op's last result with the op's semantics (the
bodies' scalar ops are the vector unit's functions, as for ``fused_elementwise``).
"""

from __future__ import annotations

import numpy as np

from ...ir.core import Operation, Value
from .epilogue import VecStep
from .plan import BODY_OPS, Group, dtype_of
from .rowgroup import RowGroup
from .vector import VEC_DTYPES

KINDS = ("max", "min", "sum", "mean")


def fused_row_group(op: Operation) -> RowGroup | None:
    """The row group of a ``tensor.fused_reduce`` op, or None (it runs on the host)."""
    kinds = op.attributes.get("kinds", [op.attributes.get("kind")])
    results = op.results
    if (op.name != "tensor.fused_reduce" or len(kinds) != 1 or kinds[0] not in KINDS
            or len(results) > 2 or (len(results) == 2 and results[0].users)
            or any(dtype_of(v) not in VEC_DTYPES for v in [*op.operands, *results])):
        return None
    operands = list(op.operands)
    prologue = _body_group(op, 0, operands, results[0], lazy=False)
    if prologue is None:
        return None
    if not prologue.steps:
        prologue = None  # the reduction reads the operand itself
    epilogue = None
    if len(results) == 2:
        epilogue = _body_group(op, 1, [*operands, results[0]], results[1], lazy=True)
        if epilogue is None or not epilogue.steps:
            return None
    return RowGroup([op], results[-1], attrs=dict(op.attributes), externals=[*operands],
                    ext_dtypes=[dtype_of(v) for v in operands],  # type: ignore[misc]
                    layout="reduce", fn=kinds[0], prologue=prologue, epilogue=epilogue,
                    row_op=op, reduced=results[0])


def _body_group(op: Operation, index: int, args: list[Value], result: Value,
                lazy: bool) -> Group | None:
    """Body ``index`` of ``op`` as vector steps; its block arguments stand for ``args``
    (external operands: all of them, or only those the body reads when ``lazy``)."""
    g = Group([op], result)
    block = op.regions[index].blocks[0]
    where: dict[int, tuple[str, int]] = {}

    def external(value: Value | np.ndarray, dtype: object) -> tuple[str, int]:
        g.externals.append(value)
        g.ext_dtypes.append(dtype)  # type: ignore[arg-type]
        return ("ext", len(g.externals) - 1)

    pending = dict(zip((id(a) for a in block.args), args))
    if not lazy:
        for arg, value in zip(block.args, args):
            where[id(arg)] = external(value, dtype_of(value))

    def src(v: Value) -> tuple[str, int, object]:
        if id(v) not in where:
            if id(v) not in pending:
                raise KeyError(v)
            where[id(v)] = external(pending[id(v)], dtype_of(v))
        kind, i = where[id(v)]
        return (kind, i, dtype_of(v))

    for inner in block.ops:
        if inner.name == "tensor.yield":
            if len(inner.operands) != 1:
                return None
            y = inner.operands[0]
            s = src(y)
            if s[0] != "step" or s[1] != len(g.steps) - 1:
                if index == 0 and not g.steps and len(args) == 1:
                    return g  # an identity body: the reduction reads the operand
                g.steps.append(VecStep("cast", dtype_of(y), (s,)))  # type: ignore[arg-type]
            return g
        if inner.name == "arith.constant":
            dt = dtype_of(inner.result)
            if dt not in VEC_DTYPES:
                return None
            where[id(inner.result)] = external(
                np.asarray(inner.attributes["value"], dt.numpy), dt)  # type: ignore[union-attr]
            continue
        if inner.name not in BODY_OPS or dtype_of(inner.result) not in VEC_DTYPES:
            return None
        srcs = tuple(src(v) for v in inner.operands)
        g.steps.append(VecStep(BODY_OPS[inner.name], dtype_of(inner.result), srcs))  # type: ignore[arg-type]
        where[id(inner.result)] = ("step", len(g.steps) - 1)
    return None
