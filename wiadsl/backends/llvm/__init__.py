"""The llvmlite CPU backend: loop-level IR -> LLVM IR -> host code (JIT or ahead of time)."""

from ...lazy import lazy_exports

__getattr__, __dir__ = lazy_exports(__name__, {
    "emit_asm": ".emit",
    "emit_llvm": ".emit",
    "emit_object": ".emit",
})

__all__ = ["emit_asm", "emit_llvm", "emit_object"]
