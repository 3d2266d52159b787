"""Optimization passes: the PassManager, pipelines and every registered pass.

``optimize(module, level=2)`` runs ``default_pipeline(level)`` (or ``pipeline``)
in place, verifying after each pass. See docs/ir.md, "Optimization passes".
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..ir.module import ModuleOp
from . import registry  # noqa: F401  (fills PASSES)
from .base import (
    PASSES,
    Pass,
    PassContext,
    PassManager,
    _split_top,
    default_pipeline,
    parse_pipeline,
)
from .remarks import Remark, format_remarks
from .shape_specialize import specialize_shapes

if TYPE_CHECKING:
    from ..rewrite.pattern import RewritePattern


def optimize(module: ModuleOp, level: int = 2, pipeline: str | None = None,
             patterns: Iterable[Any] | None = None, remarks: list[Remark] | None = None,
             **pm_options: Any) -> ModuleOp:
    """Optimize ``module`` in place and return it.

    ``patterns``: extra declarative patterns (``load_patterns`` results, pattern
    text or ``.pat`` paths) for the ``patterns`` pass; ``remarks``: a list that
    collects the optimization remarks; ``pm_options``: ``PassManager`` options.
    """
    from ..rewrite.declarative import load_patterns
    from . import pattern_pass
    extra: list[RewritePattern] = []
    for p in patterns or ():
        extra += load_patterns(p) if isinstance(p, str) else [p]
    text = default_pipeline(level) if pipeline is None else pipeline
    items = [p for p in _split_top(text) if p.strip()]
    names = [p.strip().split("{")[0] for p in items]
    if extra and "patterns" not in names:
        # user patterns run right before fusion (or last when there is no fuse)
        at = names.index("fuse") if "fuse" in names else len(names)
        text = ",".join([*items[:at], "patterns", *items[at:]])
    pm = PassManager(text, remarks=remarks, **pm_options)
    pattern_pass.EXTRA[:] = extra
    try:
        return pm.run(module)
    finally:
        pattern_pass.EXTRA[:] = []


__all__ = ["PASSES", "Pass", "PassContext", "PassManager", "Remark", "default_pipeline", "format_remarks",
           "optimize", "parse_pipeline", "specialize_shapes"]
