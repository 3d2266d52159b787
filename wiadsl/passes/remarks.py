"""Optimization remarks: what a pass did or did not do, and why, per op.

Invariants:
- A remark names its kind (``fused``, ``missed``, ``folded``, ``analysis``), the
  pass, and the op it is about: its source ``loc`` (a ``diagnostics.Span``, set
  by the lowering and kept by every pass) and the op's text at the time.
- ``render`` looks like a diagnostic: ``file:line:col: remark: message`` followed
  by the source line and a caret under the span; without a span it falls back to
  ``remark: message`` and the op's text.
- ``format_remarks`` orders remarks by source position (unlocated ones last, in
  the order passes made them) and drops exact repeats: what ``wiac --remarks`` prints.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..ir.core import Operation, Value
from ..records import record

REMARK_KINDS = ("fused", "missed", "folded", "analysis")


@record(frozen=True)
class Remark:
    kind: str
    message: str
    pass_name: str
    loc: Any = None
    op_text: str = ""

    def __post_init__(self) -> None:
        if self.kind not in REMARK_KINDS:
            raise ValueError(f"remark kind must be one of {REMARK_KINDS}, got {self.kind!r}")

    @property
    def has_span(self) -> bool:
        return hasattr(self.loc, "source") and hasattr(self.loc, "render_caret")

    def position(self) -> tuple[str, int, int] | None:
        """(file, line, column) when the remark has a source span."""
        if not self.has_span:
            return None
        return (self.loc.filename, self.loc.line, self.loc.column)

    def render(self) -> str:
        """``file:line:col: remark: message`` + source line + caret (or the op text)."""
        pos = self.position()
        if pos is not None:
            return f"{pos[0]}:{pos[1]}:{pos[2]}: remark: {self.message}\n{self.loc.render_caret()}"
        head = f"remark: {self.message}"
        return f"{head}\n    at: {self.op_text}" if self.op_text else head


def format_remarks(remarks: Iterable[Remark]) -> str:
    """All remarks rendered, ordered by source position, exact repeats dropped."""
    seen: set[tuple[Any, ...]] = set()
    located: list[tuple[tuple[str, int, int], int, Remark]] = []
    unlocated: list[Remark] = []
    for i, r in enumerate(remarks):
        pos = r.position()
        key = (pos, r.kind, r.message, None if pos else r.op_text)
        if key in seen:
            continue
        seen.add(key)
        if pos is None:
            unlocated.append(r)
        else:
            located.append((pos, i, r))
    ordered = [r for _, _, r in sorted(located, key=lambda t: (t[0], t[1]))] + unlocated
    return "".join(r.render() + "\n" for r in ordered)


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


def value_names(values: Iterable[Value], limit: int = 4) -> str:
    """``%h, %r`` (unnamed values as ``%?``), at most ``limit`` then ``...``."""
    names = ["%" + (v.name_hint or "?") for v in values]
    return ", ".join(names[:limit]) + (", ..." if len(names) > limit else "")
