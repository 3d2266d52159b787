"""Placement of row ops: reductions, pools and re-layouts on the vector unit.

A ``RowGroup`` is one op that the vector unit runs as row reductions (or as a copy)
of a tensor the DMA engine presents as a [rows, cols] matrix through a view:
- ``tensor.reduce_{max,min,sum,mean}``: kept axes as rows, reduced axes as
  columns (a ``perm`` view moves the reduced axes last), one output per row;
- ``tensor.{max,avg}_pool``: one row per output pixel, its window as columns
  (a ``window`` view);
- ``tensor.transpose`` / ``tensor.reshape``: a DMA re-layout through a ``perm``
  view, copied tile by tile (no reduction).

``plan_rows`` adds a group for each such op that no other group took, then lets
vector groups absorb re-layouts: an operand made by a transpose/reshape that only
the group uses is read through a ``perm`` view of the op's operand, and an output
whose only user is a transpose/reshape is written through a ``perm`` view of that
op's result; the absorbed op never runs (batch_norm's two transposes). A reduction
also absorbs the vector group making its operand when it is that operand's only
user (its prologue, run on each tile before the row reduction). Invariants:
a row op has one tensor operand (extra operands, such as the dynamic extents of a
reshape, leave the op on the host) and is the group's last op; its operand and
result dtypes are vector dtypes. Which shapes it can run is decided when it is lowered
(``rowlower.py``), like any group: an empty tensor runs on the host.
"""

from __future__ import annotations

from ...ir.core import Operation, OpResult
from ...ir.module import FuncOp
from .plan import FuncPlan, Group
from .rowfused import fused_row_group
from .rowgroup import RowGroup, row_group, row_ok
from .views import Relayout


def plan_rows(func: FuncOp, plan: FuncPlan) -> FuncPlan:
    """``plan`` with a row group for every row op it left to the host, then the
    re-layouts that vector groups can read or write through absorbed."""
    for block in func.blocks:
        for op in block.ops:
            if id(op) in plan.runs or id(op) in plan.skips:
                continue
            group = row_group(op) if row_ok(op) else fused_row_group(op)
            if group is None:
                continue
            plan.runs[id(op)] = group
            plan.groups.append(group)
    for g in list(plan.groups):
        if g.product is None and not isinstance(g, RowGroup):
            _absorb_inputs(g, plan)
            _absorb_output(g, plan)
    for g in list(plan.groups):
        if isinstance(g, RowGroup) and g.layout == "reduce":
            _absorb_prologue(g, plan)
    for g in list(plan.groups):
        if isinstance(g, RowGroup) and g.layout == "reduce":
            _absorb_epilogue(g, plan)
    return plan


def _source_shape(op: Operation) -> tuple:
    """The shape a reduction reads (a fused_reduce's iteration shape)."""
    if op.name == "tensor.fused_reduce":
        return tuple(op.iteration_shape())  # type: ignore[attr-defined]
    return tuple(op.operands[0].type.shape)  # type: ignore[union-attr]


def _tail_keepdims(op: Operation) -> bool:
    """A keepdims reduction over the last axes: its result broadcasts back one value
    per row of the [kept, reduced] matrix."""
    axes = op.axes()  # type: ignore[attr-defined]
    rank = len(_source_shape(op))
    return bool(op.attributes.get("keepdims", False)) and \
        sorted(axes) == list(range(rank - len(axes), rank))


