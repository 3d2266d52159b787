"""Per-thread scratch buffers: the packing memory of the gemm, gemv, conv and int8 gemm
helpers, kept by each thread between calls instead of allocated and freed per call.

    ptr  @wia.lib.scratch(i32 %slot, i64 %bytes)      ; at least ``bytes``, 64-byte aligned
    void @wia.lib.scratch.done(i32 %slot, ptr %buf)   ; the caller is done with ``buf``

One helper per process (library.py loads it like the gemm helpers; objects that call
it list ``SCRATCH_SPEC`` in their libraries, and ahead-of-time outputs link it in).
Each thread owns a table of ``SLOTS`` (capacity, buffer) pairs under one pthread
key; ``scratch`` returns the slot's buffer, replacing it by a larger one when the
request outgrows it, and ``done`` keeps it. So a steady-state call of a compiled
model allocates nothing for packing (issue 19: only its outputs).

Invariants:
- A slot serves one user at a time on its thread: each user (``SLOT_*``) takes its
  buffer, uses it and calls ``done`` before returning, and no user calls another
  user of the same slot in between (conv_wino{m}_raw holds SLOT_CONV_WEIGHT while its
  workers, on this thread too, use the pack and tile slots).
- The memory a thread keeps is, per slot, the largest request it made; a thread's
  table and buffers are freed when it exits (the key's destructor). The pool's
  workers live as long as the process.
- Where the key cannot be made (the process ran out of pthread keys) or the table
  cannot be allocated, ``scratch`` allocates a fresh buffer and ``done`` frees it:
  the old per-call behaviour, never a failure of its own. An allocation that fails
  returns null, as ``aligned_alloc`` does.
- The key is made once, by whichever thread comes first (an atomic state word: 0 new,
  1 being made, 2 made, 3 failed); the others wait for the word to settle.
"""

from __future__ import annotations

from llvmlite import ir

from .library import SCRATCH_SPEC, SCRATCH_SYMBOL
from .types import I32, I64, PTR

DONE_SYMBOL = "wia.lib.scratch.done"

SLOT_GEMM_PACK = 0      #: gemm.rows: the panels of B for one K block
SLOT_GEMV_PARTIAL = 1   #: gemv.split: the parts' partial sums
SLOT_CONV_PACK = 2      #: conv: one pixel block's patch panels
SLOT_QGEMM_A = 3        #: int8 gemm: A's packed rows
SLOT_QGEMM_B = 4        #: int8 gemm: B's packed k block
SLOT_CONV_TILE = 5      #: conv_rows: a chunk's tile of the transposed output
SLOT_CONV_WEIGHT = 6    #: conv_wino{m}_raw: a call's transformed weight (its workers read it)
SLOTS = 7

SCRATCH_TYPE = ir.FunctionType(PTR, [I32, I64])
DONE_TYPE = ir.FunctionType(ir.VoidType(), [I32, PTR])
_NEW, _MAKING, _MADE, _FAILED = 0, 1, 2, 3


def _i(v: int, t: ir.IntType = I64) -> ir.Constant:
    return ir.Constant(t, v)


def _declare(mod: ir.Module, name: str, ftype: ir.FunctionType) -> ir.Function:
    fn = mod.globals.get(name)
    return fn if fn is not None else ir.Function(mod, ftype, name)


def scratch(mod: ir.Module, b: ir.IRBuilder, libraries: list | None, slot: int,
            nbytes: ir.Value) -> ir.Value:
    """A call of ``wia.lib.scratch``: this thread's buffer ``slot`` of ``nbytes`` or more.
    ``libraries`` (a kernel module's helper specs) gets ``SCRATCH_SPEC`` when given."""
    if libraries is not None and SCRATCH_SPEC not in libraries:
        libraries.append(dict(SCRATCH_SPEC))
    return b.call(_declare(mod, SCRATCH_SYMBOL, SCRATCH_TYPE), [_i(slot, I32), nbytes])


