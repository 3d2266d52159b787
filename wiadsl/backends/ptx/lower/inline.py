"""Prepare a kernel for planning: a private copy of the module with every call inlined.

Invariants:
- The caller's module is never mutated: planning works on a printed-and-parsed copy.
- After ``inlined_kernel`` the kernel contains no ``func.call``; a call to a
  function with more than one block raises WiaError naming the callee (the
  stdlib's functions are single-block).
"""

from __future__ import annotations

from ....diagnostics import WiaError
from ....ir.core import Block, Operation, Region, Value
from ....ir.module import FuncOp, ModuleOp
from ....ir.ops import create_op
from ....ir.parser import parse_module
from ....ir.printer import print_module

MAX_INLINE_ROUNDS = 64


def inlined_kernel(module: ModuleOp, kernel: str) -> FuncOp:
    """A copy of ``kernel`` with calls inlined (its module is a private copy)."""
    copy = parse_module(print_module(module), filename="<ptx-copy>")
    if kernel not in copy:
        known = ", ".join(f.name for f in copy.funcs if f.is_kernel) or "none"
        raise WiaError(f"no kernel named '{kernel}' in the module; kernels: {known}")
    func = copy[kernel]
    for _ in range(MAX_INLINE_ROUNDS):
        calls = [op for op in func.walk() if op.name == "func.call"]
        if not calls:
            return func
        for call in calls:
            _inline_call(copy, call)
    raise WiaError(f"calls in '{kernel}' nest deeper than {MAX_INLINE_ROUNDS} levels "
                   f"(recursion is not supported by the PTX backend)")


def _inline_call(module: ModuleOp, call: Operation) -> None:
    name = call.attributes["callee"]
    callee = module.get(name)
    if callee is None:
        raise WiaError(f"'func.call' of unknown function @{name}")
    if len(callee.blocks) != 1:
        raise WiaError(f"the PTX backend inlines only single-block functions; @{name} has "
                       f"{len(callee.blocks)} blocks")
    mapping: dict[int, Value] = {id(a): v for a, v in zip(callee.args, call.operands, strict=True)}
    results: list[Value] = []
    for op in callee.entry.ops:
        if op.name == "func.return":
            results = [mapping[id(v)] for v in op.operands]
            break
        clone = clone_op(op, mapping)
        call.insert_before(clone)
    for old, new in zip(call.results, results, strict=True):
        old.replace_all_uses_with(new)
    call.erase()


def clone_op(op: Operation, mapping: dict[int, Value]) -> Operation:
    """``op`` with operands renamed through ``mapping`` (regions cloned); results mapped."""
    regions = [_clone_region(r, mapping) for r in op.regions]
    clone = create_op(op.name, [mapping.get(id(v), v) for v in op.operands],
                      list(op.result_types), dict(op.attributes), (),
                      [r.name_hint for r in op.results])
    for r in regions:
        r.parent = clone
        clone.regions.append(r)
    for old, new in zip(op.results, clone.results, strict=True):
        mapping[id(old)] = new
    return clone


def _clone_region(region: Region, mapping: dict[int, Value]) -> Region:
    blocks = []
    for b in region.blocks:
        nb = Block(list(b.arg_types), [a.name_hint for a in b.args])
        for a, na in zip(b.args, nb.args, strict=True):
            mapping[id(a)] = na
        for op in b.ops:
            nb.append(clone_op(op, mapping))
        blocks.append(nb)
    return Region(blocks)


__all__ = ["inlined_kernel", "clone_op", "FuncOp"]
