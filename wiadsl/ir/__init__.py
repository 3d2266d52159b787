"""The block-based SSA IR: types, ops, builder, printer, parser, verifier, interpreter.

The public API is re-exported here; see docs/ir.md for the text form of every op.
"""

from ..lazy import lazy_exports

__getattr__, __dir__ = lazy_exports(__name__, {
    "Builder": ".builder",
    "Block": ".core",
    "BlockArgument": ".core",
    "Operation": ".core",
    "OpResult": ".core",
    "Region": ".core",
    "Successor": ".core",
    "Trait": ".core",
    "Use": ".core",
    "Value": ".core",
    "DominanceInfo": ".dominance",
    "Interpreter": ".interpreter",
    "run_func": ".interpreter",
    "FuncOp": ".module",
    "ModuleOp": ".module",
    "OPS": ".ops",
    "constant_of": ".ops",
    "create_op": ".ops",
    "op_class": ".ops",
    "parse_func": ".parser",
    "parse_module": ".parser",
    "print_func": ".printer",
    "print_module": ".printer",
    "print_op": ".printer",
    "INDEX": ".types",
    "IndexType": ".types",
    "IRType": ".types",
    "ScalarType": ".types",
    "TensorType": ".types",
    "broadcast_shapes": ".types",
    "scalar": ".types",
    "tensor": ".types",
    "verify": ".verifier",
})

__all__ = [
    "Block", "BlockArgument", "Builder", "DominanceInfo", "FuncOp", "INDEX", "IRType",
    "IndexType", "Interpreter", "ModuleOp", "OPS", "OpResult", "Operation", "Region",
    "ScalarType", "Successor", "TensorType", "Trait", "Use", "Value", "broadcast_shapes",
    "constant_of", "create_op", "op_class", "parse_func", "parse_module", "print_func",
    "print_module", "print_op", "run_func", "scalar", "tensor", "verify",
]
