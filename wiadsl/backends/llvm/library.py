"""Helper kernels compiled once per process and linked by symbol: the thread pool
(parallel.py), the gemm and conv drivers, and the depthwise and max-pool plane kernels.

The packed gemm (gemm.py; also its variant on a B packed once, ``gemm_packed``, and
that packing, ``gemm_prepack``) and the implicit-GEMM convolution (conv.py) are the
same LLVM code in every kernel that uses them (they depend only on dtype, the
gemm config and the conv stride), and they are most of the code LLVM would
optimize and compile per kernel. So a kernel module only *declares* them
(library_ir.py's ``declare``) under a symbol naming those parameters; the first
use in a process builds that helper's own module (``library_ir``), optimizes it
(``pipeline``), compiles it and loads it (``ensure_loaded``; from the disk cache
when it is there, without importing llvmlite), after which every kernel object
that references the symbol links against it (loader.py's symbol table). A kernel
being compiled starts its helpers' builds on background threads (``prefetch``)
as soon as it is lowered, so they compile while it does.

The thread pool (``POOL_SPEC``) is a helper too, one per process (its globals are
the pool's state), but it is loaded on demand: modules never link against it.
They call it through ``threads.SLOT_SYMBOL``, a pointer cell owned by this module
(registered with the loader at import, so it always resolves), and when the cell is
still null through ``threads.LOAD_SYMBOL``, a ctypes callback that loads the
pool (``ensure_pool``) and fills the cell; a null answer runs the region serially.
So a process that never runs a parallel region never compiles the pool, and no
object can fail to link for want of it.

The native call helper (fastcall.py, ``call_helper``) is one too: its code
depends only on the object layout it was built for, which its symbol names. So is
the per-thread scratch memory of the packing code (scratch.py, ``SCRATCH_SPEC``),
which every gemm and conv helper calls: it is loaded before them. So are the
micro-kernels of a dtype and config ("ukernels", gemm.py's ``ukernel``), which
every gemm and conv driver calls: one object per process, not a copy per driver
(``dependencies``); so are the direct micro-kernels of the stride-1 convolutions
("dukernels", conv.py's ``direct_ukernel``), and the gemm driver's one-row products
("gemv", gemm.py's ``gemv`` and ``gemv_split``), which build beside that driver.
So is the int8 GEMM (qgemm.py: its driver, its driver on a B packed once, and that
packing; ``QGEMM_KINDS``), one per variant of the host (``qgemm_variant``).

Invariants:
- A symbol determines its code: ``wia.lib.<kind>.<dtype>.<config label>[.s<sh>x<sw>]``
  (the plane kernels: ``[.<geometry tag>]``, depthwise.py's ``Geometry.tag``)
  (``wia.lib.pool.parallel_for`` for the pool, whose spec records ``MAX_THREADS``;
  the threads per region are the cell ``LIMIT_SYMBOL``, threads.py's ``LIMIT``;
  ``wia.lib.ukernel.<dtype>.<config label>.<rows>`` for the micro-kernels,
  ``wia.lib.dukernel.<dtype>.<config label>.<rows>`` for the direct ones,
  ``wia.lib.gemv.<dtype>.<config label>[.split]`` for the one-row products,
  ``wia.lib.<qgemm kind>.<variant>`` for the int8 GEMM).
- Every object that references a library symbol lists its ``spec`` in
  ``Layout.libraries``; loading such an object (also from the disk cache in a
  fresh process) calls ``ensure_loaded`` first, so no symbol is unresolved.
- Ahead-of-time outputs (``wiac -o x.o``) are self-contained: ``link_into``
  copies the helpers' definitions into the module before code generation.
- Threads: ``_LOADED`` is a ``cache.OnceTable``: a helper is loaded by one thread
  while the others that need it wait for that one, and no lock is held while it
  is obtained (``cached_object`` may wait for the compile cache, which may be
  loading a kernel that needs another helper: issue 17's deadlock was this
  module's lock held across that wait). ``ensure_pool`` is also called from
  native code (the LOAD_SYMBOL callback, GIL released until it runs).
"""

