"""Native runtime pieces of every kernel: the entry wrapper that Python calls, emitted
into each module, and the arena allocator, one helper per process (``arena_module``,
loaded by library.py as ``ARENA_SPEC``; modules declare it).

Memory plan: every buffer a kernel allocates (``loop.alloc``) comes from
``ARENA_ALLOC``, which records it (address and size) in a per-call arena: a growable
table of (pointer, bytes) pairs, its pair 0 a header, whose address, count and
capacity sit on the wrapper's stack frame. When the kernel returns (``ARENA_FINISH``),
the buffers returned as results belong to the caller (Python wraps or copies them
and frees them with libc ``free``); the others are kept for the next call, when they add up
to at most ``POOL_BYTES``: the table becomes the module's *pool* (the global
``POOL_SYMBOL``, taken by an atomic exchange when a call starts and given back by a
compare-and-swap when it ends, so calls from several threads never share one; a
call that finds it taken allocates as before). The next call's ``i``-th allocation
takes the pool's ``i``-th buffer when it has exactly the size (a steady-state call
makes the same allocations in the same order): it allocates only its outputs.
Buffers of the pool that a call does not take are freed at its end. On an error
everything is freed. So no path leaks, and no buffer outlives its call unless it
is an output or waits in the pool.

Entry ABI: ``i32 @wia_entry(ptr %args)``; ``%args`` is an i64 array holding,
per input, a data pointer (scalars: a pointer to the value), followed by the
result slots of the kernel (codegen.py; at least one), followed by a
(destination pointer, byte count) pair per tensor result for the optional
copy-out (``_copy_out``; zeros: none), followed by one extent per dynamic axis
of the inputs (``dynamic_axes``: input order, then axis order), followed, for an
entry with frozen inputs (prepacked.py), by the address of its state. An input axis
whose extent the specialization fixed is compiled in and has no slot, so a
fully static entry takes exactly the slots it always took; a shape-generic one
(backend.py) reads the others at run time.

Vector memory (``vector_load``/``vector_store``): every vector load and store the
CPU backend emits goes through these two, which take the alignment as a required
argument. A plain ``IRBuilder.load``/``store`` of a vector without ``align`` tells
LLVM the address is aligned to the whole vector (16 bytes for ``<16 x i8>``), and an
aligned instruction on a row of a NumPy array (``B + k*ldb``) faults: the alignment
is the element's size unless the address is provably aligned further (a packed
panel in a 64-byte aligned buffer, ``offset_align``). Masked load/store intrinsics
take their alignment as an operand, which the callers also set to what they know.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from llvmlite import ir

from ...ir.types import IRType, TensorType
from .library import ARENA_PREFIX
from .types import I1, I8, I32, I64, PTR, itemsize, scalar_type

HUGE_BYTES = 4 << 20
MADV_HUGEPAGE = 14  # Linux
#: The arena is six i64 slots on the wrapper's stack: the (pointer, bytes) table, its
#: count, its capacity, the entry's state (prepacked.py; 0 for an entry without one),
#: the pool this call took (0: none) and the pool's count.
ARENA_WORDS = 6
ARENA_STATE = 3
ARENA_POOL = 4
ARENA_POOL_COUNT = 5
#: A kernel module's pool of intermediate buffers kept between calls (a table, or 0).
POOL_SYMBOL = "wia.arena.pool"
#: The function Python calls (renamed per cache key when compiled: compile.py).
ENTRY = "wia_entry"
#: The most bytes of intermediates a kernel keeps for its next call; a call with more
#: frees them as it always did (a process with many kernels keeps at most this each).
POOL_BYTES = 32 << 20


def _declare(mod: ir.Module, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
    fn = mod.globals.get(name)
    if fn is None:
        fn = ir.Function(mod, ir.FunctionType(ret, args), name)
    return fn


def _checked_align(align: int) -> int:
    if not isinstance(align, int) or align < 1 or align & (align - 1):
        raise ValueError(f"a vector access needs an explicit power-of-two alignment, got {align!r}")
    return align


def vector_load(b: ir.IRBuilder, ptr: ir.Value, vt: ir.VectorType, align: int) -> ir.Value:
    """``load <vt>, ptr, align <align>``: ``align`` is what the address is known to be
    aligned to (the element size for an arbitrary element of a NumPy array)."""
    return b.load(ptr, typ=vt, align=_checked_align(align))


def vector_store(b: ir.IRBuilder, value: ir.Value, ptr: ir.Value, align: int) -> None:
    """``store <value>, ptr, align <align>`` (see ``vector_load``)."""
    b.store(value, ptr, align=_checked_align(align))


#: the alignment a non-temporal store needs (``stream_store``)
STREAM_ALIGN = 16


def stream_store(b: ir.IRBuilder, value: ir.Value, ptr: ir.Value, align: int) -> None:
    """A non-temporal store of the vector ``value`` (no read of its cache line first:
    loops/stream_stores.py) where ``ptr`` is 16-byte aligned, a plain one (``align``
    known) elsewhere. 16 rather than the vector's size: x86 writes a 16-byte aligned
    wider vector as 16-byte MOVNTPS halves, as fast here (16M f32 ``relu(a*b+c)``, one
    AMD Zen 3 thread: 25.6-29.9 GB/s, 26.9-29.2 fully aligned, 20.9-22.4 plain), and
    NumPy's large arrays start 16 bytes into a page, so the check passes for them. The
    check is one AND per store, predicted the same way all loop long. The caller
    fences (``store_fence``) before the data is handed to another thread."""
    size = value.type.count * _checked_align(align)
    if size < STREAM_ALIGN or size & (size - 1):  # no aligned form: a plain store
        vector_store(b, value, ptr, align)
        return
    offset = b.and_(b.ptrtoint(ptr, I64), ir.Constant(I64, STREAM_ALIGN - 1))
    with b.if_else(b.icmp_unsigned("==", offset, ir.Constant(I64, 0))) as (aligned, other):
        with aligned:
            store = b.store(value, ptr, align=STREAM_ALIGN)
            store.set_metadata("nontemporal", b.module.add_metadata([ir.Constant(I32, 1)]))
        with other:
            vector_store(b, value, ptr, align)


def store_fence(b: ir.IRBuilder) -> None:
    """x86's SFENCE: the non-temporal stores before it are visible to other threads
    before any store after it (they are weakly ordered: a pool's release of a chunk,
    an ordinary store, could overtake them)."""
    b.call(_declare(b.module, "llvm.x86.sse.sfence", ir.VoidType(), []), [])


def offset_align(base_align: int, offset_bytes: int) -> int:
    """The alignment provable for ``base + offset_bytes`` when ``base`` is aligned to
    ``base_align`` (a power of two)."""
    return base_align if offset_bytes == 0 else math.gcd(base_align, offset_bytes)


#: The arena's helper functions (library.py's ``ARENA_SPEC``: compiled once per process
#: and linked by symbol). Every kernel allocates through them and every entry and
#: parallel worker ends with them; written into each module they were ~250 of the
#: ~330 lines LLVM optimized for a small kernel, two thirds of its compile time.
ARENA_ALLOC = ARENA_PREFIX + "alloc"
ARENA_FINISH = ARENA_PREFIX + "finish"
ARENA_FREE = ARENA_PREFIX + "free"
ALLOC_TYPE = ir.FunctionType(PTR, [PTR, I64])
#: (arena, the module's pool cell, the results' addresses, their count, the call's code)
FINISH_TYPE = ir.FunctionType(ir.VoidType(), [PTR, PTR, PTR, I64, I32])
FREE_TYPE = ir.FunctionType(ir.VoidType(), [PTR])


def _arena_function(mod: ir.Module, name: str, ftype: ir.FunctionType) -> ir.Function:
    fn = mod.globals.get(name)
    if fn is None:
        fn = ir.Function(mod, ftype, name)
    return fn


def alloc_function(mod: ir.Module) -> ir.Function:
    """``ptr @wia.lib.arena.alloc(ptr %arena, i64 %bytes)``: 64-byte aligned, recorded in
    the arena; the pool's buffer at this position when it has this size."""
    fn = _arena_function(mod, ARENA_ALLOC, ALLOC_TYPE)
    fn.return_value.add_attribute("noalias")
    return fn


