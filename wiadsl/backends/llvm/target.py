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
"""

from __future__ import annotations

import threading
from functools import cache

import llvmlite.binding as llvm

from .host import ISA_LEVELS, HostInfo, host, restrict_features


@cache
def _native_target() -> None:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()


def target_machine(jit: bool = True) -> llvm.TargetMachine:
    _native_target()
    h = host()
    target = llvm.Target.from_triple(h.triple)
    return target.create_target_machine(cpu=h.cpu, features=h.features, opt=3,
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

    def add_object(self, obj: bytes, symbol: str) -> int:
        """Load relocatable object code (from ``emit_jit_object``); the address of ``symbol``."""
        with self._lock:
            ref = llvm.ObjectFileRef.from_data(obj)
            self.engine.add_object_file(ref)
            self.engine.finalize_object()
            self._objects.append(ref)
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


def parse_and_verify(text: str) -> llvm.ModuleRef:
    mod = llvm.parse_assembly(text)
    mod.verify()
    return mod


def optimize(mod: llvm.ModuleRef, level: int = 3, unroll: bool = True) -> None:
    """The new pass manager's default pipeline at ``level``, with loop and SLP
    vectorization on (SLP is off by default in llvmlite). ``unroll=False`` turns
    off the loop unroller (the vectorizer still interleaves)."""
    tm = jit_machine()
    pto = llvm.create_pipeline_tuning_options(speed_level=level)
    pto.loop_vectorization = level >= 2
    pto.slp_vectorization = level >= 2
    pto.loop_unrolling = unroll
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)


__all__ = ["ISA_LEVELS", "HostInfo", "emit_jit_object", "engine", "host", "jit_machine", "load_module",
           "optimize", "parse_and_verify", "restrict_features", "target_machine"]
