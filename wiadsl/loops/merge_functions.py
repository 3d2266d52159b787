"""Merge outlined functions that are the same code (issue 21: compile each distinct
piece of a model once).

A model's layers of one shape outline the same loops (ResNet-18: the zero padding of
five 64-channel activations, four identical convolution epilogues...), and each
outlined function would be lowered, optimized and compiled again. This pass keeps one
function per distinct body and points every ``func.call`` of the others at it;
callers that then become the same merge in the next round (a fixed point).

Invariants:
- Only outlined functions (``parallelize``'s ``<func>.par<k>`` and ``<func>.loop<k>``) merge: kernels and
  the user's functions are entry points or keep their names.
- Two functions merge only when their ``fingerprint``s are equal: the same argument
  and result types, and the same ops in the same order with the same names,
  attributes, result types, operand wiring (values numbered by definition, not by
  name), successors and nested regions, and for ops that can fail at run time, the
  same source span. A difference of any kind keeps both.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ..ir.core import Operation, Region
from ..ir.module import FuncOp, ModuleOp
from .parallelize import OUTLINED

#: Ops whose run-time failure names their source span: functions differing only in
#: those spans stay apart, so an error still points at its own line.
REPORTING = frozenset({"loop.alloc", "loop.check"})


def fingerprint(func: FuncOp) -> tuple[Any, ...]:
    """``func``'s code without its name and value names (see the module's invariants).
    Values and blocks are numbered first, so a use before its definition in block
    order is wired as exactly as any other."""
    numbers: dict[int, int] = {}
    blocks: dict[int, int] = {}
    _number(func.body, numbers, blocks)
    out: list[Any] = [tuple(map(str, func.arg_types)), tuple(map(str, func.result_types))]
    _describe(func.body, numbers, blocks, out)
    return tuple(out)


def _number(region: Region, numbers: dict[int, int], blocks: dict[int, int]) -> None:
    for b in region.blocks:
        blocks[id(b)] = len(blocks)
        for a in b.args:
            numbers[id(a)] = len(numbers)
        for op in b.ops:
            for r in op.results:
                numbers[id(r)] = len(numbers)
            for nested in op.regions:
                _number(nested, numbers, blocks)


def _describe(region: Region, numbers: dict[int, int], blocks: dict[int, int], out: list[Any]) -> None:
    for b in region.blocks:
        out.append(("block", tuple(str(a.type) for a in b.args)))
        for op in b.ops:
            out.append(_op(op, numbers, blocks))
            for nested in op.regions:
                _describe(nested, numbers, blocks, out)


def _op(op: Operation, numbers: dict[int, int], blocks: dict[int, int]) -> tuple[Any, ...]:
    # a value from outside the function (none after outlining) gets no number: -1
    operands = tuple(numbers.get(id(v), -1) for v in op.operands)
    successors = tuple((blocks.get(id(s.block), -1), tuple(numbers.get(id(a), -1) for a in s.args))
                       for s in op.successors)
    attributes = tuple(sorted((k, _attribute(v)) for k, v in op.attributes.items()))
    # an op that can fail reports its source line (codegen's code_for): kept apart
    where = repr(op.loc) if op.name in REPORTING else None
    return (op.name, operands, successors, attributes, tuple(str(r.type) for r in op.results),
            len(op.regions), where)


def _attribute(value: Any) -> Any:
    """A key that tells attribute values apart: arrays by their bytes (a repr elides
    a long array's middle), containers element by element, the rest by ``repr``."""
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_attribute(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((repr(k), _attribute(v)) for k, v in value.items())))
    return (type(value).__name__, repr(value))


def merge_functions(module: ModuleOp) -> int:
    """Merge identical outlined functions of ``module`` (in place); how many were removed.
    A function's fingerprint is taken again only when one of its calls was retargeted
    (nothing else in it changes between rounds)."""
    removed = 0
    prints = {f.name: fingerprint(f) for f in module if OUTLINED.search(f.name)}
    while True:
        first: dict[tuple[Any, ...], str] = {}
        merged = {}
        for name, key in prints.items():
            keep = first.setdefault(key, name)
            if keep != name:
                merged[name] = keep
        if not merged:
            return removed
        for name in merged:
            module.remove(name)
            del prints[name]
        for func in _retarget(module, merged):
            if func.name in prints:
                prints[func.name] = fingerprint(func)
        removed += len(merged)


def _retarget(module: ModuleOp, merged: dict[str, str]) -> set[FuncOp]:
    """Point the calls of merged functions at the kept ones; the functions changed."""
    changed = set()
    for func in module:
        for call in _calls_in(func.body):
            callee = call.attributes.get("callee")
            if callee in merged:
                call.attributes["callee"] = merged[callee]
                changed.add(func)
    return changed


def _calls_in(region: Region) -> Iterable[Operation]:
    for b in region.blocks:
        for op in b.ops:
            if op.name == "func.call":
                yield op
            for nested in op.regions:
                yield from _calls_in(nested)


__all__ = ["OUTLINED", "fingerprint", "merge_functions"]