from __future__ import annotations

import ctypes
import functools
import os
from typing import TYPE_CHECKING, Any

from ...cache.entries import OnceTable
from ...forking import child_safe_lock
from ...records import as_dict
from .allocator import keep_freed_memory
from .fastcall import C_API, METH_FASTCALL, ObjectLayout, probe
from .gemm_config import GemmConfig, direct_ukernel_symbol, ukernel_symbol
from .levels import CLEANUP
from .loader import add_symbol, load
from .threads import (
    LIMIT,
    LIMIT_SYMBOL,
    LOAD_SYMBOL,
    MAX_THREADS,
    POOL_SYMBOL,
    SLOT_SYMBOL,
    THREADS,
)

if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor

#: symbol -> address of every helper loaded into this process
_LOADED = OnceTable()
_TUNE_LOCK = child_safe_lock(globals(), "_TUNE_LOCK")
#: [whether glibc was tuned] once the first object is loaded (allocator.keep_freed_memory)
_MALLOC_TUNED: list[bool] = []

Spec = dict[str, Any]
#: The thread pool's spec (its code depends on its bound; the count per region is
#: read at run time from LIMIT_SYMBOL).
POOL_SPEC: Spec = {"kind": "pool", "max_threads": MAX_THREADS}
#: The per-thread scratch buffers (scratch.py builds them), named here so that loading
#: needs no IR builder.
SCRATCH_SPEC: Spec = {"kind": "scratch"}
SCRATCH_SYMBOL = "wia.lib.scratch"
#: The kernels' arena allocator and the end of their calls (runtime.py's ``arena_module``,
#: whose functions' names start with ``ARENA_PREFIX``), named by its allocation function.
ARENA_SPEC: Spec = {"kind": "arena"}
ARENA_PREFIX = "wia.lib.arena."


def call_spec(layout: ObjectLayout) -> Spec:
    """The spec of the native call helper (fastcall.py) for this object layout."""
    return {"kind": "call", "layout": as_dict(layout)}


def ukernels_spec(dtype: str, config: Spec) -> Spec:
    """The spec of the micro-kernels of ``dtype`` and the gemm ``config`` (as a dict)
    that the gemm and conv helpers of that dtype and config link against."""
    return {"kind": "ukernels", "dtype": dtype, "config": config}


def symbol(spec: Spec) -> str:
    if spec["kind"] == "pool":
        return POOL_SYMBOL
    if spec["kind"] == "scratch":
        return SCRATCH_SYMBOL
    if spec["kind"] == "arena":
        return ARENA_PREFIX + "alloc"
    if spec["kind"] == "call":
        return f"wia.lib.call.{ObjectLayout(**spec['layout']).label()}"
    if spec["kind"] in QGEMM_KINDS:
        return f"wia.lib.{spec['kind']}.{spec['variant']}"
    cfg = GemmConfig(**spec["config"])
    if spec["kind"] == "ukernels":  # named by the kernel of MR rows, which it defines
        return ukernel_symbol(spec["dtype"], cfg, cfg.mr)
    if spec["kind"] == "dukernels":
        return direct_ukernel_symbol(spec["dtype"], cfg, cfg.mr)
    name = f"wia.lib.{spec['kind']}.{spec['dtype']}.{cfg.label()}"
    if spec["kind"] in ("conv", "conv_range", "conv_rows"):
        sh, sw = spec["stride"]
        name += f".s{sh}x{sw}"
    if spec["kind"] in PLANE_KINDS:
        from .depthwise import plane_geometry
        name += f".{plane_geometry(spec['geometry']).tag}"
    return name


