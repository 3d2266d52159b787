"""Inline straight-line helper functions so their ops can fuse (``nn.gelu`` after a matmul).

Works on a copy of the module (printed and parsed back), never the caller's IR.
Invariant: only callees with one block, no ops with regions, and no recursion are
inlined; the result verifies and computes what the original does.
"""

from __future__ import annotations

from ...ir import ModuleOp, verify
from ...ir.copying import copy_module
from ...ir.module import FuncOp
from ...passes.inline import inline_call


def _inlinable(callee: FuncOp | None, caller: FuncOp) -> bool:
    return (callee is not None and callee is not caller and len(callee.blocks) == 1
            and all(not op.regions for op in callee.entry.ops))


def inline_helpers(module: ModuleOp) -> ModuleOp:
    """A copy of ``module`` with every inlinable ``func.call`` replaced by the callee's ops."""
    clone = copy_module(module)
    changed = True
    while changed:
        changed = False
        for func in clone.funcs:
            for block in func.blocks:
                for op in list(block.ops):
                    callee = clone.get(op.attributes["callee"]) if op.name == "func.call" else None
                    if op.name == "func.call" and _inlinable(callee, func):
                        inline_call(op, callee)  # type: ignore[arg-type]
                        changed = True
    verify(clone)
    return clone
