"""Placement of row ops: reductions, pools and re-layouts on the vector unit.

A ``RowGroup`` is one op that the vector unit runs as row reductions (or as a copy)
of a tensor the DMA engine presents as a [rows, cols] matrix through a view:
- ``tensor.reduce_{max,min,sum,mean}``: kept axes as rows, reduced axes as
  columns (a ``perm`` view moves the reduced axes last), one output per row;
- ``tensor.{max,avg}_pool``: one row per output pixel, its window as columns
  (a ``window`` view);
- ``tensor.transpose`` / ``tensor.reshape``: a DMA re-layout through a ``perm``
  view, copied tile by tile (no reduction).

``plan_rows`` adds a group for each such op that no other group took. Invariants:
a row group is a single op with one tensor operand (extra operands, such as the
dynamic extents of a reshape, leave the op on the host); its operand and result
dtypes are vector dtypes. Which shapes it can run is decided when it is lowered
(``rowlower.py``), like any group: an empty tensor runs on the host.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...ir.core import Operation
from ...ir.module import FuncOp
from ...ir.types import TensorType
from .plan import FuncPlan, Group, dtype_of
from .vector import VEC_DTYPES

#: op name -> (layout, row function): layout names the view, the function what the
#: vector unit does with each row ("copy": nothing, the tile is moved as it is)
ROW_OPS: dict[str, tuple[str, str]] = {
    "tensor.reduce_max": ("reduce", "max"),
    "tensor.reduce_min": ("reduce", "min"),
    "tensor.reduce_sum": ("reduce", "sum"),
    "tensor.reduce_mean": ("reduce", "mean"),
    "tensor.max_pool": ("pool", "max"),
    "tensor.avg_pool": ("pool", "mean"),
    "tensor.transpose": ("perm", "copy"),
    "tensor.reshape": ("perm", "copy"),
}


@dataclass
class RowGroup(Group):
    """A single row op (``ops[0]``): its view ``layout`` and row function ``fn``."""

    layout: str = ""
    fn: str = ""

    @property
    def op(self) -> Operation:
        return self.ops[0]


def _row_ok(op: Operation) -> bool:
    if op.name not in ROW_OPS or len(op.operands) != 1 or len(op.results) != 1:
        return False
    x = op.operands[0]
    return isinstance(x.type, TensorType) and all(
        dtype_of(v) in VEC_DTYPES for v in (x, op.result))


def row_group(op: Operation) -> RowGroup:
    layout, fn = ROW_OPS[op.name]
    x = op.operands[0]
    return RowGroup([op], op.result, attrs=dict(op.attributes), externals=[x],
                    ext_dtypes=[dtype_of(x)], layout=layout, fn=fn)  # type: ignore[list-item]


def plan_rows(func: FuncOp, plan: FuncPlan) -> FuncPlan:
    """``plan`` with a row group for every row op it left to the host."""
    for block in func.blocks:
        for op in block.ops:
            if id(op) in plan.runs or id(op) in plan.skips or not _row_ok(op):
                continue
            group = row_group(op)
            plan.runs[id(op)] = group
            plan.groups.append(group)
    return plan
