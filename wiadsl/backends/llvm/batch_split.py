"""A batch as slices, one per thread, each through the whole kernel.

A batch-separable kernel (passes/batch_axis.py) computes each index of its batch
inputs' axis 0 on its own. Compiled for a batch of ``B`` on a host of ``THREADS``
CPUs, its parallel loops hand data between the threads at every layer: a layer's
chunk reads what another thread wrote, and each hand-off waits for the slowest
chunk. Where the host's two CPUs sit in different core complexes a cache line
takes ~400 ns to cross (MobileNetV2, batch 4, 2 threads: 330 us, slower than one
thread's 260). Run instead as ``THREADS`` slices of ``B / THREADS``, each through
the whole kernel on one thread, nothing crosses and there is one hand-off per
call.

``plan`` decides: for static shapes, a batch that is a multiple of the threads
with enough work per slice, compiled at one slice's shapes; for shape-generic code
whose only run-time extent is the batch (the ``auto`` shape policy's code once the
batch has varied), any batch, the slices' rows as even as whole rows go, and a batch
too small for the threads run whole. ``split_entry`` writes the entry Python
calls, with the unsplit entry's ABI (runtime.py), over that code, whose own entry
(``SLICE_ENTRY``) takes a pool cell of its own:

    i32 @wia_entry(ptr %args)                 ; the whole batch
    i32 @wia_slice(ptr %args, ptr %cell)      ; one slice (runtime.entry_wrapper)

The entry runs the slices on the pool (``parallel_for`` over ``[0, S)``, one chunk
each): slice ``s`` gets the batch inputs' rows ``[s B / S, (s + 1) B / S)``, the
other inputs whole, and writes each result into its part of the caller's buffer
(the copy-out destination, or one the entry allocates when the caller gave none of
the result's size). A parallel loop inside a slice finds the pool busy and runs on
its own thread.

Invariants:
- Slice ``s`` keeps its intermediates between calls in cell ``s`` of
  ``CELLS_SYMBOL``, so slices never take each other's buffers and a steady-state call
  allocates only its outputs, as an unsplit one.
- The result slots are written only when every slice succeeded; on an error the
  buffers the entry allocated are freed and the first failing slice's code is
  returned (the unsplit kernel's message for it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from llvmlite import ir

from ...ir.module import FuncOp
from ...ir.types import IRType, TensorType
from ...passes.batch_axis import NotSeparable, separable
from ...records import record
from .parallel import new_worker, parallel_for
from .runtime import _declare, dynamic_axes, extent_base
from .types import I32, I64, PTR, itemsize

SLICE_ENTRY = "wia_slice"
#: the slices' pool cells, a cache line apart
CELLS_SYMBOL = "wia.arena.slice_pools"
_CELL_WORDS = 8
_ALIGN = 64


@record(frozen=True)
class BatchSplit:
    """Run a batch as ``slices`` slices of (nearly) equal rows: ``inputs`` are split
    along axis 0; ``rows``: each result's extents after its batch axis. ``batch``:
    the batch the code is compiled for, or None for shape-generic code, which reads
    it at run time and runs a batch below ``min_batch`` whole (as one slice)."""

    inputs: tuple[int, ...]
    batch: int | None
    slices: int
    rows: tuple[tuple[int, ...], ...]
    min_batch: int = 0

    def slice_shapes(self, shapes: Sequence[Sequence[int | None]]) -> list[list[int | None]]:
        """The inputs' shapes the slices' code is compiled for."""
        if self.batch is None:  # generic code serves every slice's rows
            return [list(s) for s in shapes]
        return [[self.batch // self.slices, *s[1:]] if i in self.inputs else list(s)
                for i, s in enumerate(shapes)]


def plan(func: FuncOp, frozen: frozenset[int], shapes: Sequence[Sequence[int | None]],
         threads: int, min_work: int) -> BatchSplit | None:
    """The split of ``func``'s batch at ``shapes`` (a pattern: a None batch extent is
    read at run time) into ``threads`` slices, or None where the kernel is not
    separable or it does not pay: one thread, an extent other than the batch's
    read at run time, an empty tensor, a static batch that is not a multiple of the
    threads or with less than ``min_work`` per slice (the work a parallel loop needs
    to pay for its hand-off, estimated by batch_axis.py). Generic code runs whole
    the batches too small for that."""
    if threads < 2:
        return None
    try:
        found = separable(func, frozen, shapes)
        batch = shapes[found.inputs[0]][0]
        if batch is None:  # sizes at a batch of 2 (1 could pass for a broadcast)
            found = separable(func, frozen, [[2, *s[1:]] if i in found.inputs else s
                                             for i, s in enumerate(shapes)])
    except NotSeparable:
        return None
    others = [d for i, s in enumerate(shapes) for axis, d in enumerate(s)
              if axis or i not in found.inputs]
    if None in others or 0 in others or found.results is None or not found.work \
            or any(shapes[i][0] != batch for i in found.inputs):
        return None
    rows = tuple(r[1:] for r in found.results)
    if batch is not None:
        if batch == 0 or batch % threads or found.work < min_work * threads:
            return None
        return BatchSplit(found.inputs, batch, threads, rows)
    per_image = max(1, found.work // 2)
    return BatchSplit(found.inputs, None, threads, rows, threads * max(1, -(-min_work // per_image)))


def _i(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


def _word(b: ir.IRBuilder, base: ir.Value, j: int | ir.Value) -> ir.Value:
    return b.gep(base, [j if isinstance(j, ir.Value) else _i(j)], source_etype=I64)


@record(frozen=True)
class _Slots:
    """Where the entry ABI's words are (runtime.py), for the kernel being split."""

    inputs: int                     #: the inputs' pointers come first
    results: list[int]              #: each result's slot (its pointer, then its extents)
    first_pair: int                 #: the first result's (destination, bytes) pair
    batch_extents: list[int]        #: the run-time batch extents of the batch inputs
    total: int                      #: every slot (the state's, last, included)
    in_rows: dict[int, int]         #: bytes of one batch row of each batch input
    out_rows: list[int]             #: bytes of one batch row of each result


