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

``plan`` decides (static shapes, the batch a multiple of the threads, enough work
per slice); ``split_entry`` writes the entry Python calls, with the unsplit entry's
ABI (runtime.py), over the kernel compiled at the slice's shapes, whose own entry
(``SLICE_ENTRY``) takes a pool cell of its own:

    i32 @wia_entry(ptr %args)                 ; the whole batch
    i32 @wia_slice(ptr %args, ptr %cell)      ; one slice (runtime.entry_wrapper)

The entry runs the slices on the pool (``parallel_for`` over ``[0, THREADS)``, one
chunk each): slice ``s`` gets the batch inputs from ``s * B / THREADS`` on, the other
inputs whole, and writes each result into its part of the caller's buffer (the
copy-out destination, or one the entry allocates when the caller gave none). A
parallel loop inside a slice finds the pool busy and runs on its own thread.

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

from ...ir.types import IRType, TensorType
from ...passes.batch_axis import Separable
from ...records import record
from .parallel import new_worker, parallel_for
from .runtime import _declare, extent_base
from .types import I32, I64, PTR, itemsize

SLICE_ENTRY = "wia_slice"
#: the slices' pool cells, a cache line apart
CELLS_SYMBOL = "wia.arena.slice_pools"
_CELL_WORDS = 8
_ALIGN = 64


