"""The optional parts of the compiler the tools expose, found by name at run time.

Passes and backends are built in their own packages; the tools import them
lazily, so a build (or a checkout) without one still runs every other command.
``require(feature)`` returns the callable or raises a ``WiaUsageError`` that says
what is missing; nothing is ever faked in its place.

Invariant: each ``Feature`` names a module and the attribute the tools call; the
table below is the only place that spells those names.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..diagnostics import WiaUsageError


@dataclass(frozen=True)
class Feature:
    """One optional entry point: ``attr`` of the first of ``modules`` that has it."""

    what: str
    modules: tuple[str, ...]
    attr: str

    @property
    def module(self) -> str:
        return self.modules[0]


FEATURES: dict[str, Feature] = {
    "optimize": Feature("the optimization passes", ("wiadsl.passes",), "optimize"),
    "default_pipeline": Feature("the default pass pipelines", ("wiadsl.passes",),
                                "default_pipeline"),
    "parse_pipeline": Feature("pipeline strings", ("wiadsl.passes",), "parse_pipeline"),
    "llvm": Feature("the LLVM (CPU) backend", ("wiadsl.backends.llvm",), "emit_llvm"),
    "cpu_pipeline": Feature("the LLVM (CPU) backend", ("wiadsl.backends.llvm.compile",),
                            "cpu_pipeline"),
    "asm": Feature("host assembly output", ("wiadsl.backends.llvm",), "emit_asm"),
    "obj": Feature("object file output", ("wiadsl.backends.llvm",), "emit_object"),
    "ptx": Feature("the PTX backend", ("wiadsl.backends.ptx", "wiadsl.backends.ptx.emit"),
                   "emit_ptx"),
    "ptx_module": Feature("the PTX backend", ("wiadsl.backends.ptx.emit",), "emit_ptx_module"),
    "ptx_program": Feature("the PTX backend", ("wiadsl.backends.ptx.program",), "ptx_program"),
    "sasm": Feature("the systolic-array backend", ("wiadsl.backends.systolic",), "emit_sasm"),
    "sasm_program": Feature("the systolic-array backend", ("wiadsl.backends.systolic",),
                            "emit_sasm_program"),
}


def find(name: str) -> Callable[..., Any] | None:
    """The entry point ``name`` of ``FEATURES``, or None when this build lacks it."""
    feature = FEATURES[name]
    for module_name in feature.modules:
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            # Only a missing module of ours means "not built"; a broken dependency
            # inside it is a real error and must not be hidden.
            if exc.name is None or not module_name.startswith(exc.name):
                raise
            continue
        found = getattr(module, feature.attr, None)
        if found is not None:
            return found
    return None


def available(name: str) -> bool:
    return find(name) is not None


def require(name: str) -> Callable[..., Any]:
    """The entry point ``name``, or a WiaUsageError naming what this build lacks."""
    fn = find(name)
    if fn is None:
        feature = FEATURES[name]
        raise WiaUsageError(f"not available in this build: {feature.what} "
                            f"({feature.module}.{feature.attr} is missing)")
    return fn
