"""The host target in LLVM: the target machine, object emission, the O3 pipeline.

Invariants (PERFORMANCE.md, llvmlite 0.50):
- Only ``initialize_native_target``/``initialize_native_asmprinter`` are called
  (``llvm.initialize()`` raises in 0.50), before the first target machine.
- Modules are verified before optimizing; assembly and objects are emitted from
  clones (codegen mutates the module it is given).
- Every kernel and helper is loaded as object code from one long-lived target
  machine (``emit_jit_object``: static relocations, JIT code model), freshly
  compiled or from the disk cache alike, by loader.py (MCJIT's ``Engine`` where
  loader.py does not run); every JIT entry symbol is unique per cache key.
- The host (host.py) is known without LLVM; this module is the compiler's side.
- ``object_code`` (the JIT's path) compiles in a private context with its thread's
  own target machine, so two threads compile at once (``_unlocked``).
"""

from __future__ import annotations

import ctypes
import os
import threading
from functools import cache
from typing import Any

import llvmlite.binding as llvm

from .host import ISA_LEVELS, HostInfo, host, restrict_features
from .levels import CLEANUP


@cache
def _native_target() -> None:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()


def target_machine(jit: bool = True, codegen_level: int = 3) -> llvm.TargetMachine:
    _native_target()
    h = host()
    target = llvm.Target.from_triple(h.triple)
    return target.create_target_machine(cpu=h.cpu, features=h.features, opt=codegen_level,
                                        reloc="static" if jit else "pic",
                                        codemodel="jitdefault" if jit else "default", jit=jit)


@cache
def jit_machine() -> llvm.TargetMachine:
    """The target machine every loaded object is emitted by (static relocations, the
    JIT code model: loader.py places such objects anywhere in the address space)."""
    return target_machine(jit=True)


_EMIT_LOCK = threading.Lock()


def emit_jit_object(mod: llvm.ModuleRef) -> bytes:
    """Object code of an optimized module for loader.py (mutates ``mod``)."""
    with _EMIT_LOCK:
        return jit_machine().emit_object(mod)  # type: ignore[no-any-return]


def load_module(mod: llvm.ModuleRef, symbol: str) -> int:
    """Emit an optimized module and load it into this process; ``symbol``'s address
    (its other globals: ``loader.symbol_address``). Loaded as every kernel is, so the
    process's cells (the thread pool's, library.py) resolve."""
    from .library import load_object

    return load_object(emit_jit_object(mod), symbol)


class Engine:
    """MCJIT, the loader of hosts other than Linux x86-64 (loader.NATIVE)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), target_machine(jit=True))
        self._objects: list[object] = []  # keep every added object alive

    def add_object(self, obj: bytes, symbol: str | None) -> int:
        """Load relocatable object code (from ``emit_jit_object``); the address of
        ``symbol`` (0 for None)."""
        with self._lock:
            ref = llvm.ObjectFileRef.from_data(obj)
            self.engine.add_object_file(ref)
            self.engine.finalize_object()
            self._objects.append(ref)
            if symbol is None:
                return 0
            address = self.engine.get_function_address(symbol)
        if not address:
            raise RuntimeError(f"object code does not define '{symbol}'")
        return address  # type: ignore[no-any-return]


_ENGINE: list[Engine] = []
_ENGINE_LOCK = threading.Lock()


def engine() -> Engine:
    """The process's one MCJIT engine, made by one thread (two made at once would
    leave the code loaded in one of them to be collected)."""
    with _ENGINE_LOCK:
        if not _ENGINE:
            _ENGINE.append(Engine())
        return _ENGINE[0]


def parse_and_verify(text: str, context: llvm.ContextRef | None = None) -> llvm.ModuleRef:
    mod = llvm.parse_assembly(text, context)
    mod.verify()
    return mod


def _pass_builder(tm: llvm.TargetMachine, level: int, unroll: bool,
                  vectorize: bool | None) -> llvm.PassBuilder:
    pto = llvm.create_pipeline_tuning_options(speed_level=max(level, 0))
    pto.loop_vectorization = pto.slp_vectorization = level >= 2 if vectorize is None else vectorize
    pto.loop_unrolling = unroll
    return llvm.create_pass_builder(tm, pto)


def _passes(pb: llvm.PassBuilder, level: int) -> llvm.ModulePassManager:
    """The module passes of ``level``: the default pipeline, or ``CLEANUP``'s."""
    if level != CLEANUP:
        return pb.getModulePassManager()
    mpm = llvm.create_new_module_pass_manager()
    mpm.add_sroa_pass()
    mpm.add_instruction_combine_pass()
    mpm.add_simplify_cfg_pass()
    return mpm


def optimize(mod: llvm.ModuleRef, level: int = 3, unroll: bool = True,
             vectorize: bool | None = None) -> None:
    """The new pass manager's default pipeline at ``level`` (or ``CLEANUP``), with loop
    and SLP vectorization on from -O2 (SLP is off by default in llvmlite), or as
    ``vectorize`` says. ``unroll=False`` turns off the loop unroller (the vectorizer
    still interleaves)."""
    pb = _pass_builder(jit_machine(), level, unroll, vectorize)
    _passes(pb, level).run(mod, pb)


