"""The block-based SSA IR: types, ops, builder, printer, parser, verifier, interpreter.

The public API is re-exported here; see docs/ir.md for the text form of every op.
"""

from .builder import Builder
from .core import Block, BlockArgument, Operation, OpResult, Region, Successor, Trait, Use, Value
from .dominance import DominanceInfo
from .interpreter import Interpreter, run_func
from .module import FuncOp, ModuleOp
from .ops import OPS, constant_of, create_op, op_class
from .parser import parse_func, parse_module
from .printer import print_func, print_module, print_op
from .types import (
    INDEX,
    IndexType,
    IRType,
    ScalarType,
    TensorType,
    broadcast_shapes,
    scalar,
    tensor,
)
from .verifier import verify

__all__ = [
    "Block", "BlockArgument", "Builder", "DominanceInfo", "FuncOp", "INDEX", "IRType",
    "IndexType", "Interpreter", "ModuleOp", "OPS", "OpResult", "Operation", "Region",
    "ScalarType", "Successor", "TensorType", "Trait", "Use", "Value", "broadcast_shapes",
    "constant_of", "create_op", "op_class", "parse_func", "parse_module", "print_func",
    "print_module", "print_op", "run_func", "scalar", "tensor", "verify",
]
