"""Destination passing: which allocations may live in the caller's output buffers.

When the caller passes a buffer for an output (``kernel(x, y=buf)``) and the
kernel returns that output straight from a ``loop.alloc`` (through
``loop.retype``s, which only change its static type), the kernel can
compute it in ``buf``: no fresh pages to fault in, no copy afterwards. That is
safe when the allocation runs at most once per call -- it sits in a block of
the kernel's own CFG (not in a region of another op) that is in no loop -- so
no second value ever lands in the same buffer.

``result_allocations`` finds them; the codegen (``loop.alloc``) takes the
caller's buffer when the entry ABI's copy-out pair for that result (runtime.py)
names one of exactly the allocation's byte count, and allocates as usual
otherwise. The caller (backend.py) passes only buffers that overlap no input
and no other output buffer.
"""

from __future__ import annotations

from ...ir.core import OpResult
from ...ir.module import FuncOp
from ...ir.types import TensorType
from ...passes.licm import natural_loops


def result_allocations(func: FuncOp) -> dict[int, int]:
    """``id(loop.alloc op)`` -> the index (among tensor results) of the result it
    is returned as, for every allocation that may take the caller's buffer."""
    returns = [b.terminator for b in func.blocks
               if b.terminator is not None and b.terminator.name == "func.return"]
    if len(returns) != 1:
        return {}
    in_loops = {i for _, ids, _ in natural_loops(func) for i in ids}
    found: dict[int, int] = {}
    j = 0
    for v, t in zip(returns[0].operands, returns[0].operand_types, strict=True):
        if not isinstance(t, TensorType):
            continue
        op = v.op if isinstance(v, OpResult) else None
        while op is not None and op.name == "loop.retype":  # the same buffer, retyped
            source = op.operands[0]
            op = source.op if isinstance(source, OpResult) else None
        if (op is not None and op.name == "loop.alloc" and id(op) not in found
                and op.parent is not None and op.parent.parent is func.body
                and id(op.parent) not in in_loops):
            found[id(op)] = j
        j += 1
    return found