@record(frozen=True)
class BatchSplit:
    """Run a batch of ``batch`` as ``slices`` slices; ``inputs`` are split along axis 0,
    ``results`` are the whole batch's result shapes."""

    inputs: tuple[int, ...]
    batch: int
    slices: int
    results: tuple[tuple[int, ...], ...]

    def slice_shapes(self, shapes: Sequence[Sequence[int]]) -> list[list[int]]:
        """The inputs' shapes in one slice."""
        return [[self.batch // self.slices, *s[1:]] if i in self.inputs else list(s)
                for i, s in enumerate(shapes)]


def plan(found: Separable, shapes: Sequence[Sequence[int | None]], threads: int, min_work: int
         ) -> BatchSplit | None:
    """The split of a separable kernel's batch at ``shapes`` into ``threads`` slices,
    or None where it does not pay: one thread, shapes not all static, a batch that
    is not a multiple of the threads, an empty tensor, or less than ``min_work`` per
    slice (the work a parallel loop needs to pay for its hand-off, estimated by
    batch_axis.py)."""
    if threads < 2 or any(d is None or d == 0 for s in shapes for d in s) \
            or found.results is None or found.work is None:
        return None
    batch = shapes[found.inputs[0]][0]
    assert batch is not None
    if batch % threads or any(shapes[i][0] != batch for i in found.inputs) \
            or found.work < min_work * threads:
        return None
    return BatchSplit(found.inputs, batch, threads, found.results)


def _i(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


def _word(b: ir.IRBuilder, base: ir.Value, j: int | ir.Value) -> ir.Value:
    return b.gep(base, [j if isinstance(j, ir.Value) else _i(j)], source_etype=I64)


def _tensor_results(result_types: Sequence[IRType]) -> list[tuple[int, TensorType]]:
    """(result slot, type) of each result (all tensors in a split kernel)."""
    out, k = [], 0
    for t in result_types:
        assert isinstance(t, TensorType), "a separable kernel returns batched tensors"
        out.append((k, t))
        k += 1 + t.rank
    return out


def split_entry(mod: ir.Module, split: BatchSplit, param_types: Sequence[IRType],
                shapes: Sequence[Sequence[int]], result_types: Sequence[IRType],
                full_results: Sequence[TensorType], stateful: bool, out_of_memory: int,
                misplaced: int) -> None:
    """Define ``wia_entry`` over ``SLICE_ENTRY`` (both as described above);
    ``full_results``: the result types at the whole batch; ``out_of_memory``: the
    code to return when a result buffer cannot be allocated; ``misplaced``: when a
    slice's result is not its part of the buffer, of the planned shape (never, by
    batch_axis.py's shapes; checked, so a wrong plan is an error, not a write past
    a buffer)."""
    results = _tensor_results(result_types)
    n_slots = extent_base(param_types, result_types) + int(stateful)
    first_pair = len(param_types) + max(1, sum(1 + t.rank for _, t in results))
    full_bytes = [math.prod(t.shape) * itemsize(t.dtype) for t in full_results]  # type: ignore[arg-type]
    cells = ir.GlobalVariable(mod, ir.ArrayType(I64, _CELL_WORDS * split.slices), CELLS_SYMBOL)
    cells.linkage, cells.align = "internal", 64
    cells.initializer = ir.Constant(cells.value_type, None)
    worker = _slice_worker(mod, split, param_types, shapes, [slot for slot, _ in results], n_slots,
                           first_pair, full_bytes, cells, stateful, misplaced)

    fn = ir.Function(mod, ir.FunctionType(I32, [PTR]), "wia_entry")
    (args,) = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    ctx = b.alloca(I64, size=1 + len(results))
    b.store(b.ptrtoint(args, I64), _word(b, ctx, 0))
    aligned_alloc = _declare(mod, "aligned_alloc", PTR, [I64, I64])
    free = _declare(mod, "free", ir.VoidType(), [PTR])
    mine = []  # per result: the entry allocated its buffer
    failed: ir.Value = ir.Constant(ir.IntType(1), 0)
    for j, nbytes in enumerate(full_bytes):
        given = b.load(_word(b, args, first_pair + 2 * j), typ=I64)
        own = b.icmp_unsigned("==", given, _i(0))
        with b.if_then(own):
            fresh = b.call(aligned_alloc, [_i(_ALIGN), _i(-(-nbytes // _ALIGN) * _ALIGN)])
            b.store(b.ptrtoint(fresh, I64), _word(b, ctx, 1 + j))
        with b.if_then(b.not_(own)):
            b.store(given, _word(b, ctx, 1 + j))
        mine.append(own)
        failed = b.or_(failed, b.icmp_unsigned("==", b.load(_word(b, ctx, 1 + j), typ=I64), _i(0)))
    rc = b.alloca(I32)
    b.store(ir.Constant(I32, out_of_memory), rc)
    with b.if_then(b.not_(failed)):
        b.store(b.call(parallel_for(mod), [worker, ctx, _i(0), _i(split.slices), _i(1),
                                           _i(split.slices)]), rc)
    ok = b.icmp_signed("==", b.load(rc, typ=I32), ir.Constant(I32, 0))
    for j, ((slot, _), full) in enumerate(zip(results, full_results, strict=True)):
        buffer = b.load(_word(b, ctx, 1 + j), typ=I64)
        with b.if_then(ok):
            b.store(buffer, _word(b, args, len(param_types) + slot))
            for axis, extent in enumerate(full.shape):
                b.store(_i(extent), _word(b, args, len(param_types) + slot + 1 + axis))  # type: ignore[arg-type]
        with b.if_then(b.and_(b.not_(ok), b.and_(mine[j], b.icmp_unsigned("!=", buffer, _i(0))))):
            b.call(free, [b.inttoptr(buffer, PTR)])
    b.ret(b.load(rc, typ=I32))


def _misplaced(b: ir.IRBuilder, own: ir.Value, split: BatchSplit, slots: Sequence[int],
               n_inputs: int, first_pair: int) -> ir.Value:
    """``i1``: a slice's result is not at its destination or not of the slice's shape."""
    wrong: ir.Value = ir.Constant(ir.IntType(1), 0)
    for j, (slot, full) in enumerate(zip(slots, split.results, strict=True)):
        at = b.load(_word(b, own, n_inputs + slot), typ=I64)
        wrong = b.or_(wrong, b.icmp_unsigned("!=", at, b.load(_word(b, own, first_pair + 2 * j), typ=I64)))
        for axis, extent in enumerate((full[0] // split.slices, *full[1:])):
            got = b.load(_word(b, own, n_inputs + slot + 1 + axis), typ=I64)
            wrong = b.or_(wrong, b.icmp_unsigned("!=", got, _i(extent)))
    return wrong


def _slice_worker(mod: ir.Module, split: BatchSplit, param_types: Sequence[IRType],
                  shapes: Sequence[Sequence[int]], result_slots: Sequence[int], n_slots: int,
                  first_pair: int, full_bytes: Sequence[int], cells: ir.GlobalVariable,
                  stateful: bool, misplaced: int) -> ir.Function:
    """``i32 worker(ctx, lo, hi)``: slices ``[lo, hi)`` through ``SLICE_ENTRY``; ``ctx``
    holds the caller's argument array and each result's whole buffer."""
    slice_entry = mod.globals[SLICE_ENTRY]
    fn, b, words, lo, hi = new_worker(mod, "wia.batch_slices", 1 + len(full_bytes))
    args = b.inttoptr(words[0], PTR)
    own = b.alloca(I64, size=n_slots)
    slice_bytes = {i: math.prod(shapes[i]) // split.slices * itemsize(param_types[i].dtype)  # type: ignore[union-attr]
                   for i in split.inputs}
    loop, done = fn.append_basic_block("slice"), fn.append_basic_block("done")
    before = b.block
    b.cbranch(b.icmp_signed("<", lo, hi), loop, done)
    b.position_at_end(loop)
    s = b.phi(I64)
    s.add_incoming(lo, before)
    for i in range(len(param_types)):
        given = b.load(_word(b, args, i), typ=I64)
        if i in slice_bytes:
            given = b.add(given, b.mul(s, _i(slice_bytes[i])))
        b.store(given, _word(b, own, i))
    for k in range(len(param_types), first_pair):  # the result slots, written by the slice
        b.store(_i(0), _word(b, own, k))
    for j, nbytes in enumerate(full_bytes):
        part = nbytes // split.slices
        b.store(b.add(words[1 + j], b.mul(s, _i(part))), _word(b, own, first_pair + 2 * j))
        b.store(_i(part), _word(b, own, first_pair + 2 * j + 1))
    if stateful:  # the entry's state (prepacked.py): shared, published by compare-and-swap
        b.store(b.load(_word(b, args, n_slots - 1), typ=I64), _word(b, own, n_slots - 1))
    cell = b.gep(cells, [_i(0), b.mul(s, _i(_CELL_WORDS))], source_etype=cells.value_type)
    rc = b.call(slice_entry, [own, cell])
    with b.if_then(b.icmp_signed("!=", rc, ir.Constant(I32, 0))):
        b.ret(rc)
    with b.if_then(_misplaced(b, own, split, result_slots, len(param_types), first_pair)):
        b.ret(ir.Constant(I32, misplaced))
    nxt = b.add(s, _i(1))
    s.add_incoming(nxt, b.block)
    b.cbranch(b.icmp_signed("<", nxt, hi), loop, done)
    b.position_at_end(done)
    b.ret(ir.Constant(I32, 0))
    return fn