def arena_free_function(mod: ir.Module) -> ir.Function:
    """``void @wia.lib.arena.free(ptr %arena)``: every buffer of the arena and its table."""
    return _arena_function(mod, ARENA_FREE, FREE_TYPE)


def uses_arena(mod: ir.Module) -> bool:
    """Whether ``mod`` calls the arena's helper (then it must be loaded first)."""
    return any(name.startswith(ARENA_PREFIX) for name in mod.globals)


def arena_module(mod: ir.Module) -> None:
    """The arena's helper module: ``ARENA_ALLOC``, ``ARENA_FINISH`` and ``ARENA_FREE``."""
    _define_alloc(mod)
    _define_finish(mod)
    fn = ir.Function(mod, FREE_TYPE, ARENA_FREE)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    words = [b.gep(fn.args[0], [_i(i)], source_etype=I64) for i in range(ARENA_WORDS)]
    free_table(b, b.load(words[0], typ=PTR), b.load(words[1], typ=I64))
    b.ret_void()


def _define_alloc(mod: ir.Module) -> None:
    fn = ir.Function(mod, ALLOC_TYPE, ARENA_ALLOC)
    fn.return_value.add_attribute("noalias")
    arena, nbytes = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    got = b.alloca(PTR)
    size = b.and_(b.add(b.select(b.icmp_signed("<", nbytes, _i(1)), _i(1), nbytes), _i(63)), _i(-64))
    # Large buffers: 2 MiB aligned and advised to use huge pages (as NumPy does),
    # so first-touch page faults do not dominate streaming kernels.
    large = b.icmp_signed(">=", size, _i(HUGE_BYTES))
    align = b.select(large, _i(1 << 21), _i(64))
    size = b.select(large, b.and_(b.add(size, _i((1 << 21) - 1)), _i(-(1 << 21))), size)
    slots = [b.gep(arena, [_i(i)], source_etype=I64) for i in range(ARENA_WORDS)]
    count, cap = b.load(slots[1], typ=I64), b.load(slots[2], typ=I64)
    at = b.add(count, _i(1))  # this allocation's pair, in the pool as in the table
    pool, pool_count = b.load(slots[ARENA_POOL], typ=I64), b.load(slots[ARENA_POOL_COUNT], typ=I64)
    b.store(ir.Constant(PTR, None), got)
    with b.if_then(b.and_(b.icmp_unsigned("!=", pool, _i(0)), b.icmp_signed("<", count, pool_count))):
        pair = b.gep(b.inttoptr(pool, PTR), [b.mul(at, _i(2))], source_etype=I64)
        kept = b.load(pair, typ=I64)
        fits = b.and_(b.icmp_unsigned("!=", kept, _i(0)),
                      b.icmp_signed("==", b.load(b.gep(pair, [_i(1)], source_etype=I64), typ=I64), size))
        with b.if_then(fits):
            b.store(b.inttoptr(kept, PTR), got)
            b.store(_i(0), pair)  # taken: the pool no longer owns it
    with b.if_then(b.icmp_unsigned("==", b.load(got, typ=PTR), ir.Constant(PTR, None))):
        fresh = b.call(_declare(mod, "aligned_alloc", PTR, [I64, I64]), [align, size])
        with b.if_then(large):
            b.call(_declare(mod, "madvise", I32, [PTR, I64, I32]), [fresh, size, _i32(MADV_HUGEPAGE)])
        b.store(fresh, got)
    with b.if_then(b.icmp_signed("==", count, cap)):  # grow the table (pair 0 is its header)
        new_cap = b.add(b.mul(cap, _i(2)), _i(16))
        old = b.load(slots[0], typ=PTR)
        grown = b.call(_declare(mod, "realloc", PTR, [PTR, I64]),
                       [old, b.mul(b.add(new_cap, _i(1)), _i(16))])
        b.store(grown, slots[0])
        b.store(new_cap, slots[2])
    p = b.load(got, typ=PTR)
    pair = b.gep(b.load(slots[0], typ=PTR), [b.mul(at, _i(2))], source_etype=I64)
    b.store(b.ptrtoint(p, I64), pair)
    b.store(size, b.gep(pair, [_i(1)], source_etype=I64))
    b.store(at, slots[1])
    b.ret(p)


