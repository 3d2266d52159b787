"""``copy_module``: an independent copy of a module, source locations included.

The copy goes through the IR's text form, which round-trips every op in place; the
text has no source locations, so they are copied op by op: a pass that reports an
error on the copy points at the same source line as on the original.
"""

from __future__ import annotations

from .core import walk_nested
from .module import ModuleOp
from .parser import parse_module
from .printer import print_module


def copy_module(module: ModuleOp) -> ModuleOp:
    """A new module equal to ``module``, sharing nothing with it."""
    copy = parse_module(print_module(module))
    for old_func, new_func in zip(module.funcs, copy.funcs, strict=True):
        for old, new in zip(walk_nested(old_func.blocks), walk_nested(new_func.blocks),
                            strict=True):
            new.loc = old.loc
    return copy
