"""Copying IR: one op (``clone_op``), a region (``clone_region``), a whole module
(``copy_module``), source locations included.

``clone_op`` maps operands through ``mapping`` (a value not in it is read as it is,
or as ``unmapped`` says), targets the blocks of ``block_map``, clones its regions
recursively, copies its attributes wherever they are mutable (lists, tuples, dicts,
arrays) and records result -> clone in ``mapping``. Passes use it to move or
duplicate ops (inlining, fusion, loop edits).

``copy_module`` clones every function op by op (not through the text form:
printing and parsing a kernel's module was ~3 ms of every cold compile, issue 21):
a function's blocks first (so branches can name any of them), then its ops in block
order. An operand defined later in block order (legal: dominance, not block order,
decides) reads a stand-in until the whole function is cloned, then the clone of its
definition, so the original's use lists are never touched.

Invariants: a copy prints exactly as the original and shares no op, block, value or
mutable attribute with it; every op keeps its class, result names, block names and
source location.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .core import Block, Operation, Region, Value, walk_nested
from .module import FuncOp, ModuleOp


def copy_attribute(value: Any) -> Any:
    """``value`` with its mutable parts copied (attribute values are built from
    scalars, strings, types, spans, lists, tuples, dicts and arrays)."""
    if isinstance(value, list):
        return [copy_attribute(v) for v in value]
    if isinstance(value, tuple):
        return tuple(copy_attribute(v) for v in value)
    if isinstance(value, dict):
        return {k: copy_attribute(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return value.copy()
    return value


def clone_op(op: Operation, mapping: dict[int, Value], block_map: dict[int, Block] | None = None,
             unmapped: Callable[[Value], Value] | None = None) -> Operation:
    """A detached copy of ``op`` reading mapped operands and targeting mapped blocks
    (see the module docstring)."""
    def get(v: Value) -> Value:
        found = mapping.get(id(v))
        return found if found is not None else (unmapped(v) if unmapped else v)

    succs = [((block_map or {}).get(id(s.block), s.block), [get(a) for a in s.args])
             for s in op.successors]
    regions = [clone_region(r, mapping, unmapped) for r in op.regions]
    new = type(op)([get(v) for v in op.operands], op.result_types, copy_attribute(op.attributes),
                   succs, regions, [r.name_hint for r in op.results])
    new.loc = op.loc
    for old, res in zip(op.results, new.results, strict=True):
        mapping[id(old)] = res
    return new


def clone_region(region: Region, mapping: dict[int, Value],
                 unmapped: Callable[[Value], Value] | None = None,
                 into: Region | None = None) -> Region:
    """A copy of ``region``'s blocks, their arguments and ops: a detached region, or
    appended to ``into``."""
    copy = into if into is not None else Region()
    block_map: dict[int, Block] = {}
    for block in region.blocks:
        new = copy.add_block(Block(block.arg_types, [a.name_hint for a in block.args],
                                   block.name_hint))
        block_map[id(block)] = new
        for a, na in zip(block.args, new.args, strict=True):
            mapping[id(a)] = na
    for block in region.blocks:
        target = block_map[id(block)]
        for op in block.ops:
            target.append(clone_op(op, mapping, block_map, unmapped))
    return copy


def copy_func(func: FuncOp) -> FuncOp:
    """A detached copy of ``func`` (its name, signature, attributes and body)."""
    mapping: dict[int, Value] = {}
    waiting: dict[int, Value] = {}  # stand-in -> the original value it stands for

    def stand_in(v: Value) -> Value:
        s = Value(v.type)
        waiting[id(s)] = v
        return s
    new = FuncOp(func.name, (), func.result_types, attributes=copy_attribute(func.attributes))
    new.body.remove_block(new.body.entry)
    clone_region(func.body, mapping, stand_in, into=new.body)
    if waiting:
        for op in walk_nested(new.blocks):
            for i, v in enumerate(op.all_operands):
                if id(v) in waiting:
                    op.set_operand(i, mapping[id(waiting[id(v)])])
    return new


def copy_module(module: ModuleOp) -> ModuleOp:
    """A new module equal to ``module``, sharing nothing with it."""
    return ModuleOp([copy_func(f) for f in module.funcs])


__all__ = ["clone_op", "clone_region", "copy_attribute", "copy_func", "copy_module"]
