"""The optimization pipeline as the tools drive it: whole, or one pass at a time.

``optimize_ir`` runs ``wiadsl.passes.optimize`` with the command line's options;
``pass_steps`` runs a pipeline pass by pass and keeps the IR text after each, for
the REPL's ``:passes`` / ``:diff`` and for ``wiac check --bisect``.

Invariants:
- Neither function changes the module it is given: both work on a copy (the
  printed IR parsed back), so callers may keep the unoptimized IR.
- ``-O0`` without ``-p`` is "no passes" by definition, so it works in a build
  without the passes; anything else needs them (``features.require``).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..diagnostics import WiaUsageError
from ..ir import ModuleOp, print_module
from ..ir.copying import copy_module
from .features import available, require

#: The pass-manager switches the command line forwards (argparse dest -> optimize kwarg).
PM_OPTIONS = ("print_ir_after_all", "print_ir_after", "print_ir_after_change", "time_passes")


@dataclass
class OptOptions:
    """What the command line (or the REPL) says about optimization."""

    level: int = 2
    pipeline: str | None = None
    pm_options: dict[str, Any] = field(default_factory=dict)
    patterns: list[str] = field(default_factory=list)


def optimize_ir(module: ModuleOp, opts: OptOptions,
                remarks: list[Any] | None = None) -> ModuleOp:
    """The module after the pipeline ``opts`` selects (a new module)."""
    if opts.level == 0 and opts.pipeline is None and not available("optimize"):
        if opts.pm_options or opts.patterns or remarks is not None:
            require("optimize")
        return copy_module(module)
    optimize = require("optimize")
    kwargs: dict[str, Any] = dict(opts.pm_options)
    if opts.patterns:
        kwargs["patterns"] = list(opts.patterns)
    if remarks is not None:
        kwargs["remarks"] = remarks
    work = copy_module(module)
    result = optimize(work, level=opts.level, pipeline=opts.pipeline, **kwargs)
    return result if isinstance(result, ModuleOp) else work


def pipeline_passes(level: int, pipeline: str | None = None) -> list[str]:
    """The pass specs (``cse``, ``tile{sizes=32,32}``) of a pipeline, in order."""
    if pipeline is None:
        pipeline = require("default_pipeline")(level)
    if isinstance(pipeline, str):
        return split_pipeline(pipeline)
    return [_spec(p) for p in pipeline]


def split_pipeline(text: str) -> list[str]:
    """``'inline,tile{sizes=32,32},cse'`` -> ``['inline', 'tile{sizes=32,32}', 'cse']``."""
    specs, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            specs.append(text[start:i].strip())
            start = i + 1
    specs.append(text[start:].strip())
    return [s for s in specs if s]


def _spec(p: object) -> str:
    for attr in ("spec", "pipeline_text"):
        value = getattr(p, attr, None)
        if isinstance(value, str):
            return value
    name = getattr(p, "name", None)
    return name if isinstance(name, str) else str(p)


def pass_name(spec: str) -> str:
    """The name of a pass spec: ``tile{sizes=32}`` -> ``tile``."""
    return re.split(r"[{\s]", spec, maxsplit=1)[0]


@dataclass(frozen=True)
class PassStep:
    """The IR text before and after one pass of a pipeline."""

    index: int
    spec: str
    before: str
    after: str

    @property
    def name(self) -> str:
        return pass_name(self.spec)

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def diff(self, label: str = "") -> str:
        lines = difflib.unified_diff(
            self.before.splitlines(keepends=True), self.after.splitlines(keepends=True),
            fromfile=f"before {self.spec}{label}", tofile=f"after {self.spec}{label}")
        return "".join(lines)


def pass_steps(module: ModuleOp, specs: Sequence[str]) -> list[PassStep]:
    """Run ``specs`` one at a time from ``module``; the IR around each pass."""
    optimize = require("optimize")
    steps: list[PassStep] = []
    current = copy_module(module)
    for i, spec in enumerate(specs):
        before = print_module(current)
        result = optimize(current, level=0, pipeline=spec)
        current = result if isinstance(result, ModuleOp) else current
        steps.append(PassStep(i, spec, before, print_module(current)))
    return steps


def find_step(steps: Sequence[PassStep], name: str) -> PassStep:
    """The step whose spec or pass name is ``name`` (the first), or a WiaUsageError."""
    for step in steps:
        if name in (step.spec, step.name):
            return step
    if name.isdigit() and int(name) < len(steps):
        return steps[int(name)]
    known = ", ".join(s.spec for s in steps) or "none"
    raise WiaUsageError(f"no pass '{name}' in the pipeline; passes: {known}")
