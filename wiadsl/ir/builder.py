"""An insertion-point builder, the way lowerings and rewrites create IR.

Invariants:
- ``create`` only accepts registered op names (``OPS``) and inserts the new op
  at the insertion point, which then sits right after it.
- The builder does not verify; run ``verify`` on the finished function.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..diagnostics import WiaIRError
from .core import Block, Operation, Value
from .module import FuncOp
from .numerics import python_value
from .ops import create_op
from .types import IRType, ScalarType, TensorType

Edge = tuple[Block, Sequence[Value]]


class Builder:
    """Creates ops at an insertion point: the end of a block, or before an op."""

    def __init__(self, block: Block | None = None):
        self.block: Block | None = block
        self._before: Operation | None = None
        #: the source location stamped on every op this builder creates (a lowering
        #: sets it per AST node, so diagnostics and remarks can point at source)
        self.loc: Any = None

    # -------------------------------------------------------- insertion point

    @classmethod
    def at_end(cls, block: Block) -> Builder:
        return cls(block)

    @classmethod
    def before(cls, op: Operation) -> Builder:
        b = cls(op.parent)
        b._before = op
        return b

    def set_insertion_point_to_end(self, block: Block) -> None:
        self.block, self._before = block, None

    def set_insertion_point_before(self, op: Operation) -> None:
        self.block, self._before = op.parent, op

    def set_insertion_point_after(self, op: Operation) -> None:
        assert op.parent is not None
        block = op.parent
        index = block.ops.index(op) + 1
        self.block = block
        self._before = block.ops[index] if index < len(block.ops) else None

    def insert(self, op: Operation) -> Operation:
        if op.loc is None:
            op.loc = self.loc
        if self.block is None:
            raise WiaIRError("builder has no insertion point")
        if self._before is None:
            return self.block.append(op)
        return self.block.insert(self.block.ops.index(self._before), op)

    # ---------------------------------------------------------------- create

    def create(self, op_name: str, operands: Sequence[Value] = (),
               result_types: Sequence[IRType] = (), attributes: dict[str, Any] | None = None,
               successors: Sequence[Edge] = (),
               result_names: Sequence[str | None] | None = None) -> Operation:
        """Create the op named ``op_name`` (an error if unknown) and insert it."""
        op = create_op(op_name, operands, result_types, attributes, successors, result_names)
        return self.insert(op)

    def value(self, op_name: str, operands: Sequence[Value], result_type: IRType,
              attributes: dict[str, Any] | None = None, name: str | None = None) -> Value:
        """``create`` for the common one-result op; returns the result."""
        return self.create(op_name, operands, [result_type], attributes, (), [name]).result

    # ------------------------------------------------------------ shorthands

    def constant(self, value: Any, type: IRType, name: str | None = None) -> Value:
        """``arith.constant`` for scalars/index, ``tensor.constant`` for tensors."""
        if isinstance(type, TensorType):
            array = np.asarray(value, dtype=type.dtype.numpy)
            if array.shape != type.shape:
                array = np.broadcast_to(array, type.shape).copy()  # type: ignore[arg-type]
            return self.value("tensor.constant", [], type, {"value": array}, name)
        value = python_value(value)
        if isinstance(type, ScalarType):
            dtype = type.dtype
            value = bool(value) if dtype.kind == 0 else int(value) if dtype.is_int else float(value)
        else:
            value = int(value)
        return self.value("arith.constant", [], type, {"value": value}, name)

    def br(self, dest: Block, args: Sequence[Value] = ()) -> Operation:
        return self.create("cf.br", successors=[(dest, list(args))])

    def cond_br(self, cond: Value, true_dest: Block, true_args: Sequence[Value],
                false_dest: Block, false_args: Sequence[Value] = ()) -> Operation:
        return self.create("cf.cond_br", [cond],
                           successors=[(true_dest, list(true_args)), (false_dest, list(false_args))])

    def ret(self, values: Sequence[Value] = ()) -> Operation:
        return self.create("func.return", list(values))

    def call(self, callee: FuncOp | str, args: Sequence[Value],
             result_types: Sequence[IRType] | None = None,
             result_names: Sequence[str | None] | None = None) -> list[Value]:
        """``func.call``; result types default to the callee's signature."""
        if isinstance(callee, FuncOp):
            name, types = callee.name, callee.result_types if result_types is None else result_types
        elif result_types is None:
            raise WiaIRError(f"call of @{callee} by name needs result types")
        else:
            name, types = callee, result_types
        op = self.create("func.call", list(args), list(types), {"callee": name}, (), result_names)
        return list(op.results)

    @staticmethod
    def new_block(func: FuncOp, arg_types: Sequence[IRType] = (),
                  arg_names: Sequence[str | None] | None = None, name: str | None = None) -> Block:
        """A new block with arguments at the end of ``func``'s body (the
        insertion point does not move)."""
        return func.add_block(arg_types, arg_names, name)
