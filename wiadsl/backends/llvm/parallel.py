"""Native parallel loops over an index range: ``wia.parallel_for`` on a persistent
thread pool.

    i32 @wia.lib.pool.parallel_for(ptr %worker, ptr %ctx, i64 %lo, i64 %hi, i64 %align, i64 %chunks)
    i32 %worker(ptr %ctx, i64 %lo, i64 %hi)      ; 0 on success, else an error code

``[lo, hi)`` is cut into at most ``chunks`` contiguous chunks that start at
multiples of ``align`` from ``lo``: ``ceil(n / align)`` units of ``align`` indices
(the last unit may be short), as evenly over the chunks as whole units go. The calling thread and
``n - 1`` of the pool's worker threads each start on a contiguous block of the
chunks, the caller's first, claimed one at a time with an atomic counter per block,
then claim what is left of the others' blocks (so a worker that the OS schedules
late, or never, only means the others run more chunks), where ``n`` is the cell
``LIMIT_SYMBOL`` (threads.py: the user's setting), read at the start of each
region. Blocks rather than one shared counter: region after region, a thread on
time runs the same part of the range, so the next layer's chunk finds in its own
core's cache what it wrote (MobileNetV2, batch 4, 2 threads: 358 -> 325 us).
The result is the first non-zero code of the chunks in chunk order (an error is
reported as the serial loop would, when only one chunk fails).

The pool is one library helper per process, loaded on first use: each module's
``wia.parallel_for`` calls it through the cell ``SLOT_SYMBOL`` and, while that is
null, asks ``LOAD_SYMBOL`` (library.py) to load it. Its workers
are created by the first parallel region that asks for more than exist (so a
process at one thread never creates any), detached, and then sleep on a
condition variable between regions after spinning ``SPIN_CYCLES`` (a kernel
called in a loop finds them awake: a wake-up costs microseconds, a
``pthread_create`` + join per call cost tens). Worker ``i`` (0-based) wakes only
for regions that allow more than ``i`` workers: the others stay asleep.

Invariants:
- One parallel region uses the pool at a time (the ``busy`` flag, taken with a
  compare-and-swap): a concurrent call from another Python thread, or a nested
  call from inside a chunk, runs its whole range serially on its own thread
  (``worker(ctx, lo, hi)``), never waits for the pool: no deadlock.
- ``ticket`` = generation << 32 | active workers << 1 | closed. A worker joins a
  region by incrementing ``active`` with a compare-and-swap only while the ticket
  is open and of the generation it woke for; the caller closes the ticket after
  its own chunks and returns once ``active`` is zero, so no worker touches a
  region's context (on the caller's stack) after the caller returns.
- A forked child (pid differs from the one that started the workers) starts a
  fresh pool: its mutex, condition variables and flags are re-initialized and new
  workers created, so a fork taken in the middle of a region cannot deadlock it.
- No shared state but ``ctx`` (read-only to workers) and what the workers write:
  callers hand disjoint output ranges to the chunks.
- A pool whose threads cannot be created runs everything on the caller (and
  stops trying to create more in this process).
"""

from __future__ import annotations

from collections.abc import Callable

from llvmlite import ir

from ...ir.core import Operation
from .runtime import ARENA_STATE, ARENA_WORDS, arena_free_function, for_range
from .threads import LIMIT_SYMBOL, LOAD_SYMBOL, MAX_THREADS, POOL_SYMBOL, SLOT_SYMBOL, THREADS
from .types import I1, I32, I64, PTR, Callee, is_x86

WORKER_TYPE = ir.FunctionType(I32, [PTR, I64, I64])
POOL_TYPE = ir.FunctionType(I32, [PTR, PTR, I64, I64, I64, I64])
#: Cycles (``llvm.readcyclecounter``, the TSC) a worker spins for the next region
#: before it sleeps, and the caller spins for the workers before it sleeps: ~200 us at
#: a 2.6 GHz TSC (Intel's OpenMP spins 200 ms by default: KMP_BLOCKTIME). Long enough
#: to span a model's serial stretches: at 1 << 17 (~50 us) ResNet-18 (1/8 width, 64x64,
#: 2 threads) woke its worker once per call, 135 -> 115 us per call at 1 << 19 (Zen 4 VM).
SPIN_CYCLES = 1 << 19
MAX_CHUNKS = 1024
_STATE_FIELDS = ("pid", "busy", "ticket", "worker", "ctx", "lo", "hi", "align", "units", "nchunks",
                 "rcs", "nworkers", "allowed", "cannot_grow", "parts")
