"""``emit_ptx``: a kernel of a module -> (PTX module text, JSON-able launch plan).

The pipeline, top to bottom: copy the module and inline calls (``lower.inline``),
plan values and fuse ops into device kernels (``lower.planner``), render each
kernel's PTX (``kernels.*``), assemble the module text (``builder.module_text``).
The plan format is documented in docs/ptx.md.
"""

from __future__ import annotations

from typing import Any

from ...ir.module import ModuleOp
from .builder import module_text
from .isa import DEFAULT_ARCH, isa_version
from .lower.inline import inlined_kernel
from .lower.planner import Planner

PLAN_FORMAT = "wiadsl-ptx-plan/1"
MAX_UNIFY_ROUNDS = 4


def _merge(aliases: dict[str, str], pairs: list[tuple[str, str]]) -> dict[str, str]:
    """Union-find over dim symbols: every symbol -> the smallest name of its class."""
    parent = dict(aliases)

    def find(x: str) -> str:
        while parent.get(x, x) != x:
            x = parent[x]
        return x

    for a, b in pairs:
        ra, rb = find(a), find(b)
        if ra != rb:
            lo, hi = sorted((ra, rb))
            parent[hi] = lo
    return {k: find(k) for k in parent}


def emit_ptx(module: ModuleOp, kernel: str, arch: str = DEFAULT_ARCH,
             shapes: dict[str, tuple[int, ...]] | None = None) -> tuple[str, dict[str, Any]]:
    """PTX text and launch plan for ``kernel``; ``shapes`` fixes input extents by name."""
    isa_version(arch)  # validates arch before any work
    func = inlined_kernel(module, kernel)
    aliases: dict[str, str] = {}
    for _ in range(MAX_UNIFY_ROUNDS):  # re-plan until equal input dims share one symbol
        planner = Planner(func, shapes, aliases, arch)
        plan = planner.run()
        merged = _merge(aliases, planner.equalities)
        if merged == aliases:
            break
        aliases = merged
    comment = f"wiadsl PTX for kernel '{kernel}' ({len(planner.kernels)} device kernels)"
    text = module_text([k.builder for k in planner.kernels], arch, comment)
    plan = {"format": PLAN_FORMAT, "arch": arch, **plan,
            "kernels": [{"name": k.name, "kind": k.kind,
                         "params": [p.ptype for p in k.builder.params],
                         "shared_bytes": k.builder.shared_bytes} for k in planner.kernels]}
    return text, plan
