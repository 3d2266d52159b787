"""``emit_ptx``: a kernel of a module -> (PTX module text, JSON-able launch plan);
``emit_ptx_module``: several kernels -> one PTX module and one plan file.

The pipeline, top to bottom: copy the module and inline calls (``lower.inline``),
plan values and fuse ops into device kernels (``lower.planner``), render each
kernel's PTX (``kernels.*``), assemble the module text (``builder.module_text``).
The plan format is documented in docs/ptx.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...diagnostics import WiaUsageError
from ...ir.module import ModuleOp
from .builder import KernelBuilder, module_text
from .isa import DEFAULT_ARCH, isa_version
from .lower.inline import inlined_kernel
from .lower.planner import Planner
from .options import CodegenOptions, using

PLAN_FORMAT = "wiadsl-ptx-plan/1"
MODULE_FORMAT = "wiadsl-ptx-module/1"  # one plan per kernel of a multi-kernel module
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


@dataclass
class DevicePlan:
    """One WIA kernel planned for the device: its PTX entries and its launch plan."""

    builders: list[KernelBuilder]
    plan: dict[str, Any]


def plan_kernel(module: ModuleOp, kernel: str, arch: str = DEFAULT_ARCH,
                shapes: dict[str, tuple[int | None, ...]] | None = None,
                fast_math: bool = False, allow_tf32: bool = False) -> DevicePlan:
    """Plan ``kernel``; ``shapes`` fixes input extents by name (None: that axis stays
    symbolic); ``fast_math``: raw ``.approx.ftz`` transcendentals; ``allow_tf32``: f32
    matmuls on tensor cores in tf32 (``options``)."""
    isa_version(arch)  # validates arch before any work
    for name, flag in (("fast_math", fast_math), ("allow_tf32", allow_tf32)):
        if not isinstance(flag, bool):
            raise WiaUsageError(f"{name} must be True or False, got {flag!r}")
    with using(CodegenOptions(fast_math=fast_math, allow_tf32=allow_tf32, arch=arch)):
        return _plan(module, kernel, arch, shapes)


def _plan(module: ModuleOp, kernel: str, arch: str,
          shapes: dict[str, tuple[int | None, ...]] | None) -> DevicePlan:
    func = inlined_kernel(module, kernel)
    aliases: dict[str, str] = {}
    for _ in range(MAX_UNIFY_ROUNDS):  # re-plan until equal input dims share one symbol
        planner = Planner(func, shapes, aliases, arch)
        plan = planner.run()
        merged = _merge(aliases, planner.equalities)
        if merged == aliases:
            break
        aliases = merged
    plan = {"format": PLAN_FORMAT, "arch": arch, **plan,
            "kernels": [{"name": k.name, "kind": k.kind,
                         "params": [p.ptype for p in k.builder.params],
                         "shared_bytes": k.builder.shared_bytes} for k in planner.kernels]}
    return DevicePlan([k.builder for k in planner.kernels], plan)


def emit_ptx(module: ModuleOp, kernel: str, arch: str = DEFAULT_ARCH,
             shapes: dict[str, tuple[int | None, ...]] | None = None,
             fast_math: bool = False, allow_tf32: bool = False) -> tuple[str, dict[str, Any]]:
    """PTX text and launch plan for ``kernel``; ``shapes`` fixes input extents by name."""
    planned = plan_kernel(module, kernel, arch, shapes, fast_math, allow_tf32)
    comment = (f"wiadsl PTX for kernel '{kernel}' ({len(planned.builders)} device kernels"
               f"{', fast math' if fast_math else ''}{', tf32' if allow_tf32 else ''})")
    return module_text(planned.builders, arch, comment), planned.plan


def emit_ptx_module(module: ModuleOp, kernels: dict[str, dict[str, tuple[int | None, ...]] | None],
                    arch: str = DEFAULT_ARCH, fast_math: bool = False,
                    allow_tf32: bool = False) -> tuple[str, dict[str, Any]]:
    """One PTX module holding the device entries of every kernel in ``kernels`` (name ->
    its input shapes, as for ``emit_ptx``), as nvcc puts every ``__global__`` of a file in
    one module, and one plan file: ``{"format": MODULE_FORMAT, "arch", "order": [kernels
    in declaration order], "plans": {kernel: plan}}``. Entry names already start with their kernel's name (``attn_k1_row``)."""
    planned = {name: plan_kernel(module, name, arch, shapes, fast_math, allow_tf32)
               for name, shapes in kernels.items()}
    builders = [b for p in planned.values() for b in p.builders]
    owners: dict[str, str] = {}
    for name, p in planned.items():
        for b in p.builders:
            if b.name in owners:  # a kernel named like another's entry ('a' vs 'a_k1')
                raise WiaUsageError(f"kernels '{owners[b.name]}' and '{name}' both have a device "
                                    f"entry named '{b.name}': emit them one at a time with --kernel")
            owners[b.name] = name
    comment = (f"wiadsl PTX for kernels {', '.join(repr(k) for k in planned)} "
               f"({len(builders)} device kernels)")
    plan = {"format": MODULE_FORMAT, "arch": arch, "order": list(planned),
            "plans": {name: p.plan for name, p in planned.items()}}
    return module_text(builders, arch, comment), plan