def scratch_done(mod: ir.Module, b: ir.IRBuilder, slot: int, buf: ir.Value) -> None:
    """A call of ``wia.lib.scratch.done`` for a buffer ``scratch`` gave."""
    b.call(_declare(mod, DONE_SYMBOL, DONE_TYPE), [_i(slot, I32), buf])


class _ScratchModule:
    """Builds the helper's functions into ``mod``."""

    def __init__(self, mod: ir.Module):
        self.mod = mod
        # pthread_key_t is an unsigned int on Linux (glibc, musl), an unsigned long elsewhere
        self.key_t = I32 if "linux" in (mod.triple or "linux") else I64
        self.state = self._global("wia.lib.scratch.state", I32)
        self.key = self._global("wia.lib.scratch.key", self.key_t)
        self.alloc = _declare(mod, "aligned_alloc", ir.FunctionType(PTR, [I64, I64]))
        self.free = _declare(mod, "free", ir.FunctionType(ir.VoidType(), [PTR]))
        self.calloc = _declare(mod, "calloc", ir.FunctionType(PTR, [I64, I64]))
        self.get = _declare(mod, "pthread_getspecific", ir.FunctionType(PTR, [self.key_t]))
        self.set = _declare(mod, "pthread_setspecific", ir.FunctionType(I32, [self.key_t, PTR]))
        self.create = _declare(mod, "pthread_key_create", ir.FunctionType(I32, [PTR, PTR]))

    def _global(self, name: str, t: ir.Type) -> ir.GlobalVariable:
        g = ir.GlobalVariable(self.mod, t, name)
        g.linkage = "internal"
        g.initializer = ir.Constant(t, 0)
        return g

    def release(self) -> ir.Function:
        """The key's destructor: free a finished thread's buffers and table."""
        fn = ir.Function(self.mod, ir.FunctionType(ir.VoidType(), [PTR]), "wia.lib.scratch.release")
        fn.linkage = "internal"
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        table = fn.args[0]
        for s in range(SLOTS):
            b.call(self.free, [b.load(self._buf_at(b, table, s), typ=PTR)])
        b.call(self.free, [table])
        b.ret_void()
        return fn

    @staticmethod
    def _buf_at(b: ir.IRBuilder, table: ir.Value, slot: ir.Value | int) -> ir.Value:
        index = b.add(b.mul(b.zext(slot, I64) if isinstance(slot, ir.Value) else _i(slot), _i(2)),
                      _i(1))
        return b.gep(table, [index], source_etype=PTR)

    @staticmethod
    def _cap_at(b: ir.IRBuilder, table: ir.Value, slot: ir.Value) -> ir.Value:
        return b.gep(table, [b.mul(b.zext(slot, I64), _i(2))], source_etype=I64)

    def key_ready(self, b: ir.IRBuilder, release: ir.Function) -> ir.Value:
        """i1: the key exists (made here by the first caller, waited for by the others)."""
        fn = b.function
        made = b.load_atomic(self.state, "acquire", 4, typ=I32)
        make_bb, wait_bb, ready_bb = (fn.append_basic_block(n) for n in ("make", "wait", "ready"))
        b.cbranch(b.icmp_unsigned(">=", made, _i(_MADE, I32)), ready_bb, make_bb)
        b.position_at_end(make_bb)
        claim = b.cmpxchg(self.state, _i(_NEW, I32), _i(_MAKING, I32), "acq_rel", "acquire")
        with b.if_then(b.extract_value(claim, 1)):
            rc = b.call(self.create, [self.key, release])
            result = b.select(b.icmp_signed("==", rc, _i(0, I32)), _i(_MADE, I32), _i(_FAILED, I32))
            b.store_atomic(result, self.state, "release", 4)
        b.branch(wait_bb)
        b.position_at_end(wait_bb)  # another thread is making it: a few instructions
        now = b.load_atomic(self.state, "acquire", 4, typ=I32)
        b.cbranch(b.icmp_unsigned(">=", now, _i(_MADE, I32)), ready_bb, wait_bb)
        b.position_at_end(ready_bb)
        state = b.load_atomic(self.state, "acquire", 4, typ=I32)
        return b.icmp_unsigned("==", state, _i(_MADE, I32))

    def table(self, b: ir.IRBuilder, create: bool, release: ir.Function | None = None) -> ir.Value:
        """This thread's table (null: none, and ``create`` could not make one)."""
        null = ir.Constant(PTR, None)
        ok = self.key_ready(b, release) if release is not None else b.icmp_unsigned(
            "==", b.load_atomic(self.state, "acquire", 4, typ=I32), _i(_MADE, I32))
        entry = b.block
        with b.if_then(ok):
            key = b.load(self.key, typ=self.key_t)
            found = b.call(self.get, [key])
            have = b.block
            if create:
                with b.if_then(b.icmp_unsigned("==", found, null)):
                    fresh = b.call(self.calloc, [_i(2 * SLOTS), _i(8)])
                    stored = b.call(self.set, [key, fresh])
                    good = b.and_(b.icmp_unsigned("!=", fresh, null), b.icmp_signed("==", stored, _i(0, I32)))
                    with b.if_then(b.not_(good)):
                        b.call(self.free, [fresh])
                    made = b.select(good, fresh, null)
                    made_bb = b.block
                joined = b.phi(PTR)
                joined.add_incoming(found, have)
                joined.add_incoming(made, made_bb)
                found, have = joined, b.block
        result = b.phi(PTR)
        result.add_incoming(null, entry)
        result.add_incoming(found, have)
        return result

    def scratch(self, release: ir.Function) -> ir.Function:
        fn = ir.Function(self.mod, SCRATCH_TYPE, SCRATCH_SYMBOL)
        slot, nbytes = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        size = b.and_(b.add(nbytes, _i(63)), _i(-64))  # aligned_alloc wants a multiple
        size = b.select(b.icmp_signed("==", size, _i(0)), _i(64), size)
        table = self.table(b, True, release)
        with b.if_then(b.icmp_unsigned("==", table, ir.Constant(PTR, None))):
            b.ret(b.call(self.alloc, [_i(64), size]))  # no table: the caller's own buffer
        cap_at, buf_at = self._cap_at(b, table, slot), self._buf_at(b, table, slot)
        with b.if_then(b.icmp_signed("<", b.load(cap_at, typ=I64), size)):
            b.call(self.free, [b.load(buf_at, typ=PTR)])
            fresh = b.call(self.alloc, [_i(64), size])
            b.store(fresh, buf_at)
            ok = b.icmp_unsigned("!=", fresh, ir.Constant(PTR, None))
            b.store(b.select(ok, size, _i(0)), cap_at)
        b.ret(b.load(buf_at, typ=PTR))
        return fn

    def done(self) -> ir.Function:
        fn = ir.Function(self.mod, DONE_TYPE, DONE_SYMBOL)
        slot, buf = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        table = self.table(b, False)
        kept = b.alloca(I32)
        b.store(_i(0, I32), kept)
        with b.if_then(b.icmp_unsigned("!=", table, ir.Constant(PTR, None))):
            same = b.icmp_unsigned("==", b.load(self._buf_at(b, table, slot), typ=PTR), buf)
            b.store(b.zext(same, I32), kept)
        with b.if_then(b.icmp_signed("==", b.load(kept, typ=I32), _i(0, I32))):
            b.call(self.free, [buf])  # a buffer of the fallback: the caller's own
        b.ret_void()
        return fn


def scratch_module(mod: ir.Module) -> ir.Function:
    """The scratch helper's functions in ``mod``; returns ``wia.lib.scratch``."""
    builder = _ScratchModule(mod)
    fn = builder.scratch(builder.release())
    builder.done()
    return fn


__all__ = ["DONE_SYMBOL", "SCRATCH_SPEC", "SCRATCH_SYMBOL", "SLOTS", "SLOT_CONV_PACK", "SLOT_CONV_TILE",
           "SLOT_CONV_WEIGHT", "SLOT_GEMM_PACK", "SLOT_GEMV_PARTIAL", "SLOT_QGEMM_A", "SLOT_QGEMM_B", "scratch",
           "scratch_done", "scratch_module"]
