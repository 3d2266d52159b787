"""The loop level: lowering tensor-level IR to loops over buffers (docs/ir.md, "Loop level")."""

from ..lazy import lazy_exports

__getattr__, __dir__ = lazy_exports(__name__, {
    "lower_module": ".lower",
})

__all__ = ["lower_module"]
