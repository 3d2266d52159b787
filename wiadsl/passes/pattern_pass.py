"""``patterns``: apply the declarative rewrite patterns (``rewrite/patterns/*.pat``
plus any loaded by the user) with the greedy driver.

``patterns{files=a.pat}`` adds pattern files (``;`` separates several);
``builtin=false`` skips the shipped ones.
"""

from __future__ import annotations

from ..ir.module import ModuleOp
from ..records import record
from ..rewrite.declarative import builtin_patterns, load_patterns
from ..rewrite.pattern import RewritePattern, apply_patterns_greedily
from .base import Pass, PassContext, register_pass

#: Patterns added by ``optimize(..., patterns=[...])`` for the current run.
EXTRA: list[RewritePattern] = []


@register_pass
@record(frozen=True)
class ApplyPatterns(Pass):
    name = "patterns"
    files: str = ""
    builtin: bool = True

    def run(self, module: ModuleOp, ctx: PassContext) -> None:
        pats: list[RewritePattern] = list(builtin_patterns()) if self.builtin else []
        for f in filter(None, self.files.split(";")):
            pats += load_patterns(f)
        pats += EXTRA
        for label, n in apply_patterns_greedily(module, pats, fold=False).items():
            ctx.count(label, n)
            ctx.remark("fused", f"pattern {label} applied {n} time(s)")
