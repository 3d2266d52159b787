"""The llvmlite CPU backend: loop-level IR -> LLVM IR -> host code (JIT or ahead of time)."""

from .emit import emit_asm, emit_llvm, emit_object

__all__ = ["emit_asm", "emit_llvm", "emit_object"]