def _absorb_epilogue(row: RowGroup, plan: FuncPlan) -> None:
    """Fuse the vector group that is the only user of a reduction's result behind it."""
    if row.epilogue is not None:
        return
    users = {id(u) for u in row.output.users}
    g = next((g for g in plan.groups if users and users <= {id(o) for o in g.ops}), None)
    if (g is None or g.product is not None or isinstance(g, RowGroup) or not _tail_keepdims(row.op)
            or g.out_relayout is not None or g.ops[-1].parent is not row.op.parent
            or not any(v is row.output for v in g.externals) or g.ext_relayouts
            # the second pass runs over the reduced rows: only a group as wide as the
            # reduction's source (softmax's exp(x - m)) can ride on it, not one that
            # works on the reduced values themselves (cast(reduce_min(x, keepdims)))
            or tuple(g.output.type.shape) != _source_shape(row.op)):  # type: ignore[union-attr]
        return
    last = g.ops[-1]
    del plan.runs[id(last)]
    del plan.runs[id(row.op)]
    plan.groups.remove(g)
    plan.skips.update(id(op) for op in [*row.ops, *g.ops[:-1]])
    plan.skips.discard(id(last))
    row.ops = [*row.ops, *g.ops]
    row.epilogue = g
    row.output = g.output
    row.externals = [*row.externals, *(v for v in g.externals if v is not row.result)]
    plan.runs[id(last)] = row


def _absorb_prologue(row: RowGroup, plan: FuncPlan) -> None:
    """Fuse the vector group that makes a reduction's operand into the reduction, when
    the reduction is its only user: the operand is never stored."""
    if row.prologue is not None or row.op.name == "tensor.fused_reduce":
        return
    x = row.op.operands[0]
    producer = x.op if isinstance(x, OpResult) else None
    g = plan.runs.get(id(producer))
    if (g is None or g.product is not None or isinstance(g, RowGroup) or g.output is not x
            or g.out_relayout is not None or x.users != [row.op]
            or producer.parent is not row.op.parent):  # type: ignore[union-attr]
        return
    del plan.runs[id(producer)]
    plan.groups.remove(g)
    plan.skips.update(id(op) for op in g.ops)
    row.ops = [*g.ops, row.op]
    row.prologue = g
    row.externals, row.ext_dtypes, row.ext_relayouts = g.externals, g.ext_dtypes, g.ext_relayouts
    row.absorbed = [*row.absorbed, *g.absorbed]  # run first when the group runs on the host


def _relayout_group(op: Operation | None, plan: FuncPlan, block: object) -> RowGroup | None:
    """The row group of ``op`` if it is a re-layout in ``block`` that may be absorbed."""
    group = plan.runs.get(id(op)) if op is not None else None
    if isinstance(group, RowGroup) and group.layout == "perm" and op.parent is block:  # type: ignore[union-attr]
        return group
    return None


def _relayout(op: Operation) -> Relayout:
    if op.name == "tensor.transpose":
        return Relayout("transpose", tuple(op.attributes["perm"]))
    return Relayout("reshape", tuple(op.result.type.shape))  # type: ignore[union-attr, arg-type]


def _drop(row: RowGroup, plan: FuncPlan) -> None:
    del plan.runs[id(row.op)]
    plan.groups.remove(row)


def _absorb_inputs(group: Group, plan: FuncPlan) -> None:
    """Read an external through the transpose/reshape that makes it, when only this
    group uses it: the op never runs, the DMA reads its operand in its order."""
    inside = {id(op) for op in group.ops}
    block = group.ops[-1].parent
    for i, value in enumerate(group.externals):
        producer = value.op if isinstance(value, OpResult) else None
        row = _relayout_group(producer, plan, block)
        if row is None or not all(id(u) in inside for u in value.users):  # type: ignore[union-attr]
            continue
        _drop(row, plan)
        plan.skips.add(id(row.op))
        # a group that runs on the host instead (an empty tensor: kernel.run_group)
        # runs its absorbed ops first; this one's result is what its ops read
        group.absorbed.append(row.op)
        group.externals[i] = row.op.operands[0]
        group.ext_relayouts[i] = _relayout(row.op)


def _absorb_output(group: Group, plan: FuncPlan) -> None:
    """Write the output through the transpose/reshape that is its only user: the group
    then computes that op's result and runs where it stood."""
    users = group.output.users
    row = _relayout_group(users[0], plan, group.ops[-1].parent) if len(users) == 1 else None
    if row is None:
        return
    _drop(row, plan)
    del plan.runs[id(group.ops[-1])]
    plan.skips.add(id(group.ops[-1]))
    group.ops.append(row.op)
    group.output = row.op.result
    group.out_relayout = _relayout(row.op)
    plan.runs[id(row.op)] = group
