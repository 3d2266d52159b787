"""The loop level: lowering tensor-level IR to loops over buffers (docs/ir.md, "Loop level")."""

from .lower import lower_module

__all__ = ["lower_module"]
