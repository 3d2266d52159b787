"""The package layering ARCHITECTURE.md describes, checked from the import statements.

A lower layer never imports a higher one: the IR knows nothing of the language,
the frontend knows the IR but no pass, backend or runtime, the compile cache knows
no backend and no runtime, the backends never import the runtime (the jit API
above them: they implement backends/contract.py), and ONNX import sits above the
frontend and the runtime (only the CLI and the top-level API use it).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "wiadsl"

#: package -> the wiadsl packages it may import (itself aside)
ALLOWED = {
    "ir": {"diagnostics", "dtypes", "lazy", "records"},
    "frontend": {"diagnostics", "dtypes", "gcpause", "generated", "ir", "lazy", "records",
                 "resources"},
    "cache": {"__version__", "diagnostics", "dtypes", "forking", "ir", "records", "resources",
              "signature"},
    # tune: its stored records only (``tune.records``: the autotuner's gemm configs)
    "backends": {"cache", "diagnostics", "dtypes", "forking", "gcpause", "ir", "lazy", "loops",
                 "passes", "records", "signature", "tune"},
    "onnx": {"backends", "cache", "diagnostics", "dtypes", "frontend", "ir", "records", "runtime",
             "signature"},
}
#: package -> the only packages that may import it
IMPORTED_ONLY_BY = {"onnx": {"__init__", "tools"}}


def _imports(path: Path) -> set[str]:
    """The wiadsl top-level packages that ``path`` imports (absolute or relative)."""
    parts = path.relative_to(PACKAGE).parts
    here = ["wiadsl", *parts[:-1]]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[list[str]] = []
        if isinstance(node, ast.ImportFrom):
            base = here[: len(here) - node.level + 1] if node.level else []
            names = [base + (node.module.split(".") if node.module else [])]
            if node.module is None:  # from . import a, b
                names = [base + [a.name] for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name.split(".") for a in node.names]
        found |= {n[1] for n in names if len(n) > 1 and n[0] == "wiadsl"}
    return found


def _package_of(path: Path) -> str:
    parts = path.relative_to(PACKAGE).parts
    return parts[0] if len(parts) > 1 else parts[0].removesuffix(".py")


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_a_package_imports_only_the_layers_below_it(package: str) -> None:
    wrong = {f"{p.relative_to(PACKAGE)} imports wiadsl.{name}"
             for p in _modules() if _package_of(p) == package
             for name in _imports(p) - ALLOWED[package] - {package}}
    assert not wrong, sorted(wrong)


@pytest.mark.parametrize("package", sorted(IMPORTED_ONLY_BY))
def test_a_top_layer_is_imported_only_from_above(package: str) -> None:
    wrong = {str(p.relative_to(PACKAGE)) for p in _modules()
             if _package_of(p) not in IMPORTED_ONLY_BY[package] | {package}
             and package in _imports(p)}
    assert not wrong, sorted(wrong)


def test_the_checker_sees_relative_imports() -> None:
    """The checker itself: the importer's relative imports are found."""
    assert {"frontend", "runtime"} <= _imports(PACKAGE / "onnx" / "module.py") | \
        _imports(PACKAGE / "onnx" / "importer.py") | _imports(PACKAGE / "onnx" / "text.py")
