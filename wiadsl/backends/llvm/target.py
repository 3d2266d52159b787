"""The host target: one target machine, one long-lived MCJIT engine, the O3 pipeline.

Invariants (PERFORMANCE.md, llvmlite 0.50):
- Only ``initialize_native_target``/``initialize_native_asmprinter`` are called
  (``llvm.initialize()`` raises in 0.50).
- The engine owns its target machine and lives as long as the process: it is
  created once from an empty module and every kernel is ``add_module``d to it
  (a collected engine would leave the target machine dangling).
- Modules are verified before optimizing; assembly and objects are emitted from
  clones (codegen mutates the module it is given).
- Cached kernels come back as object code emitted by the engine's own target
  machine (``emit_jit_object``: static relocations, JIT code model) and are
  loaded with ``add_object``; every JIT entry symbol is unique per cache key, so
  the engine's symbol table never resolves a name to another kernel's code.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from functools import cache

import llvmlite.binding as llvm

from ...diagnostics import WiaUsageError


@dataclass(frozen=True)
class HostInfo:
    cpu: str
    features: str
    triple: str

    @property
    def avx512(self) -> bool:
        return "+avx512f" in self.features.split(",")

    @property
    def vector_bits(self) -> int:
        return 512 if self.avx512 else 256 if "+avx2" in self.features.split(",") else 128


#: ``WIADSL_ISA`` levels below the host's own: the LLVM feature prefixes each turns off.
#: One machine can then build and run the code paths of the x86 hosts we support
#: (AMD AVX2; AVX-512 without VNNI; the host itself), as the tests need.
ISA_LEVELS: dict[str, tuple[str, ...]] = {
    "avx2": ("avx512", "avxvnni", "avxifma", "avxneconvert", "amx", "evex512", "avx10"),
    "avx512": ("avx512vnni", "avx512bf16", "avx512fp16", "avxvnni", "amx", "avx10"),
}


def restrict_features(features: str, level: str) -> str:
    """The host's LLVM ``features`` with those above ISA ``level`` turned off."""
    off = ISA_LEVELS[level]
    return ",".join("-" + f[1:] if f.startswith("+") and f[1:].startswith(off) else f
                    for f in features.split(","))


def _isa_level(features: str) -> str | None:
    level = os.environ.get("WIADSL_ISA", "").strip().lower()
    if level in ("", "native"):
        return None
    if level not in ISA_LEVELS:
        raise WiaUsageError(f"WIADSL_ISA={level!r} is not an ISA level; use one of "
                            f"{', '.join(ISA_LEVELS)} or native")
    if "+avx2" not in features.split(",") or \
            (level == "avx512" and "+avx512f" not in features.split(",")):
        raise WiaUsageError(f"WIADSL_ISA={level}: this host's CPU has no {level}")
    return level


@cache
def host() -> HostInfo:
    """The CPU code is built for: this one, or (``WIADSL_ISA``) a lower ISA level of it."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    features = llvm.get_host_cpu_features().flatten()
    level = _isa_level(features)
    if level is not None:
        features = restrict_features(features, level)
    return HostInfo(llvm.get_host_cpu_name(), features, llvm.get_process_triple())


def target_machine(jit: bool = True) -> llvm.TargetMachine:
    h = host()
    target = llvm.Target.from_triple(h.triple)
    return target.create_target_machine(cpu=h.cpu, features=h.features, opt=3,
                                        reloc="static" if jit else "pic",
                                        codemodel="jitdefault" if jit else "default", jit=jit)


class Engine:
    """The process-wide MCJIT engine; ``add`` is serialized by a lock."""

    def __init__(self) -> None:
        self.tm = target_machine(jit=True)
        self._lock = threading.Lock()
        self.engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), self.tm)
        self._modules: list[object] = []  # keep every added module and object alive

    def add(self, mod: llvm.ModuleRef, symbol: str) -> int:
        with self._lock:
            self.engine.add_module(mod)
            self.engine.finalize_object()
            self._modules.append(mod)
            return self.engine.get_function_address(symbol)

    def add_object(self, obj: bytes, symbol: str) -> int:
        """Load relocatable object code (from ``emit_jit_object``); the address of ``symbol``."""
        with self._lock:
            ref = llvm.ObjectFileRef.from_data(obj)
            self.engine.add_object_file(ref)
            self.engine.finalize_object()
            self._modules.append(ref)  # type: ignore[arg-type]
            address = self.engine.get_function_address(symbol)
        if not address:
            raise RuntimeError(f"object code does not define '{symbol}'")
        return address

    def emit_jit_object(self, mod: llvm.ModuleRef) -> bytes:
        """Object code of an optimized module for this engine (mutates ``mod``)."""
        with self._lock:
            return self.tm.emit_object(mod)


@cache
def engine() -> Engine:
    host()
    return Engine()


def parse_and_verify(text: str) -> llvm.ModuleRef:
    mod = llvm.parse_assembly(text)
    mod.verify()
    return mod


def optimize(mod: llvm.ModuleRef, level: int = 3, unroll: bool = True) -> None:
    """The new pass manager's default pipeline at ``level``, with loop and SLP
    vectorization on (SLP is off by default in llvmlite). ``unroll=False`` turns
    off the loop unroller (the vectorizer still interleaves)."""
    tm = engine().tm
    pto = llvm.create_pipeline_tuning_options(speed_level=level)
    pto.loop_vectorization = level >= 2
    pto.slp_vectorization = level >= 2
    pto.loop_unrolling = unroll
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)
