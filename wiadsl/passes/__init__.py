"""Optimization passes: the PassManager, pipelines and every registered pass.

``optimize(module, level=2)`` runs ``default_pipeline(level)`` (or ``pipeline``)
in place, verifying after each pass. See docs/ir.md, "Optimization passes".
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..ir.module import ModuleOp
from ..lazy import lazy_exports

# Lazy (issue 21): ``import wiadsl.passes.base`` (the pipeline texts, for a cache
# key) must not import every pass; the registry loads when a pipeline is parsed.
__getattr__, __dir__ = lazy_exports(__name__, {
    "PASSES": ".registry_view", "Pass": ".base", "PassContext": ".base",
    "PassManager": ".base", "_split_top": ".base", "default_pipeline": ".base",
    "parse_pipeline": ".base", "Remark": ".remarks", "format_remarks": ".remarks",
    "specialize_shapes": ".shape_specialize",
})

if TYPE_CHECKING:
    from ..rewrite.pattern import RewritePattern
    from .remarks import Remark


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
    from .base import PassManager, _split_top, default_pipeline
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
