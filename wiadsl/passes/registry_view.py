"""``PASSES`` with every pass registered (``wiadsl.passes.PASSES`` resolves here)."""

from . import registry  # noqa: F401  (fills PASSES)
from .base import PASSES

__all__ = ["PASSES"]