def _slots(split: BatchSplit, param_types: Sequence[IRType], shapes: Sequence[Sequence[int | None]],
           result_types: Sequence[IRType], stateful: bool) -> _Slots:
    results, k = [], 0
    for t in result_types:
        assert isinstance(t, TensorType), "a separable kernel returns batched tensors"
        results.append(k)
        k += 1 + t.rank
    dynamic = dynamic_axes(param_types, shapes)
    base = extent_base(param_types, result_types)
    batch_extents = [base + j for j, (i, axis) in enumerate(dynamic) if i in split.inputs and axis == 0]
    in_rows = {i: math.prod(shapes[i][1:]) * itemsize(param_types[i].dtype)  # type: ignore[misc, union-attr]
               for i in split.inputs}
    out_rows = [math.prod(r) * itemsize(t.dtype)  # type: ignore[union-attr]
                for r, t in zip(split.rows, result_types, strict=True)]
    return _Slots(len(param_types), results, len(param_types) + max(1, k), batch_extents,
                  base + len(dynamic) + int(stateful), in_rows, out_rows)


def split_entry(mod: ir.Module, split: BatchSplit, param_types: Sequence[IRType],
                shapes: Sequence[Sequence[int | None]], result_types: Sequence[IRType],
                stateful: bool, out_of_memory: int, misplaced: int) -> None:
    """Define ``wia_entry`` over ``SLICE_ENTRY`` (both as described above) for the
    kernel compiled at the pattern ``shapes``; ``out_of_memory``: the code to return
    when a result buffer cannot be allocated; ``misplaced``: when a slice's result is
    not its part of the buffer, of the planned shape (never, by batch_axis.py's
    shapes; checked, so a wrong plan is an error, not a write past a buffer)."""
    slots = _slots(split, param_types, shapes, result_types, stateful)
    cells = ir.GlobalVariable(mod, ir.ArrayType(I64, _CELL_WORDS * split.slices), CELLS_SYMBOL)
    cells.linkage, cells.align = "internal", 64
    cells.initializer = ir.Constant(cells.value_type, None)
    worker = _slice_worker(mod, split, slots, cells, misplaced)
    slice_entry = mod.globals[SLICE_ENTRY]

    fn = ir.Function(mod, ir.FunctionType(I32, [PTR]), "wia_entry")
    (args,) = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    ctx, rc = b.alloca(I64, size=2 + len(slots.results)), b.alloca(I32)
    if split.batch is None:
        batch = b.load(_word(b, args, slots.batch_extents[0]), typ=I64)
        with b.if_then(b.icmp_signed("<", batch, _i(split.min_batch))):  # too small: whole
            b.ret(b.call(slice_entry, [args, _cell(b, cells, _i(0))]))
    else:
        batch = _i(split.batch)
    b.store(b.ptrtoint(args, I64), _word(b, ctx, 0))
    b.store(batch, _word(b, ctx, 1))
    mine, failed = _result_buffers(b, slots, args, ctx, batch)
    b.store(ir.Constant(I32, out_of_memory), rc)
    with b.if_then(b.not_(failed)):
        b.store(b.call(parallel_for(mod), [worker, ctx, _i(0), _i(split.slices), _i(1),
                                           _i(split.slices)]), rc)
    ok = b.icmp_signed("==", b.load(rc, typ=I32), ir.Constant(I32, 0))
    free = _declare(mod, "free", ir.VoidType(), [PTR])
    for j, (slot, rows) in enumerate(zip(slots.results, split.rows, strict=True)):
        buffer = b.load(_word(b, ctx, 2 + j), typ=I64)
        with b.if_then(ok):  # the whole batch's result
            for k, word in enumerate((buffer, batch, *map(_i, rows))):
                b.store(word, _word(b, args, slots.inputs + slot + k))
        with b.if_then(b.and_(b.not_(ok), b.and_(mine[j], b.icmp_unsigned("!=", buffer, _i(0))))):
            b.call(free, [b.inttoptr(buffer, PTR)])
    b.ret(b.load(rc, typ=I32))


