"""``ptx_program``: the one path from a kernel's lowered IR to PTX text and launch plan.

``wiac -o x.ptx`` (``tools/emit.py``) and the ``ptxsim`` / ``cuda`` jit targets
(``simbackend.py``, ``cuda.py``) both call it, so the file wiac writes is exactly
the module the jit loads for the same kernel, shapes, ``arch`` and ``opt_level``.

Invariants:
- The module given is never changed: the passes run on a copy.
- ``TargetOptions`` is the whitelist of target options (``TARGET_OPTIONS``); an
  unknown option or a bad value is a WiaUsageError naming the target.
- The default ``opt_level`` is wiac's default (-O2), so ``wiac -o`` without ``-O``
  and ``jit(..., target="cuda")`` without ``opt_level`` agree too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ...diagnostics import WiaUsageError
from ...ir.copying import copy_module
from ...ir.module import ModuleOp
from .emit import emit_ptx, emit_ptx_module
from .isa import DEFAULT_ARCH, MIN_VERSION

#: wiac's default -O level; the PTX targets' default opt_level
DEFAULT_OPT_LEVEL = 2
#: the jit options of the ptxsim and cuda targets
TARGET_OPTIONS = ("arch", "opt_level", "fast_math", "allow_tf32")

Shapes = dict[str, tuple[int | None, ...]]
#: IR -> optimized IR (a new module); wiac passes its own to honour -p and --print-ir-*
Optimizer = Callable[[ModuleOp], ModuleOp]


@dataclass(frozen=True)
class TargetOptions:
    """What shapes a PTX program besides the IR and input shapes."""

    arch: str = DEFAULT_ARCH
    opt_level: int = DEFAULT_OPT_LEVEL
    #: raw ``.approx.ftz`` transcendentals (emit_ptx's ``fast_math``, ``options.py``)
    fast_math: bool = False
    #: f32 matmuls on tensor cores in tf32 (``options.CodegenOptions``); default exact FMA
    allow_tf32: bool = False

    @classmethod
    def from_target(cls, target: str, options: Mapping[str, Any], arch: str) -> TargetOptions:
        """The jit options of target ``target`` (``arch``: the default when none is given)."""
        unknown = set(options) - set(TARGET_OPTIONS)
        if unknown:
            raise WiaUsageError(f"target '{target}' takes the options {', '.join(TARGET_OPTIONS)}, "
                                f"got {', '.join(sorted(unknown))}")
        chosen = options.get("arch") or arch
        if chosen not in MIN_VERSION:
            raise WiaUsageError(f"target '{target}': unknown arch {chosen!r}; "
                                f"archs: {', '.join(MIN_VERSION)}")
        level = options.get("opt_level", DEFAULT_OPT_LEVEL)
        if isinstance(level, bool) or not isinstance(level, int) or level not in range(4):
            raise WiaUsageError(f"target '{target}': opt_level must be 0..3, got {level!r}")
        flags = {}
        for name in ("fast_math", "allow_tf32"):
            flags[name] = options.get(name, False)
            if not isinstance(flags[name], bool):
                raise WiaUsageError(f"target '{target}': {name} must be True or False, "
                                    f"got {flags[name]!r}")
        return cls(chosen, level, **flags)


def optimized(module: ModuleOp, level: int) -> ModuleOp:
    """A copy of ``module`` after the ``-O<level>`` pipeline (-O0: no passes)."""
    work = copy_module(module)
    if level == 0:
        return work
    from ...passes import optimize

    result = optimize(work, level=level)
    return result if isinstance(result, ModuleOp) else work


def ptx_program(module: ModuleOp, kernels: Mapping[str, Shapes | None], options: TargetOptions,
                optimize: Optimizer | None = None) -> tuple[str, dict[str, Any]]:
    """PTX text and plan for ``kernels`` (name -> input shapes by parameter name, None
    or a None axis: symbolic) of the lowered, unoptimized ``module``. One kernel gives
    ``emit_ptx``'s module and plan, several ``emit_ptx_module``'s. ``optimize`` replaces
    the ``-O<opt_level>`` pipeline (wiac's ``-p``); by default it is ``optimized``."""
    if not kernels:
        raise WiaUsageError("no kernel to emit PTX for")
    ir = optimize(module) if optimize is not None else optimized(module, options.opt_level)
    if len(kernels) == 1:
        name, shapes = next(iter(kernels.items()))
        return emit_ptx(ir, name, options.arch, shapes, fast_math=options.fast_math,
                        allow_tf32=options.allow_tf32)
    return emit_ptx_module(ir, dict(kernels), options.arch, fast_math=options.fast_math,
                           allow_tf32=options.allow_tf32)
