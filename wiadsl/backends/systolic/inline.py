"""Inline straight-line helper functions so their ops can fuse (``nn.gelu`` after a matmul).

Works on a copy of the module (printed and parsed back), never the caller's IR.
Invariant: only callees with one block, no ops with regions, and no recursion are
inlined; the result verifies and computes what the original does.
"""

from __future__ import annotations

from ...ir import ModuleOp, parse_module, print_module, verify
from ...ir.core import Operation, Value
from ...ir.module import FuncOp
from ...ir.ops import create_op


def _inlinable(callee: FuncOp | None, caller: FuncOp) -> bool:
    return (callee is not None and callee is not caller and len(callee.blocks) == 1
            and all(not op.regions for op in callee.entry.ops))


def _inline(call: Operation, callee: FuncOp) -> None:
    mapping: dict[int, Value] = {id(a): v for a, v in zip(callee.args, call.operands)}
    for op in callee.entry.ops:
        if op.name == "func.return":
            for result, value in zip(call.results, op.operands):
                result.replace_all_uses_with(mapping[id(value)])
            break
        new = create_op(op.name, [mapping[id(v)] for v in op.operands], op.result_types,
                        dict(op.attributes), result_names=[r.name_hint for r in op.results])
        new.loc = op.loc
        call.insert_before(new)
        mapping.update({id(old): r for old, r in zip(op.results, new.results)})
    call.erase()


def inline_helpers(module: ModuleOp) -> ModuleOp:
    """A copy of ``module`` with every inlinable ``func.call`` replaced by the callee's ops."""
    clone = parse_module(print_module(module))
    changed = True
    while changed:
        changed = False
        for func in clone.funcs:
            for block in func.blocks:
                for op in list(block.ops):
                    callee = clone.get(op.attributes["callee"]) if op.name == "func.call" else None
                    if op.name == "func.call" and _inlinable(callee, func):
                        _inline(op, callee)  # type: ignore[arg-type]
                        changed = True
    verify(clone)
    return clone