def _cell(b: ir.IRBuilder, cells: ir.GlobalVariable, s: ir.Value) -> ir.Value:
    """Slice ``s``'s pool cell."""
    return b.gep(cells, [_i(0), b.mul(s, _i(_CELL_WORDS))], source_etype=cells.value_type)


def _result_buffers(b: ir.IRBuilder, slots: _Slots, args: ir.Value, ctx: ir.Value,
                    batch: ir.Value) -> tuple[list[ir.Value], ir.Value]:
    """Each result's whole buffer into ``ctx`` (from word 2): the caller's destination
    when it has the result's size, else a fresh one. (per result: whether it is
    fresh, and whether any allocation failed)"""
    aligned_alloc = _declare(b.module, "aligned_alloc", PTR, [I64, I64])
    mine = []
    failed: ir.Value = ir.Constant(ir.IntType(1), 0)
    for j, row in enumerate(slots.out_rows):
        nbytes = b.mul(batch, _i(row))
        given = b.load(_word(b, args, slots.first_pair + 2 * j), typ=I64)
        cap = b.load(_word(b, args, slots.first_pair + 2 * j + 1), typ=I64)
        own = b.or_(b.icmp_unsigned("==", given, _i(0)), b.icmp_unsigned("!=", cap, nbytes))
        with b.if_else(own) as (fresh, theirs):
            with fresh:
                rounded = b.and_(b.add(nbytes, _i(_ALIGN - 1)), _i(-_ALIGN))
                got = b.call(aligned_alloc, [_i(_ALIGN), b.select(b.icmp_unsigned("==", rounded, _i(0)),
                                                                   _i(_ALIGN), rounded)])
                b.store(b.ptrtoint(got, I64), _word(b, ctx, 2 + j))
            with theirs:
                b.store(given, _word(b, ctx, 2 + j))
        mine.append(own)
        failed = b.or_(failed, b.icmp_unsigned("==", b.load(_word(b, ctx, 2 + j), typ=I64), _i(0)))
    return mine, failed


