"""Ahead-of-time outputs for ``wiac -o``: LLVM IR text, host assembly, an object file.

Each function specializes ``kernel`` of ``module`` (tensor-level IR) to
``shapes`` (one tuple per parameter; ``()`` for scalars), exactly as the JIT
does, and optimizes at ``level``. The exported symbol is ``wia_entry`` with the
ABI of ``runtime.entry_wrapper``.
"""

from __future__ import annotations

from collections.abc import Sequence

import llvmlite.binding as llvm

from ...ir.module import ModuleOp
from .compile import build, lower_kernel
from .library import link_into
from .target import target_machine


def _linked(module: ModuleOp, kernel: str, shapes: Sequence[tuple[int, ...]], level: int) -> llvm.ModuleRef:
    """The optimized kernel module with the gemm/conv helpers it calls linked in
    (library.py), so the output needs nothing from the JIT process."""
    lowered = lower_kernel(module, kernel, shapes)
    mod = build(lowered, level)
    link_into(mod, lowered.libraries)
    return mod


def emit_llvm(module: ModuleOp, kernel: str, shapes: Sequence[tuple[int, ...]], level: int = 3) -> str:
    """Optimized LLVM IR of the specialized kernel."""
    return str(_linked(module, kernel, shapes, level))


def emit_asm(module: ModuleOp, kernel: str, shapes: Sequence[tuple[int, ...]], level: int = 3) -> str:
    """Host assembly (the JIT's CPU name and features) of the specialized kernel."""
    return target_machine(jit=False).emit_assembly(_linked(module, kernel, shapes, level))


def emit_object(module: ModuleOp, kernel: str, shapes: Sequence[tuple[int, ...]], level: int = 3) -> bytes:
    """A relocatable host object file exporting ``wia_entry``."""
    return target_machine(jit=False).emit_object(_linked(module, kernel, shapes, level))
