"""``canonicalize``: op-owned patterns, constant folding and trivial DCE to a fixpoint.

The patterns live with the ops (``rewrite.canonical`` fills ``pattern.OWNED``,
or an op class defines ``canonicalization_patterns``); this pass only drives them.
"""

from __future__ import annotations

from ..ir.module import ModuleOp
from ..records import record
from ..rewrite import canonical  # noqa: F401  (registers the op-owned patterns)
from ..rewrite.pattern import apply_patterns_greedily
from .base import Pass, PassContext, register_pass


@register_pass
@record(frozen=True)
class Canonicalize(Pass):
    """Simplify every function; ``fold=false`` keeps constant folding off."""

    name = "canonicalize"
    fold: bool = True

    def run(self, module: ModuleOp, ctx: PassContext) -> None:
        applied = apply_patterns_greedily(module, [], fold=self.fold, use_owned=True)
        for label, n in applied.items():
            ctx.count(label, n)