#: i64 words per participant's block of chunks in ``wia.pool.blocks`` (its next
#: chunk, its end, the CPU it runs on or -1): a cache line each, so claims do not
#: share lines
_BLOCK_WORDS = 8
_NEXT, _END, _CPU = 0, 1, 2
#: bytes of the CPU masks the workers read and set (``spread``): 8192 CPUs; a
#: kernel with more refuses the call and the worker stays where it is
_CPU_MASK_BYTES = 1024
_MUTEX_BYTES = 128  # room for pthread_mutex_t / pthread_cond_t of any libc


#: A condition evaluated (re-read) at the builder's position.
_Cond = Callable[[ir.IRBuilder], ir.Value]


def _i(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


def _declare(mod: ir.Module, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
    fn = mod.globals.get(name)
    return fn if fn is not None else ir.Function(mod, ir.FunctionType(ret, args), name)


def new_context_function(mod: ir.Module, name: str, ftype: ir.FunctionType, words: int
                         ) -> tuple[ir.Function, ir.IRBuilder, list[ir.Value]]:
    """A new internal function of ``ftype`` whose first argument is a context of i64
    words: the function, a builder at its entry, the context's first ``words`` words
    (loaded)."""
    fn = ir.Function(mod, ftype, name)
    fn.linkage = "internal"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    ctx = fn.args[0]
    return fn, b, [b.load(b.gep(ctx, [_i(j)], source_etype=I64), typ=I64) for j in range(words)]


def new_worker(mod: ir.Module, name: str, words: int
               ) -> tuple[ir.Function, ir.IRBuilder, list[ir.Value], ir.Value, ir.Value]:
    """A new internal ``i32 name(ptr ctx, i64 lo, i64 hi)`` for ``parallel_for``: the
    function, a builder at its entry, ctx's first ``words`` i64 words (loaded), lo, hi."""
    fn, b, vals = new_context_function(mod, name, WORKER_TYPE, words)
    return fn, b, vals, fn.args[1], fn.args[2]


def parallel_for(mod: ir.Module) -> ir.Function:
    """``wia.parallel_for`` in ``mod`` (defined once per module): calls the pool through
    SLOT_SYMBOL, loading it through LOAD_SYMBOL on first use; with no pool, runs
    ``worker(ctx, lo, hi)`` itself."""
    name = "wia.parallel_for"
    if name in mod.globals:
        return mod.globals[name]
    slot = mod.globals.get(SLOT_SYMBOL)
    if slot is None:
        slot = ir.GlobalVariable(mod, PTR, SLOT_SYMBOL)
    load = _declare(mod, LOAD_SYMBOL, PTR, [])
    fn = ir.Function(mod, POOL_TYPE, name)
    fn.linkage = "internal"
    worker, ctx, lo, hi, align, chunks = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    seen = b.load_atomic(slot, "acquire", 8, typ=PTR)
    entry = b.block
    with b.if_then(b.icmp_unsigned("==", seen, ir.Constant(PTR, None)), likely=False):
        loaded = b.call(load, [])
        loader = b.block
    pool = b.phi(PTR)
    pool.add_incoming(seen, entry)
    pool.add_incoming(loaded, loader)
    with b.if_then(b.icmp_unsigned("==", pool, ir.Constant(PTR, None)), likely=False):
        with b.if_then(b.icmp_signed(">=", lo, hi)):
            b.ret(ir.Constant(I32, 0))
        b.ret(b.call(Callee(worker, WORKER_TYPE), [ctx, lo, hi]))
    b.ret(b.call(Callee(pool, POOL_TYPE), [worker, ctx, lo, hi, align, chunks]))
    return fn


def pool_glue(mod: ir.Module) -> None:
    """SLOT_SYMBOL and LOAD_SYMBOL defined in ``mod`` to point at POOL_SYMBOL, and
    LIMIT_SYMBOL set to THREADS (for ahead-of-time output, where the pool is linked in)."""
    pool = mod.globals.get(POOL_SYMBOL) or ir.Function(mod, POOL_TYPE, POOL_SYMBOL)
    slot = ir.GlobalVariable(mod, PTR, SLOT_SYMBOL)
    slot.initializer = pool.bitcast(PTR)
    slot.align = 8
    limit = ir.GlobalVariable(mod, I64, LIMIT_SYMBOL)
    limit.initializer = _i(THREADS)
    limit.align = 8
    load = ir.Function(mod, ir.FunctionType(PTR, []), LOAD_SYMBOL)
    b = ir.IRBuilder(load.append_basic_block("entry"))
    b.ret(b.bitcast(pool, PTR))


class _Pool:
    """Emits the pool module: its globals, the worker thread loop and ``parallel_for``."""

    def __init__(self, mod: ir.Module, x86: bool):
        self.mod, self.x86 = mod, x86
        self.limit = ir.GlobalVariable(mod, I64, LIMIT_SYMBOL)  # defined by the process
        self.state: dict[str, ir.GlobalVariable] = {}
        for field in _STATE_FIELDS:  # 64-byte aligned: the atomics do not share cache lines
            g = ir.GlobalVariable(mod, I64, f"wia.pool.{field}")
            g.linkage = "internal"
            g.initializer = _i(0)
            g.align = 64
            self.state[field] = g
        self.blocks = ir.GlobalVariable(mod, ir.ArrayType(I64, MAX_THREADS * _BLOCK_WORDS), "wia.pool.blocks")
        self.blocks.linkage = "internal"
        self.blocks.initializer = ir.Constant(self.blocks.value_type, None)
        self.blocks.align = 64
        self.sync: dict[str, ir.GlobalVariable] = {}
        for field in ("mutex", "work", "done"):
            g = ir.GlobalVariable(mod, ir.ArrayType(ir.IntType(8), _MUTEX_BYTES), f"wia.pool.{field}")
            g.linkage = "internal"
            g.initializer = ir.Constant(g.value_type, None)
            g.align = 64
            self.sync[field] = g
        decl = lambda name, ret, args: _declare(mod, name, ret, args)  # noqa: E731
        self.lock = decl("pthread_mutex_lock", I32, [PTR])
        self.unlock = decl("pthread_mutex_unlock", I32, [PTR])
        self.mutex_init = decl("pthread_mutex_init", I32, [PTR, PTR])
        self.cond_init = decl("pthread_cond_init", I32, [PTR, PTR])
        self.cond_wait = decl("pthread_cond_wait", I32, [PTR, PTR])
        self.broadcast = decl("pthread_cond_broadcast", I32, [PTR])
        self.create = decl("pthread_create", I32, [PTR, PTR, PTR, PTR])
        self.detach = decl("pthread_detach", I32, [I64])
        self.getpid = decl("getpid", I32, [])
        self.cycles = decl("llvm.readcyclecounter", I64, [])
        self.pause = decl("llvm.x86.sse2.pause", ir.VoidType(), []) if x86 else None
        # where the threads run (``spread``): glibc's, so Linux only
        self.linux = "linux" in mod.triple
        if self.linux:
            self.getcpu = decl("sched_getcpu", I32, [])
            self.getaffinity = decl("sched_getaffinity", I32, [I32, I64, PTR])
            self.setaffinity = decl("sched_setaffinity", I32, [I32, I64, PTR])

    # ------------------------------------------------------------ helpers

    def ld(self, b: ir.IRBuilder, field: str) -> ir.Value:
        return b.load_atomic(self.state[field], "seq_cst", 8, typ=I64)

    def st(self, b: ir.IRBuilder, field: str, v: ir.Value) -> None:
        b.store_atomic(v, self.state[field], "seq_cst", 8)

    def null(self) -> ir.Constant:
        return ir.Constant(PTR, None)

    def spin_until(self, b: ir.IRBuilder, ready: _Cond) -> ir.Value:
        """Spin (pausing) until ``ready(b)`` is true or SPIN_CYCLES pass; i1: ready."""
        fn = b.function
        head, body, done = (fn.append_basic_block(f"spin.{s}") for s in ("head", "body", "done"))
        t0 = b.call(self.cycles, [])
        b.branch(head)
        b.position_at_end(head)
        ok = ready(b)
        late = b.icmp_unsigned(">", b.sub(b.call(self.cycles, []), t0), _i(SPIN_CYCLES))
        b.cbranch(b.or_(ok, late), done, body)
        b.position_at_end(body)
        if self.pause is not None:
            b.call(self.pause, [])
        b.branch(head)
        b.position_at_end(done)
        return ok

    def sleep_until(self, b: ir.IRBuilder, ready: _Cond, cond: str) -> None:
        """``lock; while not ready: cond_wait(cond); unlock`` (the writer of what
        ``ready`` reads broadcasts ``cond`` under the mutex)."""
        fn = b.function
        head, body, done = (fn.append_basic_block(f"sleep.{s}") for s in ("head", "body", "done"))
        mutex = self.sync["mutex"]
        b.call(self.lock, [mutex])
        b.branch(head)
        b.position_at_end(head)
        b.cbranch(ready(b), done, body)
        b.position_at_end(body)
        b.call(self.cond_wait, [self.sync[cond], mutex])
        b.branch(head)
        b.position_at_end(done)
        b.call(self.unlock, [mutex])

    def wait(self, b: ir.IRBuilder, ready: _Cond, cond: str) -> None:
        ok = self.spin_until(b, ready)
        with b.if_then(b.not_(ok)):
            self.sleep_until(b, ready, cond)

    def block(self, b: ir.IRBuilder, q: ir.Value, word: int) -> ir.Value:
        """The address of word ``word`` (_NEXT, _END, _CPU) of participant ``q``'s block."""
        return b.gep(self.blocks, [_i(0), b.add(b.mul(q, _i(_BLOCK_WORDS)), _i(word))])

    def share_chunks(self, b: ir.IRBuilder, nchunks: ir.Value, parts: ir.Value) -> None:
        """Cut chunks [0, nchunks) into ``parts`` contiguous blocks, one per participant
        (CPUs not yet known; the caller's recorded)."""
        def bounds(q: ir.Value) -> None:
            b.store(b.sdiv(b.mul(q, nchunks), parts), self.block(b, q, _NEXT))
            b.store(b.sdiv(b.mul(b.add(q, _i(1)), nchunks), parts), self.block(b, q, _END))
            self.set_cpu(b, q, _i(-1))
        for_range(b, _i(0), parts, 1, bounds, "share")
        if self.linux:
            self.set_cpu(b, _i(0), b.sext(b.call(self.getcpu, []), I64))
        self.st(b, "parts", parts)

    def cpu_of(self, b: ir.IRBuilder, q: ir.Value) -> ir.Value:
        """The CPU participant ``q`` recorded for this region, or -1 (workers read each
        other's as they are written: atomic, unordered)."""
        return b.load_atomic(self.block(b, q, _CPU), "monotonic", 8, typ=I64)

    def set_cpu(self, b: ir.IRBuilder, q: ir.Value, cpu: ir.Value) -> None:
        b.store_atomic(cpu, self.block(b, q, _CPU), "monotonic", 8)

    def spread(self, b: ir.IRBuilder, me: ir.Value) -> None:
        """A worker that joins a region on the CPU of another participant (the caller,
        usually) moves to another CPU it may run on, then records its CPU.

        Why: Linux wakes a thread on its waker's CPU when it thinks the others busy,
        and in a VM a vCPU that idled long enough is "preempted" to the guest (the host
        gave its core away), so after a pause of ~0.1 s the woken worker queued behind
        the caller on one vCPU while the other idled, until the load balancer moved it
        tens of ms later: a 512^3 matmul at two threads took 3.6-4.4 ms for a dozen
        calls after each pause instead of 1.8 (one thread: 4.0). Restricting the
        worker's CPU mask to the others migrates it at once; the mask is restored right
        after, which leaves it where it is (the user's affinity stays in force)."""
        if not self.linux:
            return
        cpu = b.sext(b.call(self.getcpu, []), I64)
        parts = self.ld(b, "parts")
        words = _CPU_MASK_BYTES // 8
        with b.goto_entry_block():  # the worker loops: its stack slots are made once
            shared, where, left = b.alloca(I1), b.alloca(I64), b.alloca(I64)
            mine, elsewhere = b.alloca(I64, size=words), b.alloca(I64, size=words)
        b.store(ir.Constant(I1, 0), shared)

        def other(q: ir.Value) -> ir.Value:  # i1: participant q is not me, and on a known CPU
            return b.and_(b.icmp_signed("!=", q, me), b.icmp_signed(">=", self.cpu_of(b, q), _i(0)))

        def check(q: ir.Value) -> None:
            same = b.icmp_signed("==", self.cpu_of(b, q), cpu)
            b.store(b.or_(b.load(shared, typ=I1), b.and_(other(q), same)), shared)
        for_range(b, _i(0), parts, 1, check, "cpus")
        b.store(cpu, where)
        with b.if_then(b.load(shared, typ=I1), likely=False):
            got = b.call(self.getaffinity, [ir.Constant(I32, 0), _i(_CPU_MASK_BYTES), mine])
            with b.if_then(b.icmp_signed("==", got, ir.Constant(I32, 0))):
                for_range(b, _i(0), _i(words), 1, lambda w: b.store(
                    b.load(b.gep(mine, [w], source_etype=I64), typ=I64),
                    b.gep(elsewhere, [w], source_etype=I64)), "mask")

                def clear(q: ir.Value) -> None:  # the CPUs of the others, off the mask
                    c = self.cpu_of(b, q)
                    with b.if_then(b.and_(other(q), b.icmp_signed("<", c, _i(_CPU_MASK_BYTES * 8)))):
                        at = b.gep(elsewhere, [b.lshr(c, _i(6))], source_etype=I64)
                        bit = b.shl(_i(1), b.and_(c, _i(63)))
                        b.store(b.and_(b.load(at, typ=I64), b.xor(bit, _i(-1))), at)
                for_range(b, _i(0), parts, 1, clear, "clear")
                b.store(_i(0), left)
                for_range(b, _i(0), _i(words), 1, lambda w: b.store(
                    b.or_(b.load(left, typ=I64), b.load(b.gep(elsewhere, [w], source_etype=I64), typ=I64)),
                    left), "left")
                with b.if_then(b.icmp_unsigned("!=", b.load(left, typ=I64), _i(0))):
                    b.call(self.setaffinity, [ir.Constant(I32, 0), _i(_CPU_MASK_BYTES), elsewhere])
                    b.call(self.setaffinity, [ir.Constant(I32, 0), _i(_CPU_MASK_BYTES), mine])
                    b.store(b.sext(b.call(self.getcpu, []), I64), where)
        self.set_cpu(b, me, b.load(where, typ=I64))

    def run_chunks(self, b: ir.IRBuilder, me: ir.Value) -> None:
        """Run the chunks of participant ``me``'s block, then claim those left in the
        others' blocks (``me + 1``, ``me + 2``... around): with every thread on time,
        each runs its own contiguous block, the same one region after region (the
        cache holds what it wrote for the next layer); a late or absent one's chunks
        are taken by the others. Each chunk's code is stored."""
        fn = b.function
        heads = [fn.append_basic_block(f"claim.{s}") for s in ("block", "head", "body", "next", "done")]
        block, head, body, step, done = heads
        parts = self.ld(b, "parts")
        pre = b.block
        b.branch(block)
        b.position_at_end(block)  # the s-th block visited: participant (me + s) % parts
        s = b.phi(I64)
        s.add_incoming(_i(0), pre)
        b.cbranch(b.icmp_signed("<", s, parts), head, done)
        b.position_at_end(head)
        q = b.srem(b.add(me, s), parts)
        i = b.atomic_rmw("add", self.block(b, q, _NEXT), _i(1), "seq_cst")
        b.cbranch(b.icmp_signed("<", i, b.load(self.block(b, q, _END), typ=I64)), body, step)
        b.position_at_end(body)
        lo, hi, align, units, nchunks = (b.load(self.state[f], typ=I64)
                                         for f in ("lo", "hi", "align", "units", "nchunks"))

        def start(k: ir.Value) -> ir.Value:  # chunk k's first index: whole units before it
            return b.add(lo, b.mul(align, b.sdiv(b.mul(k, units), nchunks)))
        c_lo = start(i)
        c_hi = start(b.add(i, _i(1)))
        c_hi = b.select(b.icmp_signed("<", c_hi, hi), c_hi, hi)
        worker = Callee(b.load(self.state["worker"], typ=PTR), WORKER_TYPE)
        rc = b.call(worker, [b.load(self.state["ctx"], typ=PTR), c_lo, c_hi])
        rcs = b.load(self.state["rcs"], typ=PTR)
        b.store(rc, b.gep(rcs, [i], source_etype=I32))
        b.branch(head)
        b.position_at_end(step)
        s.add_incoming(b.add(s, _i(1)), step)
        b.branch(block)
        b.position_at_end(done)

    # ------------------------------------------------------------ worker thread

    def thread_main(self) -> ir.Function:
        """``ptr main(ptr index)``: wait for a new generation that allows more than
        ``index`` workers, join it while it is open, run chunks, leave; forever (the
        thread is detached)."""
        fn = ir.Function(self.mod, ir.FunctionType(PTR, [PTR]), "wia.pool.main")
        fn.linkage = "internal"
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        index = b.ptrtoint(fn.args[0], I64)
        my = b.alloca(I64)
        b.store(_i(0), my)
        top, join, cas, run = (fn.append_basic_block(s) for s in ("top", "join", "cas", "run"))
        b.branch(top)
        b.position_at_end(top)

        def new_gen(bb: ir.IRBuilder) -> ir.Value:
            fresh = bb.icmp_signed("!=", bb.lshr(self.ld(bb, "ticket"), _i(32)), bb.load(my, typ=I64))
            return bb.and_(fresh, bb.icmp_signed("<", index, self.ld(bb, "allowed")))
        self.wait(b, new_gen, "work")
        b.branch(join)
        b.position_at_end(join)
        t = self.ld(b, "ticket")
        b.store(b.lshr(t, _i(32)), my)
        closed = b.trunc(b.and_(t, _i(1)), I1)
        b.cbranch(closed, top, cas)  # closed: wait for the next region
        b.position_at_end(cas)
        pair = b.cmpxchg(self.state["ticket"], t, b.add(t, _i(2)), "seq_cst", "seq_cst")
        b.cbranch(b.extract_value(pair, 1), run, join)  # lost a race: look again
        b.position_at_end(run)
        me = b.add(index, _i(1))  # participant 0 is the caller
        self.spread(b, me)
        self.run_chunks(b, me)
        old = b.atomic_rmw("sub", self.state["ticket"], _i(2), "seq_cst")
        new = b.sub(old, _i(2))
        last = b.icmp_signed("==", b.and_(new, _i(0xFFFFFFFF)), _i(1))  # closed, nobody active
        with b.if_then(last):
            b.call(self.lock, [self.sync["mutex"]])
            b.call(self.broadcast, [self.sync["done"]])
            b.call(self.unlock, [self.sync["mutex"]])
        b.branch(top)
        return fn

    # ------------------------------------------------------------ parallel_for

    def start(self, b: ir.IRBuilder, pid: ir.Value) -> None:
        """(Re)initialize the pool in this process: sync objects and flags (no workers
        yet: ``grow`` creates them)."""
        for name in ("mutex", "work", "done"):
            b.call(self.mutex_init if name == "mutex" else self.cond_init, [self.sync[name], self.null()])
        for field in ("busy", "ticket", "nworkers", "allowed", "cannot_grow"):
            self.st(b, field, _i(0))
        self.st(b, "pid", pid)

    def grow(self, b: ir.IRBuilder, main: ir.Function, want: ir.Value) -> None:
        """Create workers until there are ``want`` (the caller holds ``busy``, so it is
        the only creator); a failed ``pthread_create`` stops growth for this process."""
        fn = b.function
        head, body, made, done = (fn.append_basic_block(f"grow.{s}") for s in ("head", "body", "made", "done"))
        tid = b.alloca(I64)
        b.branch(head)
        b.position_at_end(head)
        have = self.ld(b, "nworkers")
        more = b.and_(b.icmp_signed("<", have, want), b.icmp_signed("==", self.ld(b, "cannot_grow"), _i(0)))
        b.cbranch(more, body, done)
        b.position_at_end(body)
        err = b.call(self.create, [tid, self.null(), main, b.inttoptr(have, PTR)])
        failed = b.icmp_signed("!=", err, ir.Constant(I32, 0))
        with b.if_then(failed):
            self.st(b, "cannot_grow", _i(1))
        b.cbranch(failed, done, made)
        b.position_at_end(made)
        b.call(self.detach, [b.load(tid, typ=I64)])
        self.st(b, "nworkers", b.add(have, _i(1)))
        b.branch(head)
        b.position_at_end(done)

    def parallel_for(self, name: str) -> ir.Function:
        fn = ir.Function(self.mod, POOL_TYPE, name)
        worker, ctx, lo, hi, align, chunks = fn.args
        main = self.thread_main()
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        serial_bb = fn.append_basic_block("serial")
        n = b.sub(hi, lo)
        align = b.select(b.icmp_signed("<", align, _i(1)), _i(1), align)
        chunks = b.select(b.icmp_signed("<", chunks, _i(1)), _i(1), chunks)
        chunks = b.select(b.icmp_signed(">", chunks, _i(MAX_CHUNKS)), _i(MAX_CHUNKS), chunks)
        # units of ``align`` indices (the last may be short), as evenly over the chunks
        # as whole units go: chunk k starts at unit floor(k * units / nchunks). (Chunks
        # of ceil(n / chunks) rounded up to whole units left the last one short: 49
        # rows of 6-row tiles over 2 threads were 30 + 19, now 24 + 25.)
        units = b.sdiv(b.add(n, b.sub(align, _i(1))), align)
        nchunks = b.select(b.icmp_signed("<", units, chunks), units, chunks)
        try_pool = fn.append_basic_block("try")
        limit = b.load_atomic(self.limit, "monotonic", 8, typ=I64)
        limit = b.select(b.icmp_signed(">", limit, _i(MAX_THREADS)), _i(MAX_THREADS), limit)
        want = b.sub(limit, _i(1))  # workers besides the caller (<= 0: serial)
        b.cbranch(b.or_(b.icmp_signed("<=", nchunks, _i(1)), b.icmp_signed("<=", want, _i(0))),
                  serial_bb, try_pool)
        with b.goto_block(serial_bb):
            with b.if_then(b.icmp_signed("<=", n, _i(0))):
                b.ret(ir.Constant(I32, 0))
            b.ret(b.call(Callee(worker, WORKER_TYPE), [ctx, lo, hi]))
        b.position_at_end(try_pool)
        pid = b.sext(b.call(self.getpid, []), I64)
        seen = self.ld(b, "pid")
        fresh = fn.append_basic_block("fresh")
        claim = fn.append_basic_block("claim")
        b.cbranch(b.icmp_signed("==", seen, pid), claim, fresh)
        b.position_at_end(fresh)  # first region of this process (or of a forked child)
        init = fn.append_basic_block("init")
        mine = b.and_(b.icmp_signed("!=", seen, b.neg(pid)),
                      b.extract_value(b.cmpxchg(self.state["pid"], seen, b.neg(pid), "seq_cst", "seq_cst"), 1))
        b.cbranch(mine, init, serial_bb)  # another thread of this process is starting it
        b.position_at_end(init)
        self.start(b, pid)
        b.branch(claim)
        b.position_at_end(claim)
        got = b.extract_value(b.cmpxchg(self.state["busy"], _i(0), _i(1), "seq_cst", "seq_cst"), 1)
        region, idle_pool = fn.append_basic_block("region"), fn.append_basic_block("no.workers")
        b.cbranch(got, idle_pool, serial_bb)  # busy: another region (or this one, nested)
        b.position_at_end(idle_pool)
        self.grow(b, main, want)
        have = self.ld(b, "nworkers")
        with b.if_then(b.icmp_signed("==", have, _i(0))):
            self.st(b, "busy", _i(0))  # no thread could be created: stay serial
            b.branch(serial_bb)
        self.st(b, "allowed", b.select(b.icmp_signed("<", have, want), have, want))
        b.branch(region)
        b.position_at_end(region)
        rcs = b.alloca(I32, size=nchunks)
        for field, v in (("worker", b.ptrtoint(worker, I64)), ("ctx", b.ptrtoint(ctx, I64)), ("lo", lo),
                         ("hi", hi), ("align", align), ("units", units), ("nchunks", nchunks),
                         ("rcs", b.ptrtoint(rcs, I64))):
            b.store(v, self.state[field])
        # the caller and the workers it may get (``allowed``: a worker joins only
        # below it), each with a block
        self.share_chunks(b, nchunks, b.add(self.ld(b, "allowed"), _i(1)))
        gen = b.add(b.lshr(self.ld(b, "ticket"), _i(32)), _i(1))
        b.call(self.lock, [self.sync["mutex"]])
        self.st(b, "ticket", b.shl(b.and_(gen, _i(0xFFFFFFFF)), _i(32)))
        b.call(self.broadcast, [self.sync["work"]])
        b.call(self.unlock, [self.sync["mutex"]])
        self.run_chunks(b, _i(0))
        old = b.atomic_rmw("or", self.state["ticket"], _i(1), "seq_cst")  # close it

        def idle(bb: ir.IRBuilder) -> ir.Value:
            return bb.icmp_signed("==", bb.and_(self.ld(bb, "ticket"), _i(0xFFFFFFFE)), _i(0))
        with b.if_then(b.icmp_signed("!=", b.and_(old, _i(0xFFFFFFFE)), _i(0))):
            self.wait(b, idle, "done")
        self.st(b, "busy", _i(0))
        # the first non-zero code in chunk order
        acc = b.alloca(I32)
        b.store(ir.Constant(I32, 0), acc)
        head, body, done = (fn.append_basic_block(f"rc.{s}") for s in ("head", "body", "done"))
        pre = b.block
        b.branch(head)
        b.position_at_end(head)
        i = b.phi(I64)
        i.add_incoming(_i(0), pre)
        cur = b.load(acc, typ=I32)
        b.cbranch(b.and_(b.icmp_signed("<", i, nchunks), b.icmp_signed("==", cur, ir.Constant(I32, 0))),
                  body, done)
        b.position_at_end(body)
        b.store(b.load(b.gep(rcs, [i], source_etype=I32), typ=I32), acc)
        i.add_incoming(b.add(i, _i(1)), b.block)
        b.branch(head)
        b.position_at_end(done)
        b.ret(b.load(acc, typ=I32))
        return fn


def pool_module(mod: ir.Module, name: str = POOL_SYMBOL) -> ir.Function:
    """Define the pool (up to MAX_THREADS threads per region, as LIMIT_SYMBOL says)
    in ``mod``; returns its ``parallel_for`` (external, named ``name``)."""
    return _Pool(mod, is_x86(mod.triple)).parallel_for(name)


def worth_threads(b: ir.IRBuilder, work: ir.Value) -> ir.Value:
    """``i1``: whether ``work`` (scalar operations) pays for the thread hand-off."""
    if THREADS <= 1:
        return ir.Constant(I1, 0)
    from ...loops.passes import MIN_PARALLEL_WORK  # lazy: the loop passes are heavy

    return b.icmp_signed(">=", work, _i(MIN_PARALLEL_WORK))


def to_slot(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    """A register value as the i64 of a context slot (``from_slot`` inverts it)."""
    t = v.type
    if isinstance(t, ir.PointerType):
        return b.ptrtoint(v, I64)
    if isinstance(t, ir.IntType):
        return v if t.width == 64 else b.zext(v, I64)
    bits = {"half": 16, "float": 32, "double": 64}[str(t)]
    raw = b.bitcast(v, ir.IntType(bits))
    return raw if bits == 64 else b.zext(raw, I64)


def from_slot(b: ir.IRBuilder, raw: ir.Value, t: ir.Type) -> ir.Value:
    if isinstance(t, ir.PointerType):
        return b.inttoptr(raw, t)
    if isinstance(t, ir.IntType):
        return raw if t.width == 64 else b.trunc(raw, t)
    bits = {"half": 16, "float": 32, "double": 64}[str(t)]
    return b.bitcast(raw if bits == 64 else b.trunc(raw, ir.IntType(bits)), t)


def free_arena(b: ir.IRBuilder, arena: ir.Value) -> None:
    """Free every buffer recorded in ``arena`` (runtime.py's layout) and its table."""
    b.call(arena_free_function(b.module), [arena])


def call_worker(mod: ir.Module, callee: ir.Function, captured: list[ir.Type],
                with_state: bool = False) -> ir.Function:
    """``i32 worker(ptr ctx, i64 lo, i64 hi)`` calling an outlined loop ``callee(arena, lo,
    hi, captured..., results)`` with its captured values read from ``ctx`` (one i64 slot
    each) and an arena of its own: allocation is not thread-safe across arenas, and an
    outlined loop returns nothing, so everything it allocated is freed here.
    ``with_state``: the callee reads data derived from the kernel's frozen inputs
    (prepacked.py), so the word after the captured ones is the kernel's state, given
    to the worker's arena (the state's cells are published with compare-and-swap)."""
    name = f"{callee.name}.worker"
    if name in mod.globals:
        return mod.globals[name]
    # called here and on the serial path: inlined into both, LLVM optimized the loop
    # twice (ResNet-18's kernel module: 390 -> 280 ms of -O2) for a call per chunk
    callee.attributes.add("noinline")
    fn, b, words, lo, hi = new_worker(mod, name, len(captured) + int(with_state))
    arena = b.alloca(I64, size=ARENA_WORDS)
    for j in range(ARENA_WORDS):
        state = j == ARENA_STATE and with_state
        b.store(words[-1] if state else _i(0), b.gep(arena, [_i(j)], source_etype=I64))
    results = b.alloca(I64, size=1)
    vals = [from_slot(b, w, t) for w, t in zip(words, captured, strict=False)]
    rc = b.call(callee, [arena, lo, hi, *vals, results])
    free_arena(b, arena)
    b.ret(rc)
    return fn


def emit_parallel_call(b: ir.IRBuilder, alloca_block: ir.Block, arena: ir.Value, callee: ir.Function,
                       op: Operation, flat: list[ir.Value], with_state: bool = False) -> ir.Value:
    """The i32 code of ``func.call {parallel = cost}`` (parallelize.py): ``flat`` is
    (lo, hi, captured...) flattened. Runs on the pool when ``(hi - lo) * cost``
    reaches ``MIN_PARALLEL_WORK``, else calls the outlined loop directly. The range
    is cut into ``THREADS`` to ``4 * THREADS`` chunks of at least half that work each,
    so a thread that starts late (a busy core) leaves its chunks to the others."""
    from ...loops.passes import MIN_PARALLEL_WORK

    lo, hi, rest = flat[0], flat[1], flat[2:]
    with b.goto_block(alloca_block):
        ctx = b.alloca(I64, size=max(1, len(rest) + int(with_state)))
        slots = b.alloca(I64, size=1)
    for j, v in enumerate(rest):
        b.store(to_slot(b, v), b.gep(ctx, [_i(j)], source_etype=I64))
    if with_state:  # the kernel's state, for the workers' arenas (call_worker)
        state = b.load(b.gep(arena, [_i(ARENA_STATE)], source_etype=I64), typ=I64)
        b.store(state, b.gep(ctx, [_i(len(rest))], source_etype=I64))
    work = b.mul(b.sub(hi, lo), _i(int(op.attributes["parallel"])))
    go = worth_threads(b, work)
    with b.if_else(go) as (threaded, serial):
        with threaded:
            worker = call_worker(b.module, callee, [v.type for v in rest], with_state)
            chunks = b.sdiv(work, _i(max(1, MIN_PARALLEL_WORK // 2)))
            chunks = b.select(b.icmp_signed("<", chunks, _i(THREADS)), _i(THREADS), chunks)
            chunks = b.select(b.icmp_signed(">", chunks, _i(4 * THREADS)), _i(4 * THREADS), chunks)
            # chunks of any whole number of iterations: an outlined loop is often the
            # outer one of a nest (images, channels), of a few iterations to share
            rc_par = b.call(parallel_for(b.module), [worker, ctx, lo, hi, _i(1), chunks])
            par_block = b.block
        with serial:
            rc_ser = b.call(callee, [arena, *flat, slots])
            ser_block = b.block
    rc = b.phi(I32)
    rc.add_incoming(rc_par, par_block)
    rc.add_incoming(rc_ser, ser_block)
    return rc


__all__ = ["LIMIT_SYMBOL", "LOAD_SYMBOL", "POOL_SYMBOL", "SLOT_SYMBOL", "THREADS", "WORKER_TYPE", "emit_parallel_call", "new_worker",
           "parallel_for", "pool_glue", "pool_module", "worth_threads"]