def load_object(obj: bytes, name: str | None) -> int:
    """Load object code into this process (loader.py); the address of ``name`` (0 for
    None: a part of a kernel that only other objects call). The first
    load tunes glibc's malloc for the kernels' buffers (allocator.py)."""
    with _TUNE_LOCK:
        if not _MALLOC_TUNED:
            _MALLOC_TUNED.append(keep_freed_memory())
    return load(obj, name)


def ensure_loaded(specs: list[Spec]) -> None:
    """Compile (or read from the cache) and load every helper of ``specs`` not yet loaded.
    The builds still queued in the background, theirs and their dependencies', this
    thread makes first, while the builds under way finish, instead of waiting for
    those and then for the queue (``longest_first``)."""
    # (and the thread pool's, which a kernel's first parallel region loads: queued
    # after the kernel was lowered, it was otherwise built last, MobileNetV2's first
    # call waiting 57 ms more for it)
    for spec in longest_first([*specs, *(d for s in specs for d in dependencies(s)), POOL_SPEC]):
        _claim_queued(spec)
    for spec in sorted(specs, key=_build_started):
        name = symbol(spec)
        if name not in _LOADED:
            _LOADED.get(name, functools.partial(_load, spec, name))


#: The plane kernels of depthwise.py (the depthwise convolution and the max pool), one
#: per dtype and geometry: 30-130 ms of LLVM work each, the same in every kernel that
#: has the layer (the small CNN example's max pool was half its kernel's LLVM time)
PLANE_KINDS = ("depthwise", "maxpool")
#: Helpers whose objects call no other helper (the rest, the gemm and conv drivers and
#: their packing, call the scratch buffers and the micro-kernels).
_STANDALONE = ("pool", "call", "scratch", "arena", "ukernels", "dukernels", *PLANE_KINDS)
#: The int8 GEMM (qgemm.py; its variant on a B packed once, and that packing), one per
#: variant (``qgemm_variant``, from the host's features): 60-100 ms of LLVM work, which
#: every kernel with an int8 product paid for its own copy
QGEMM_KINDS = ("qgemm", "qgemm_packed", "qgemm_prepack")
#: Helpers whose code depends on the host's L1 data cache (caches.py's ``set_rows``)
_L1_KINDS = ("gemm", "conv", "conv_range")


def dependencies(spec: Spec) -> list[Spec]:
    """The helpers ``spec``'s object calls: loaded before it, so its symbols resolve."""
    if spec["kind"] in _STANDALONE:
        return []
    if spec["kind"] in QGEMM_KINDS:  # its packing buffers; its micro-kernels are its own
        return [SCRATCH_SPEC]
    if spec["kind"] == "gemv":  # gemv_split's partial sums
        return [SCRATCH_SPEC]
    ukernels = ukernels_spec(spec["dtype"], spec["config"])
    if spec["kind"] in ("conv", "conv_range") and list(spec["stride"]) == [1, 1]:  # conv.py's direct tiles
        return [SCRATCH_SPEC, ukernels, {**ukernels, "kind": "dukernels"}]
    if spec["kind"] == "gemm":  # its one-row products
        return [SCRATCH_SPEC, ukernels, {**ukernels, "kind": "gemv"}]
    return [SCRATCH_SPEC, ukernels]