def _unlocked(name: str) -> Any:
    """llvmlite's ctypes function ``name`` without the process-wide lock it wraps every
    LLVM call in (``ffi.lib``, whose own comment proposes marking functions thread-safe
    as a way out of it). Only the two long steps of a compile go through it, on a
    module of a private context and the calling thread's own target machine: LLVM
    allows threads to work at once in distinct contexts (ORC's concurrent compiles do).
    ctypes releases the GIL during the call. The locked function where this llvmlite
    has no such attribute (then compiles run one at a time, as before)."""
    from llvmlite.binding import ffi

    locked = getattr(ffi.lib, name)
    return getattr(locked, "_cfn", locked)


class _Machines(threading.local):
    def __init__(self) -> None:
        self.by_level: dict[int, llvm.TargetMachine] = {}


_MACHINES = _Machines()


def _thread_machine(codegen: int = 3) -> llvm.TargetMachine:
    """This thread's target machine whose code generation runs at -O``codegen``, made
    as ``jit_machine`` is (at 3: the same code)."""
    machine = _MACHINES.by_level.get(codegen)
    if machine is None:
        machine = _MACHINES.by_level[codegen] = target_machine(jit=True, codegen_level=codegen)
    return machine


class _Working:
    """How many threads are in LLVM outside llvmlite's lock. A fork waits until none
    is (``os.register_at_fork``): a child must not inherit LLVM's internal state in
    the middle of another thread's compile. At most ``FORK_WAIT`` seconds."""

    FORK_WAIT = 60.0

    def __init__(self) -> None:
        self.after_fork_in_child()

    def after_fork_in_child(self) -> None:  # (also the start) the other threads are gone
        self.cond = threading.Condition()
        self.count = 0

    def __enter__(self) -> None:
        with self.cond:
            self.count += 1

    def __exit__(self, *_: object) -> None:
        with self.cond:
            self.count -= 1
            self.cond.notify_all()

    def before_fork(self) -> None:  # holds the lock until the fork is done
        self.cond.acquire()
        self.cond.wait_for(lambda: self.count == 0, timeout=self.FORK_WAIT)

    def after_fork_in_parent(self) -> None:
        self.cond.release()


_WORKING = _Working()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_WORKING.before_fork, after_in_parent=_WORKING.after_fork_in_parent,
                        after_in_child=_WORKING.after_fork_in_child)


def parse_private(text: str) -> llvm.ModuleRef:
    """Parse and verify ``text`` into a context of its own (for ``optimize_unlocked``)."""
    return parse_and_verify(text, llvm.create_context())


def optimize_unlocked(mod: llvm.ModuleRef, level: int, unroll: bool = True,
                      vectorize: bool | None = None) -> None:
    """``optimize`` for a module of a private context (``parse_private``), outside
    llvmlite's lock: another thread may compile meanwhile."""
    pb = _pass_builder(_thread_machine(), level, unroll, vectorize)
    with _WORKING:
        _unlocked("LLVMPY_RunNewModulePassManager")(_passes(pb, level), mod, pb)


def emit_unlocked(mod: llvm.ModuleRef, codegen: int = 3) -> bytes:
    """``emit_jit_object`` for a module of a private context, outside llvmlite's lock
    and with this thread's target machine (the same code as ``jit_machine``'s at
    ``codegen`` 3; 0: -O0's fast instruction selection and register allocation)."""
    from llvmlite.binding import ffi

    with ffi.OutputString() as error, _WORKING:
        buffer = _unlocked("LLVMPY_TargetMachineEmitToMemory")(_thread_machine(codegen), mod, 1, error)
        if not buffer:
            raise RuntimeError(str(error))
    try:
        return ctypes.string_at(ffi.lib.LLVMPY_GetBufferStart(buffer),
                                ffi.lib.LLVMPY_GetBufferSize(buffer))
    finally:
        ffi.lib.LLVMPY_DisposeMemoryBuffer(buffer)


def object_code(text: str, level: int, unroll: bool = True, vectorize: bool | None = None,
                codegen: int = 3) -> bytes:
    """Object code for loader.py of the LLVM IR ``text`` optimized as ``optimize``
    does: ``emit_jit_object`` after ``optimize``, but in a context of its own, so that
    threads (library.py's helpers built beside a kernel) compile at the same time."""
    mod = parse_private(text)
    optimize_unlocked(mod, level, unroll, vectorize)
    return emit_unlocked(mod, codegen)


__all__ = ["ISA_LEVELS", "HostInfo", "emit_jit_object", "engine", "host", "jit_machine", "load_module",
           "emit_unlocked", "object_code", "optimize", "optimize_unlocked",
           "parse_private", "parse_and_verify", "restrict_features", "target_machine"]
