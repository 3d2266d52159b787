"""A row group: one row op (reduction, pool, re-layout) on the vector unit, with the
vector groups fused before and behind it (``rowplan.py`` makes them).

Invariant: ``ops`` are in block order (prologue ops, the row op, epilogue ops); the
group runs at its last op and writes ``output``; ``result`` is the row op's own
result (the reduced values), stored only when nothing is fused behind it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...ir.core import Operation, Value
from ...ir.types import TensorType
from .plan import Group, dtype_of
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
    #: the vector group computing the reduced operand tile by tile, when only the
    #: reduction uses it (``reduce_sum(exp(s))``, ``reduce_mean(xc * xc)``); its
    #: externals are then this group's externals
    prologue: Group | None = None
    #: the vector group using the reduction's result, fused behind it (a second pass
    #: over each row chunk reads the result where the reduction left it): softmax's
    #: ``e / reduce_sum(e)``, layer_norm's ``x - mu``; the section writes its output
    epilogue: Group | None = None
    row_op: Operation | None = None
    #: the reduced values when the row op has several results (tensor.fused_reduce)
    reduced: Value | None = None

    @property
    def op(self) -> Operation:
        """The row op itself (between the prologue's and the epilogue's ops)."""
        return self.row_op or self.ops[0]

    @property
    def result(self) -> Value:
        """The row op's own result (the reduced values, or the copy)."""
        return self.reduced or self.op.result


def row_ok(op: Operation) -> bool:
    """A row op with one tensor operand, whose values the vector unit holds."""
    if op.name not in ROW_OPS or len(op.operands) != 1 or len(op.results) != 1:
        return False
    x = op.operands[0]
    return isinstance(x.type, TensorType) and all(
        dtype_of(v) in VEC_DTYPES for v in (x, op.result))


def row_group(op: Operation) -> RowGroup:
    layout, fn = ROW_OPS[op.name]
    x = op.operands[0]
    return RowGroup([op], op.result, attrs=dict(op.attributes), externals=[x],
                    ext_dtypes=[dtype_of(x)], layout=layout, fn=fn,  # type: ignore[list-item]
                    row_op=op)
