"""Ahead-of-time outputs for ``wiac -o``: LLVM IR text, host assembly, an object file.

Each function specializes every kernel of ``kernels`` (name -> the shapes of its
parameters, one tuple each, ``()`` for scalars; a None extent is read at run time
from the entry's argument slots) of ``module`` (tensor-level IR) exactly as the
JIT does, optimizes at ``level`` and links them into one module,
with the gemm/conv helpers they call linked in once. The exported symbols have
the ABI of ``runtime.entry_wrapper``: ``wia_entry`` when there is one kernel,
``wia_entry_<kernel>`` for each when there are several (as a C file exports one
function per kernel).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import llvmlite.binding as llvm

from ...ir.module import ModuleOp
from .compile import build, lower_kernel
from .library import Spec, symbol
from .library_ir import link_into
from .target import target_machine

Shapes = Sequence[tuple[int | None, ...]]


def entry_symbol(kernel: str, several: bool) -> str:
    """The exported name of ``kernel``'s entry in an AOT module."""
    return f"wia_entry_{kernel}" if several else "wia_entry"


def _linked(module: ModuleOp, kernels: Mapping[str, Shapes], level: int) -> llvm.ModuleRef:
    """The optimized kernel modules linked into one, with each helper they call
    linked in once (library.py), so the output needs nothing from the JIT process."""
    if not kernels:
        raise ValueError("no kernel to emit")
    linked: llvm.ModuleRef | None = None
    helpers: dict[str, Spec] = {}
    for name, shapes in kernels.items():
        lowered = lower_kernel(module, name, shapes)
        mod = build(lowered, level)
        mod.get_function("wia_entry").name = entry_symbol(name, len(kernels) > 1)
        helpers.update((symbol(spec), spec) for spec in lowered.libraries)
        if linked is None:
            linked = mod
        else:
            linked.link_in(mod)  # internal names that collide are renamed by the linker
    assert linked is not None
    link_into(linked, list(helpers.values()))
    return linked


def emit_llvm(module: ModuleOp, kernels: Mapping[str, Shapes], level: int = 3) -> str:
    """Optimized LLVM IR of the specialized kernels."""
    return str(_linked(module, kernels, level))


def emit_asm(module: ModuleOp, kernels: Mapping[str, Shapes], level: int = 3) -> str:
    """Host assembly (the JIT's CPU name and features) of the specialized kernels."""
    return target_machine(jit=False).emit_assembly(_linked(module, kernels, level))


def emit_object(module: ModuleOp, kernels: Mapping[str, Shapes], level: int = 3) -> bytes:
    """A relocatable host object file exporting each kernel's entry."""
    return target_machine(jit=False).emit_object(_linked(module, kernels, level))