def pipeline(spec: Spec) -> tuple[int, bool, bool]:
    """The LLVM pipeline of a helper (``target.optimize``'s level, unroll, vectorize).
    The gemm and conv drivers: no IR passes (-O0's pipeline; code generation still
    runs at -O3 with its own loop strength reduction, code hoisting and scheduling).
    We write their IR in the form those passes would give it: SSA values, vector
    loads and FMAs, unrolled register tiles (gemm.py, conv.py). Against -O1 with
    vectorization the f32 gemm compiles in 55-60 ms instead of 140, conv_range in
    65-70 instead of 180 (a process's first gemm or conv waits for it), for the same
    run time within the noise of alternating processes: matmul f32 from 7x7x7 to
    1024^3 and f64 300x200x310, conv2d 3x3 at strides 1 and 2 and 1x1, ResNet-18 at
    one and two threads; the one-row products (gemv) read 0-6 % slower in some runs.
    The int8 gemm too (qgemm*.py: its one-row product and packing tails written as
    vector loops and masked loads, which LLVM's vectorizer used to make of scalar
    ones): on AMD Zen 5 with VNNI its helper compiled in 34 ms instead of 186 (120 of
    them IR passes, vectorizing), 1x512x512 ran in 5.4 us against 5.6, 33x129x77 in
    2.1 against 2.9, 6x5x3 in 0.83 against 0.91, 64 and 256 rows x 512 x 512 the same.
    The micro-kernels they call ("ukernels") are written so too. The glue (the thread
    pool, the native call helper, the arena, the scratch buffers): ``CLEANUP``, SROA,
    combining and CFG simplification only: their IR keeps variables in allocas but
    has no loop worth vectorizing or unrolling, and every process's first kernel
    waits for them. Against -O3 (-O2 for the arena) they compiled in 19, 7, 9 and 6 ms
    instead of 53, 20, 17 and 10, for the same run time (issue 21: a first matmul's
    call waited 208 ms); ``codegen_level`` says how their code is emitted. The plane
    kernels:
    the -O2 pipeline without the unroller, as kernel modules get (compile.py's
    ``KERNEL_SPEED_LEVEL``), which their scalar index arithmetic needs."""
    if spec["kind"] in PLANE_KINDS:  # as in the kernel modules they came from
        return (2, False, True)
    if spec["kind"] in ("pool", "call", "scratch", "arena"):
        return (CLEANUP, False, False)
    return (0, False, False)


def codegen_level(spec: Spec) -> int:
    """The code generator's optimization level for a helper: -O3's, but -O0's (fast
    instruction selection and register allocation) for the thread pool, the arena
    and the scratch buffers: 3, 2 and 2 ms to emit instead of 16, 7 and 5, for the
    same run time (the pool's round trip, an elementwise loop and MobileNetV2 at two
    threads, alternating processes). The call helper, which every kernel call runs,
    keeps -O3's: at -O0 a 4-element add's call took 20-35 ns longer."""
    return 0 if spec["kind"] in ("pool", "scratch", "arena") else 3


#: Milliseconds to build a helper of each kind (its IR and object code, one thread, on
#: an empty cache; AMD Zen 5, AVX-512, f32; llvmlite 0.50 with LLVM's assertions). Only
#: their order matters: the builds of a kernel's helpers are queued longest first.
_BUILD_MS = {"conv_wino4_raw": 131, "conv_wino4": 102, "conv_wino2_raw": 87, "conv_wino2": 78,
             "ukernels": 70, "conv": 60, "dukernels": 56, "conv_range": 53, "qgemm": 52, "gemm": 35,
             "conv_rows": 37, "qgemm_packed": 36, "conv_wino4_prepack": 26,
             "maxpool": 25, "depthwise": 23, "gemv": 19, "gemm_packed": 18, "conv_wino2_prepack": 15,
             "qgemm_prepack": 13, "pool": 12, "arena": 10, "call": 8, "scratch": 5,
             "gemm_prepack": 4, "conv_rows_prepack": 3}


def longest_first(specs: list[Spec]) -> list[Spec]:
    """``specs`` without repeats, the longest builds first: with the builds spread over
    the builder thread and the thread that needs them, the longest ones must not start
    last (list scheduling). In the order they were needed, the micro-kernels queued
    after their driver: the first matmul's first call took 208-235 ms, 168-178 with
    them first; the small CNN's conv helpers, 340-350 -> 289 (both with a thread that
    needs queued builds making them, ``ensure_loaded``)."""
    unique = list({symbol(s): s for s in specs}.values())
    return sorted(unique, key=lambda s: -_BUILD_MS.get(s["kind"], 50))


