"""The loop-level ``prefetch`` pass: software prefetch for unit-stride loads.

In every innermost counted loop (``counted.CountedLoop``), each ``loop.vload`` (and
``loop.load`` too with the option ``scalar=true``) whose offset is ``iv + u``
(``u`` loop-invariant: unit stride) gets

    %ahead = arith.add %off, %distance : index
    loop.prefetch %buf, %ahead : (tensor<...>, index) -> ()

right before it: a hint that the element ``distance`` elements ahead will be read
soon. One prefetch per buffer and offset; the scalar remainder loops ``vectorize``
leaves (``cond_br`` marked ``remainder``, fewer than W iterations) get none.
Scalar loads are left alone by default: a prefetch per element costs more than it
saves and keeps LLVM's loop vectorizer off the loop (benchmarks/vectorize.py). ``loop.prefetch`` never changes a value
and never fails (the interpreter ignores it; the CPU backend clamps the address
into the buffer), so the pass keeps every program's meaning whatever the offset.
"""

from __future__ import annotations

from ..ir.builder import Builder
from ..ir.core import OpResult, Value
from ..ir.module import FuncOp
from ..ir.types import INDEX
from .counted import CountedLoop, find_counted_loops

#: ops whose value depends only on their operands (an invariant offset may use them)
_PURE_INDEX = frozenset({"arith.constant", "arith.add", "arith.sub", "arith.mul", "arith.div",
                         "arith.rem", "arith.max", "arith.min", "arith.cast", "tensor.dim",
                         "loop.retype"})


def invariant(v: Value, loop: CountedLoop) -> bool:
    """Whether ``v`` has one value over the whole loop."""
    if not loop.defines(v):
        return True
    if not isinstance(v, OpResult) or v.op.name not in _PURE_INDEX:
        return False
    return all(invariant(o, loop) for o in v.op.operands)


def unit_stride(v: Value, loop: CountedLoop) -> bool:
    """Whether ``v`` is ``iv + u`` (or ``u + iv``, ``iv - u``) with ``u`` invariant."""
    if v is loop.iv:
        return True
    if not isinstance(v, OpResult) or v.op.name not in ("arith.add", "arith.sub"):
        return False
    a, b = v.op.operands
    if unit_stride(a, loop) and invariant(b, loop):
        return True
    return v.op.name == "arith.add" and invariant(a, loop) and unit_stride(b, loop)


def prefetch_func(func: FuncOp, distance: int, scalar: bool = False) -> int:
    """Insert prefetches into the innermost loops of ``func``; how many were inserted."""
    inserted = 0
    for loop in find_counted_loops(func):
        if not loop.is_innermost or loop.branch.attributes.get("remainder"):
            continue
        seen: set[tuple[int, int]] = set()
        for blk in loop.blocks[1:]:
            for op in list(blk.ops):
                if op.name != "loop.vload" and not (scalar and op.name == "loop.load"):
                    continue
                buf, off = op.operands
                if (id(buf), id(off)) in seen or not unit_stride(off, loop):
                    continue
                seen.add((id(buf), id(off)))
                b = Builder()
                b.set_insertion_point_before(op)
                b.loc = op.loc
                ahead = b.value("arith.add", [off, b.constant(distance, INDEX)], INDEX)
                b.create("loop.prefetch", [buf, ahead])
                inserted += 1
    return inserted


__all__ = ["invariant", "prefetch_func", "unit_stride"]