def _slice_worker(mod: ir.Module, split: BatchSplit, slots: _Slots, cells: ir.GlobalVariable,
                  misplaced: int) -> ir.Function:
    """``i32 worker(ctx, lo, hi)``: slices ``[lo, hi)`` through ``SLICE_ENTRY``, slice
    ``s`` on rows ``[s B / S, (s + 1) B / S)``; ``ctx`` holds the caller's argument
    array, the batch ``B`` and each result's whole buffer."""
    slice_entry = mod.globals[SLICE_ENTRY]
    fn, b, words, lo, hi = new_worker(mod, "wia.batch_slices", 2 + len(slots.results))
    args, batch = b.inttoptr(words[0], PTR), words[1]
    own = b.alloca(I64, size=slots.total)
    loop, done = fn.append_basic_block("slice"), fn.append_basic_block("done")
    before = b.block
    b.cbranch(b.icmp_signed("<", lo, hi), loop, done)
    b.position_at_end(loop)
    s = b.phi(I64)
    s.add_incoming(lo, before)
    first = b.sdiv(b.mul(s, batch), _i(split.slices))
    count = b.sub(b.sdiv(b.mul(b.add(s, _i(1)), batch), _i(split.slices)), first)
    for k in range(slots.total):  # the caller's words: other inputs, the state
        b.store(b.load(_word(b, args, k), typ=I64), _word(b, own, k))
    for i, row in slots.in_rows.items():
        b.store(b.add(b.load(_word(b, args, i), typ=I64), b.mul(first, _i(row))), _word(b, own, i))
    for k in range(slots.inputs, slots.first_pair):  # the result slots, written by the slice
        b.store(_i(0), _word(b, own, k))
    for j, row in enumerate(slots.out_rows):  # its part of each result's buffer
        b.store(b.add(words[2 + j], b.mul(first, _i(row))), _word(b, own, slots.first_pair + 2 * j))
        b.store(b.mul(count, _i(row)), _word(b, own, slots.first_pair + 2 * j + 1))
    for k in slots.batch_extents:
        b.store(count, _word(b, own, k))
    rc = b.call(slice_entry, [own, _cell(b, cells, s)])
    with b.if_then(b.icmp_signed("!=", rc, ir.Constant(I32, 0))):
        b.ret(rc)
    with b.if_then(_misplaced(b, own, split, slots, count)):
        b.ret(ir.Constant(I32, misplaced))
    nxt = b.add(s, _i(1))
    s.add_incoming(nxt, b.block)
    b.cbranch(b.icmp_signed("<", nxt, hi), loop, done)
    b.position_at_end(done)
    b.ret(ir.Constant(I32, 0))
    return fn


def _misplaced(b: ir.IRBuilder, own: ir.Value, split: BatchSplit, slots: _Slots,
               count: ir.Value) -> ir.Value:
    """``i1``: a slice's result is not at its destination or not of the slice's shape."""
    wrong: ir.Value = ir.Constant(ir.IntType(1), 0)
    for j, (slot, rows) in enumerate(zip(slots.results, split.rows, strict=True)):
        at = slots.inputs + slot
        given = b.load(_word(b, own, slots.first_pair + 2 * j), typ=I64)
        for k, want in enumerate((given, count, *map(_i, rows))):
            wrong = b.or_(wrong, b.icmp_unsigned("!=", b.load(_word(b, own, at + k), typ=I64), want))
    return wrong