#: name -> the object code of a helper being built in the background (``prefetch``)
_BUILDS: dict[str, Future[bytes]] = {}
_BUILDS_LOCK = child_safe_lock(globals(), "_BUILDS_LOCK")


def prefetch(specs: list[Spec]) -> None:
    """Start building the helpers of ``specs`` that are not loaded, on background
    threads, so that they compile while the kernel that calls them does (target.py's
    unlocked compiles); ``ensure_loaded`` then takes their object code (the builds
    read the disk cache first). Called for kernels compiled, not for those loaded."""
    todo = [s for s in specs if symbol(s) not in _LOADED]
    # and what they link against, longest build first (``longest_first``)
    todo = longest_first(todo + [d for s in todo for d in dependencies(s) if d not in todo])
    for spec in todo:
        name = symbol(spec)
        with _BUILDS_LOCK:
            if name in _BUILDS or name in _LOADED:
                continue
            _BUILDS[name] = _builder().submit(_object, spec, name)


def _claim_queued(spec: Spec) -> None:
    """Build on this thread the object of a helper whose background build is queued and
    not yet started (``_load`` then takes it as it takes a background build's)."""
    name = symbol(spec)
    with _BUILDS_LOCK:
        build = _BUILDS.get(name)
        if build is None or not build.cancel():
            return
        mine = type(build)()
        mine.set_running_or_notify_cancel()  # others wait for it, none cancels it
        _BUILDS[name] = mine
    try:
        mine.set_result(_object(spec, name))
    except BaseException as exc:  # reported by the thread that loads it
        mine.set_exception(exc)


def _build_started(spec: Spec) -> bool:
    """Whether a background build of ``spec`` is running or done (False: none, or queued)."""
    with _BUILDS_LOCK:
        build = _BUILDS.get(symbol(spec))
    return build is not None and (build.running() or build.done())


def _forget_builds() -> None:
    """In a forked child: the parent's builder threads and unfinished builds do not
    exist here (waiting for one would hang); helpers build afresh. (``_BUILDS_LOCK``
    is fresh there too: ``child_safe_lock``.)"""
    _BUILDS.clear()
    _builder.cache_clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_builds)


@functools.cache
def _builder() -> ThreadPoolExecutor:
    from concurrent.futures import ThreadPoolExecutor  # not on a warm start's path

    # a kernel's compile keeps one CPU busy; each helper build takes another, up to three
    return ThreadPoolExecutor(max(1, min(3, THREADS - 1)), thread_name_prefix="wia-helper")


def _object(spec: Spec, name: str) -> bytes:
    """A helper's object code: from the compile cache or compiled (no lock held while
    LLVM works: other threads compile meanwhile). A helper's code depends only on its
    spec and THREADS, the compile-time cut of its parallel loops (and the CPU and
    compiler version, which the cache key adds; and for the convolutions the L1's
    ways, caches.py): a warm process reads it instead of compiling it again (~0.5 s).
    A process with another CPU affinity (THREADS) builds its own."""
    from .keys import cached_object

    def build() -> bytes:
        from .library_ir import library_ir
        from .target import object_code

        return object_code(library_ir(spec), *pipeline(spec), codegen=codegen_level(spec))
    identity = {**spec, "threads": THREADS, "pipeline": pipeline(spec), "codegen": codegen_level(spec)}
    if spec["kind"] in _L1_KINDS:
        from .caches import l1_data_ways

        identity["l1_ways"] = l1_data_ways()
    return cached_object(name, identity, build)


def _load(spec: Spec, name: str) -> int:
    """Load one helper (this thread holds its flight in ``_LOADED``; no lock): the
    object ``prefetch`` built or is building, else (none, or still queued) one built here,
    then what it links against. In that order: waiting first for a dependency that a
    background thread builds left this one queued, and idle, meanwhile."""
    with _BUILDS_LOCK:
        build = _BUILDS.pop(name, None)
    if build is not None and build.cancel():  # still queued: build it here, now
        build = None
    obj = build.result() if build is not None else _object(spec, name)
    ensure_loaded(dependencies(spec))  # their symbols must resolve when this one links
    address = load_object(obj, name)
    add_symbol(name, address)
    return address