def _i(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


def _i32(v: int) -> ir.Constant:
    return ir.Constant(I32, v)


def pool_global(mod: ir.Module) -> ir.GlobalVariable:
    """The module's pool cell (``POOL_SYMBOL``): a table of kept buffers, or 0."""
    g = mod.globals.get(POOL_SYMBOL)
    if g is None:
        g = ir.GlobalVariable(mod, I64, POOL_SYMBOL)
        g.linkage = "internal"
        g.initializer = _i(0)
        g.align = 64
    return g


def for_range(b: ir.IRBuilder, lo: ir.Value, hi: ir.Value, step: int | ir.Value,
              body: Callable[[ir.Value], None], name: str = "l") -> None:
    """Emit ``for i in range(lo, hi, step): body(i)`` at the builder's position
    (``step`` > 0: a constant, or a run-time value)."""
    fn = b.function
    head, loop, done = (fn.append_basic_block(f"{name}.{s}") for s in ("head", "body", "done"))
    pre = b.block
    b.branch(head)
    b.position_at_end(head)
    i = b.phi(I64)
    i.add_incoming(lo, pre)
    b.cbranch(b.icmp_signed("<", i, hi), loop, done)
    b.position_at_end(loop)
    body(i)
    i.add_incoming(b.add(i, _i(step) if isinstance(step, int) else step), b.block)
    b.branch(head)
    b.position_at_end(done)


def for_pairs(b: ir.IRBuilder, table: ir.Value, count: ir.Value,
              body: Callable[[ir.IRBuilder, ir.Value], None]) -> None:
    """``body(b, pair)`` for the pairs 1..count of ``table`` (a pointer to i64 pairs)."""
    for_range(b, _i(1), b.add(count, _i(1)), 1,
              lambda i: body(b, b.gep(table, [b.mul(i, _i(2))], source_etype=I64)), "pairs")


def free_table(b: ir.IRBuilder, table: ir.Value, count: ir.Value) -> None:
    """Free every buffer of an arena table (null entries are skipped by ``free``) and
    the table."""
    free = _declare(b.module, "free", ir.VoidType(), [PTR])
    for_pairs(b, table, count, lambda bb, pair: bb.call(free, [bb.inttoptr(bb.load(pair, typ=I64), PTR)]))
    b.call(free, [table])


def dynamic_axes(param_types: Sequence[IRType],
                 shapes: Sequence[Sequence[int | None]]) -> list[tuple[int, int]]:
    """(input, axis) of every input extent read at run time: a tensor axis whose
    extent ``shapes`` leaves None, in slot order."""
    return [(i, axis) for i, (t, shape) in enumerate(zip(param_types, shapes, strict=True))
            if isinstance(t, TensorType) for axis, d in enumerate(shape) if d is None]


def extent_base(param_types: Sequence[IRType], result_types: Sequence[IRType]) -> int:
    """The slot of the first dynamic extent: after the inputs, the result slots and
    the copy-out pairs."""
    n_results = sum(1 + t.rank if isinstance(t, TensorType) else 1 for t in result_types)
    n_tensors = sum(isinstance(t, TensorType) for t in result_types)
    return len(param_types) + max(1, n_results) + 2 * n_tensors


def entry_wrapper(mod: ir.Module, kernel: ir.Function, param_types: Sequence[IRType],
                  shapes: Sequence[Sequence[int | None]], result_types: Sequence[IRType],
                  stateful: bool = False, name: str = ENTRY) -> ir.Function:
    """``i32 @wia_entry(ptr %args)``: unpack inputs, call the kernel, free the arena;
    ``stateful``: the last argument slot is the entry's state (the arena's fourth word).
    Under another ``name``, ``i32 @name(ptr %args, ptr %cell)``: the same with the
    pool of intermediates kept in ``cell`` instead of the module's (batch_split.py's
    slices, one cell each)."""
    own_cell = name != ENTRY
    fn = ir.Function(mod, ir.FunctionType(I32, [PTR, PTR] if own_cell else [PTR]), name)
    args = fn.args[0]
    cell = fn.args[1] if own_cell else pool_global(mod)
    entry = fn.append_basic_block("entry")
    b = ir.IRBuilder(entry)
    arena = b.alloca(I64, size=ARENA_WORDS)
    for i in range(ARENA_WORDS):
        b.store(ir.Constant(I64, 0), b.gep(arena, [ir.Constant(I64, i)], source_etype=I64))
    flat: list[ir.Value] = []
    next_extent = extent_base(param_types, result_types)
    for i, (t, shape) in enumerate(zip(param_types, shapes, strict=True)):
        raw = b.load(b.gep(args, [ir.Constant(I64, i)], source_etype=I64), typ=I64)
        ptr = b.inttoptr(raw, PTR)
        if isinstance(t, TensorType):
            flat.append(ptr)
            for d in shape:
                if d is None:  # a run-time extent, from its slot
                    slot = b.gep(args, [ir.Constant(I64, next_extent)], source_etype=I64)
                    flat.append(b.load(slot, typ=I64))
                    next_extent += 1
                else:
                    flat.append(ir.Constant(I64, d))
        else:
            st = scalar_type(t)
            v = b.load(ptr, typ=I8 if st == I1 else st)
            flat.append(b.trunc(v, I1) if st == I1 else v)
    if stateful:
        state = b.load(b.gep(args, [ir.Constant(I64, next_extent)], source_etype=I64), typ=I64)
        b.store(state, b.gep(arena, [ir.Constant(I64, ARENA_STATE)], source_etype=I64))
    # this call's pool (no other call can take it until it is given back)
    pool = b.atomic_rmw("xchg", cell, _i(0), "acquire")
    with b.if_then(b.icmp_unsigned("!=", pool, _i(0))):
        b.store(pool, b.gep(arena, [_i(ARENA_POOL)], source_etype=I64))
        b.store(b.load(b.inttoptr(pool, PTR), typ=I64), b.gep(arena, [_i(ARENA_POOL_COUNT)], source_etype=I64))
    results = b.gep(args, [ir.Constant(I64, len(param_types))], source_etype=I64)
    rc = b.call(kernel, [arena, *flat, results])
    n_slots = sum(1 + t.rank if isinstance(t, TensorType) else 1 for t in result_types)
    _copy_out(b, results, b.gep(results, [ir.Constant(I64, max(1, n_slots))], source_etype=I64),
              result_types, rc)
    _free_arena(b, arena, cell, results, result_types, rc)
    b.ret(rc)
    return fn


def _copy_out(b: ir.IRBuilder, results: ir.Value, dst: ir.Value, result_types: Sequence[IRType],
              rc: ir.Value) -> None:
    """Copy tensor results into caller buffers: per tensor result, the slot pair
    (pointer, bytes) after the result slots names a buffer (a fresh one for a small
    result, or the caller's output buffer); when it is non-null, the call succeeded,
    the result has exactly that many bytes and is not already there (computed in
    place, destinations.py), the result is copied there and its pointer slot
    rewritten to it (so the arena frees the original).
    Python then skips a ctypes ``memmove`` and ``free`` per result (call overhead)."""
    memcpy = b.module.declare_intrinsic("llvm.memcpy", [PTR, PTR, I64])
    ok = b.icmp_signed("==", rc, ir.Constant(I32, 0))
    k, j = 0, 0
    for t in result_types:
        if not isinstance(t, TensorType):
            k += 1
            continue
        slot = b.gep(results, [ir.Constant(I64, k)], source_etype=I64)
        target = b.load(b.gep(dst, [ir.Constant(I64, 2 * j)], source_etype=I64), typ=I64)
        cap = b.load(b.gep(dst, [ir.Constant(I64, 2 * j + 1)], source_etype=I64), typ=I64)
        with b.if_then(b.and_(ok, b.icmp_unsigned("!=", target, ir.Constant(I64, 0)))):
            nbytes: ir.Value = ir.Constant(I64, itemsize(t.dtype))
            for a in range(t.rank):
                extent = b.load(b.gep(results, [ir.Constant(I64, k + 1 + a)], source_etype=I64), typ=I64)
                nbytes = b.mul(nbytes, extent)
            src = b.load(slot, typ=I64)
            # not when the kernel computed the result in the buffer (destinations.py)
            copy = b.and_(b.icmp_signed("==", nbytes, cap), b.icmp_unsigned("!=", src, target))
            with b.if_then(copy):
                b.call(memcpy, [b.inttoptr(target, PTR), b.inttoptr(src, PTR), nbytes,
                                ir.Constant(I1, 0)])
                b.store(target, slot)
        k += 1 + t.rank
        j += 1


def _free_arena(b: ir.IRBuilder, arena: ir.Value, cell: ir.Value, results: ir.Value,
                result_types: Sequence[IRType], rc: ir.Value) -> None:
    """The end of a call (``ARENA_FINISH``), given the pool's cell and the addresses of
    the tensor results."""
    mod = b.module
    kept: list[ir.Value] = []
    k = 0
    for t in result_types:
        if isinstance(t, TensorType):
            kept.append(b.load(b.gep(results, [_i(k)], source_etype=I64), typ=I64))
            k += 1 + t.rank
        else:
            k += 1
    table = b.alloca(I64, size=max(1, len(kept)))
    for j, address in enumerate(kept):
        b.store(address, b.gep(table, [_i(j)], source_etype=I64))
    b.call(_arena_function(mod, ARENA_FINISH, FINISH_TYPE), [arena, cell, table, _i(len(kept)), rc])


def _define_finish(mod: ir.Module) -> None:
    """``ARENA_FINISH``: the results leave the table (the caller owns them), the buffers
    of the pool this call did not take are freed, and the table becomes the pool when
    the call succeeded, kept at most POOL_BYTES and the pool cell is empty; else its
    buffers are freed too (the results as well, after an error)."""
    fn = ir.Function(mod, FINISH_TYPE, ARENA_FINISH)
    arena, cell, kept, n_kept, rc = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    ok = b.icmp_signed("==", rc, ir.Constant(I32, 0))
    word = [b.gep(arena, [_i(i)], source_etype=I64) for i in range(ARENA_WORDS)]
    pool = b.load(word[ARENA_POOL], typ=I64)
    with b.if_then(b.icmp_unsigned("!=", pool, _i(0))):
        free_table(b, b.inttoptr(pool, PTR), b.load(word[ARENA_POOL_COUNT], typ=I64))
    table = b.load(word[0], typ=PTR)
    count = b.load(word[1], typ=I64)
    total = b.alloca(I64)
    b.store(_i(0), total)
    is_result = b.alloca(I1)

    def leave(bb: ir.IRBuilder, pair: ir.Value) -> None:  # a result is the caller's now
        p = bb.load(pair, typ=I64)
        bb.store(ir.Constant(I1, 0), is_result)
        for_range(bb, _i(0), n_kept, 1, lambda j: bb.store(
            bb.or_(bb.load(is_result, typ=I1), bb.icmp_unsigned(
                "==", p, bb.load(bb.gep(kept, [j], source_etype=I64), typ=I64))), is_result), "kept")
        out = bb.and_(bb.load(is_result, typ=I1), ok)
        with bb.if_then(out):
            bb.store(_i(0), pair)
        with bb.if_then(bb.not_(out)):
            size = bb.load(bb.gep(pair, [_i(1)], source_etype=I64), typ=I64)
            bb.store(bb.add(bb.load(total, typ=I64), size), total)
    with b.if_then(b.icmp_unsigned("!=", table, ir.Constant(PTR, None))):
        for_pairs(b, table, count, leave)
        keep = b.and_(ok, b.icmp_signed("<=", b.load(total, typ=I64), _i(POOL_BYTES)))
        pooled = b.alloca(I1)
        b.store(ir.Constant(I1, 0), pooled)
        with b.if_then(keep):
            b.store(count, table)  # the header: how many pairs
            pair = b.cmpxchg(cell, _i(0), b.ptrtoint(table, I64), "acq_rel", "monotonic")
            b.store(b.extract_value(pair, 1), pooled)
        with b.if_then(b.not_(b.load(pooled, typ=I1))):
            free_table(b, table, count)
    b.ret_void()
