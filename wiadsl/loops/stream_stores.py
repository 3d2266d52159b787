"""The loop-level ``stream-stores`` pass: a loop that streams a buffer larger than the
caches writes it with non-temporal stores.

An ordinary store first reads the line it writes into the cache (a read for ownership),
so a loop like ``y = relu(a * b + c)`` moves 20 bytes per element for the 16 it needs;
and a buffer larger than the last-level cache is gone from it by the time anyone reads
it again anyway. A non-temporal store writes the line without reading it
(measured, 16M f32 ``relu(a*b+c)`` into a caller's buffer, AMD Zen 3 with a 32 MiB L3,
alternating processes: 11.1-11.3 -> 9.1-9.7 ms at one thread, 7.7-8.1 -> 6.7-7.3 at two).

For each innermost loop (``vectorize.candidate``) that stores to a buffer of at
least ``bytes`` (the backend passes its last-level cache's size) which its function
never loads (no read-modify-write, and no later loop of the function reads it back),
the loop is vectorized (vectorize.py, ``width`` lanes, ``INTERLEAVE`` bodies per
iteration; a loop that does not qualify stays as it is) and the vector stores into
those buffers get the unit attribute ``nontemporal``. A buffer sized at run time is
checked there: the vector loop runs only when it is that large, else the original loop
does, unchanged (``_version``). What the attribute means is the backend's: the CPU
emits a non-temporal store where the address is 16-byte aligned (else a plain one:
runtime.py's ``stream_store``) and a store fence before its function returns, so that
the stores are visible before the pool hands the chunk back. LLVM's own vectorizer
cannot do this: it leaves a loop scalar when its stores carry ``!nontemporal`` at
element alignment.
"""

from __future__ import annotations

import math

from ..dtypes import DType
from ..ir.builder import Builder
from ..ir.core import Operation, Value
from ..ir.module import FuncOp, ModuleOp
from ..ir.types import INDEX, ScalarType, TensorType
from .counted import CountedLoop, find_counted_loops
from .vectorize import buffer_origin, candidate, may_alias, vectorize_counted

NONTEMPORAL = "nontemporal"
#: vector bodies per iteration: two streams of loads in flight, as LLVM's own
#: vectorizer interleaves the loops it vectorizes (this one it is not given)
INTERLEAVE = 2
_LOADS = ("loop.load", "loop.vload")


def _element_bytes(t: TensorType) -> int:
    return max(t.dtype.bits // 8, 1)


def static_bytes(buffer: Value) -> int | None:
    """The size of a buffer with a static type; None for a run-time one."""
    t = buffer.type
    if not isinstance(t, TensorType) or any(d is None for d in t.shape):
        return None
    return math.prod(d for d in t.shape if d is not None) * _element_bytes(t)


def _small(buffer: Value, min_bytes: int) -> bool:
    """Whether ``buffer`` has a static size under ``min_bytes``."""
    size = static_bytes(buffer)
    return size is not None and size < min_bytes


def stream_stores(func: FuncOp, module: ModuleOp | None, min_bytes: int, width: int) -> int:
    """Vectorize ``func``'s loops that stream a large buffer and mark their stores into
    it ``nontemporal``; how many loops. (A function that stores only into buffers known
    to be small is left before any analysis: most of a model's, whose loops were a
    tenth of ResNet-18's loop passes.)"""
    if not any(op.name == "loop.store" and not _small(op.operands[1], min_bytes) for op in func.walk()):
        return 0
    read = [buffer_origin(op.operands[0], func, module) for op in func.walk() if op.name in _LOADS]

    def streamed(store: Operation) -> bool:
        if _small(store.operands[1], min_bytes):
            return False
        origin = buffer_origin(store.operands[1], func, module)
        return origin is not None and not any(may_alias(origin, r) for r in read)

    done = 0
    for loop in find_counted_loops(func):
        if not candidate(loop):
            continue
        stores = [op for blk in loop.blocks for op in blk.ops if op.name == "loop.store"]
        targets = {id(op.operands[1]): op.operands[1] for op in stores if streamed(op)}
        sized_at_run_time = [t for t in targets.values() if static_bytes(t) is None]
        if not targets or (sized_at_run_time and (loop.iters or loop.trip_count() is not None)):
            continue
        entry = loop.preheader.terminator
        if not vectorize_counted(loop, func, module, width, interleave=INTERLEAVE):
            continue
        for op in func.walk():
            if op.name == "loop.vstore" and id(op.operands[1]) in targets:
                op.attributes[NONTEMPORAL] = True
        if sized_at_run_time:
            _version(loop, entry, sized_at_run_time, min_bytes)
        done += 1
    return done


def _version(loop: CountedLoop, entry: Operation | None, buffers: list[Value], min_bytes: int) -> None:
    """Buffers whose size is known only at run time: the vector loop runs when one of
    them has ``min_bytes`` or more, else the scalar loop runs the whole range (as it
    would have without this pass: LLVM vectorizes it). ``entry``: the branch into the
    vector loop (``vectorize_loop`` kept the loop's entry edge and retargeted it)."""
    assert entry is not None and entry.name == "cf.br"
    b = Builder()
    b.set_insertion_point_before(entry)
    b.loc = entry.loc
    big: Value | None = None
    for buf in buffers:
        t = buf.type
        assert isinstance(t, TensorType)
        size: Value = b.constant(_element_bytes(t), INDEX)
        for axis in range(t.rank):
            size = b.value("arith.mul", [size, b.value("tensor.dim", [buf], INDEX, {"axis": axis})], INDEX)
        at_least = b.value("arith.cmpi", [size, b.constant(min_bytes, INDEX)], ScalarType(DType.BOOL),
                           {"predicate": "sge"})
        big = at_least if big is None else b.value("arith.or", [big, at_least], ScalarType(DType.BOOL))
    assert big is not None
    vector = entry.successors[0]
    b.cond_br(big, vector.block, list(vector.args), loop.header, [loop.lo])
    entry.erase()


__all__ = ["NONTEMPORAL", "static_bytes", "stream_stores"]