def loaded_address(name: str) -> int | None:
    """The address of the helper ``name`` when it is loaded in this process."""
    return _LOADED.peek(name)  # type: ignore[no-any-return]


#: The pool's ``parallel_for`` once loaded (null before): modules read it at SLOT_SYMBOL.
_SLOT = ctypes.c_void_p(0)


def ensure_pool() -> int:
    """Load the thread pool (parallel.py) into this process; its ``parallel_for``."""
    ensure_loaded([POOL_SPEC])
    address = _LOADED.peek(POOL_SYMBOL)
    _SLOT.value = address
    return address


def _load_pool() -> int:
    """The LOAD_SYMBOL callback (native code calls it with the GIL released): the
    pool's address, or 0 (the caller then runs its region serially)."""
    try:
        return ensure_pool()
    except Exception:  # noqa: BLE001 - must not unwind into native code
        return 0


pool_address = ensure_pool
_LOADER = ctypes.CFUNCTYPE(ctypes.c_void_p)(_load_pool)
add_symbol(SLOT_SYMBOL, ctypes.addressof(_SLOT))
add_symbol(LOAD_SYMBOL, ctypes.cast(_LOADER, ctypes.c_void_p).value or 0)
add_symbol(LIMIT_SYMBOL, ctypes.addressof(LIMIT))


class _MethodDef(ctypes.Structure):
    _fields_ = [("ml_name", ctypes.c_void_p), ("ml_meth", ctypes.c_void_p),
                ("ml_flags", ctypes.c_int), ("ml_doc", ctypes.c_char_p)]


_RAW_MALLOC = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_size_t)(("PyMem_RawMalloc", ctypes.pythonapi))


def _lasting_method_def(name: bytes, function: int, flags: int) -> int:
    """The address of a PyMethodDef (and its name) in memory that is never freed.
    CPython reads a builtin's definition until the builtin itself is freed, and at
    interpreter exit that can come after every object of this module is gone: with
    the definition in a ctypes structure kept in a module list, a process crashed at
    exit about half the time under load (SIGSEGV in ``meth_dealloc``, the list freed
    before ``call_helper``'s cache)."""
    size = ctypes.sizeof(_MethodDef)
    address = _RAW_MALLOC(size + len(name) + 1)
    if not address:
        raise MemoryError("no memory for the native call helper's definition")
    ctypes.memmove(address + size, name + b"\0", len(name) + 1)
    definition = _MethodDef.from_address(address)
    definition.ml_name, definition.ml_meth, definition.ml_flags = address + size, function, flags
    return address


@functools.cache
def call_helper() -> Any:
    """The native call helper (fastcall.py) as a Python builtin ``wia_call(slots, args,
    outs)``, loaded on first use; None when this interpreter's object layout could
    not be verified."""
    layout = probe()
    if layout is None:
        return None
    for name, api in C_API.items():  # bound by name, so the object itself can be cached
        add_symbol(name, ctypes.cast(getattr(ctypes.pythonapi, api), ctypes.c_void_p).value or 0)
    spec = call_spec(layout)
    ensure_loaded([spec])
    definition = _lasting_method_def(b"wia_call", _LOADED.peek(symbol(spec)), METH_FASTCALL)
    new = ctypes.pythonapi.PyCFunction_NewEx
    new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.py_object, ctypes.py_object]
    return new(definition, None, None)


__all__ = ["POOL_SPEC", "SCRATCH_SPEC", "SCRATCH_SYMBOL", "Spec", "call_helper", "call_spec", "dependencies",
           "ensure_loaded", "ensure_pool", "load_object",
           "loaded_address", "pool_address", "symbol", "ukernels_spec"]
