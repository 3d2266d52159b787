"""Prepare a kernel for planning: a private copy of the module with every call inlined.

Invariants:
- The caller's module is never mutated: planning works on a printed-and-parsed copy.
- After ``inlined_kernel`` the kernel contains no ``func.call``. Inlining is the
  ``inline`` pass's (``passes.inline``): a multi-block callee (a function with
  ``if`` or a loop) splits the caller's block, and its returns branch to the
  continuation, which the planner handles like any other control flow.
"""

from __future__ import annotations

from ....diagnostics import WiaError
from ....ir.copying import copy_module
from ....ir.module import FuncOp, ModuleOp
from ....passes.base import PassContext
from ....passes.inline import Inline


def inlined_kernel(module: ModuleOp, kernel: str) -> FuncOp:
    """A copy of ``kernel`` with calls inlined (its module is a private copy)."""
    copy = copy_module(module)
    if kernel not in copy:
        known = ", ".join(f.name for f in copy.funcs if f.is_kernel) or "none"
        raise WiaError(f"no kernel named '{kernel}' in the module; kernels: {known}")
    func = copy[kernel]
    Inline(keep_unused=True).inline_all(copy, func, PassContext(), depth=0)
    return func


__all__ = ["inlined_kernel"]
