"""Optimization remarks: what a pass did or did not do, and why, per op.

Invariants:
- A remark names its kind (``fused``, ``missed``, ``folded``, ``analysis``), the
  pass, and the op it is about: its source ``loc`` when the lowering set
  ``Operation.loc`` (a ``Span``), and always the op's text at the time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..ir.core import Operation

REMARK_KINDS = ("fused", "missed", "folded", "analysis")


@dataclass(frozen=True)
class Remark:
    kind: str
    message: str
    pass_name: str
    loc: Any = None
    op_text: str = ""

    def __post_init__(self) -> None:
        if self.kind not in REMARK_KINDS:
            raise ValueError(f"remark kind must be one of {REMARK_KINDS}, got {self.kind!r}")

    def render(self) -> str:
        """``file:line:col: remark [pass]: message`` (with the caret when a span is
        known), else the op text as the location."""
        head = f"remark [{self.pass_name}] {self.kind}: {self.message}"
        if self.loc is not None and hasattr(self.loc, "source"):
            try:
                return f"{self.loc}: {head}\n{self.loc.render_caret()}"  # type: ignore[union-attr]
            except AttributeError:
                return f"{self.loc}: {head}"
        return f"{head}\n    at: {self.op_text}" if self.op_text else head


def op_location(op: Operation | None) -> tuple[Any, str]:
    """(source span or None, op text) for a remark about ``op``."""
    if op is None:
        return None, ""
    from ..ir.printer import print_op
    try:
        text = print_op(op).split("\n")[0]
    except Exception:  # noqa: BLE001 - a remark must never break a pass
        text = op.name
    return getattr(op, "loc", None), text
