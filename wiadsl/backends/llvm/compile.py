"""One kernel specialization: tensor IR + concrete input shapes -> LLVM module.

Pipeline: ``wiadsl.loops.lower_module`` with the kernel's parameter extents as
constants (shape specialization) ->
``ModuleEmitter`` -> entry wrapper -> LLVM text, parsed and verified.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import llvmlite.binding as llvm

from ...ir.module import ModuleOp
from ...ir.types import IRType, TensorType
from ...ir.verifier import verify
from ...loops import lower_module
from .codegen import ModuleEmitter, slot_count
from .runtime import entry_wrapper
from .target import host, optimize, parse_and_verify


@dataclass
class LoweredKernel:
    """The LLVM module of one specialization and what the caller needs to run it."""

    llvm_ir: str
    messages: list[tuple[str, Any]]  # (message, source span or None) per error code
    param_types: list[IRType]
    result_types: list[IRType]
    loop_ir: ModuleOp

    @property
    def result_slots(self) -> int:
        return sum(slot_count(t) for t in self.result_types)


def lower_kernel(module: ModuleOp, kernel: str, shapes: Sequence[tuple[int, ...]]) -> LoweredKernel:
    loops = lower_module(module, {kernel: list(shapes)})
    verify(loops)
    emitter = ModuleEmitter(loops, f"wia_{kernel}", host().triple)
    func = loops[kernel]
    kfn = emitter.functions[kernel]
    k = 1
    for t in func.arg_types:
        if isinstance(t, TensorType):
            kfn.args[k].add_attribute("noalias")  # inputs are read-only: never written
        k += 1 + (t.rank if isinstance(t, TensorType) else 0)
    entry_wrapper(emitter.ll, kfn, list(func.arg_types), list(shapes), list(func.result_types))
    return LoweredKernel(str(emitter.ll), emitter.messages, list(func.arg_types),
                         list(func.result_types), loops)


def build(lowered: LoweredKernel, level: int = 3) -> llvm.ModuleRef:
    """Parse, verify and optimize the module (ready for the engine or for codegen)."""
    mod = parse_and_verify(lowered.llvm_ir)
    optimize(mod, level)
    return mod


__all__ = ["build", "lower_kernel"]
