"""Load a program and, recursively, the modules it imports.

``import NAME;`` in a file F resolves to the first that exists of:
  1. ``NAME.wia`` in the folder of F (only when F is a real file, not ``<string>``),
  2. ``stdlib/NAME.wia`` (``resources.stdlib_dir()``).
The file next to the importer wins so a project can shadow a stdlib module;
``extra_paths`` (searched between the two) lets tools add folders.

Invariants:
- A module name denotes one file in a program: two imports of ``nn`` that resolve
  to different files are an error, as are cyclic imports (``a -> b -> a``).
- Every ``Import`` of every loaded file resolves to a key of ``modules``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..diagnostics import WiaError, WiaImportError, raise_all
from ..records import field, record
from ..resources import stdlib_dir
from . import ast

MAIN_MODULE = "<main>"


@record(frozen=True)
class LoadedProgram:
    """The main program and every module it imports (transitively), by module name."""

    main: ast.Program
    modules: dict[str, ast.Program] = field(default_factory=dict)

    def program(self, module: str) -> ast.Program:
        """The program of ``module``; ``MAIN_MODULE`` is the main file."""
        return self.main if module == MAIN_MODULE else self.modules[module]

    @property
    def module_names(self) -> list[str]:
        return [MAIN_MODULE, *self.modules]


def _parse(text: str, filename: str) -> ast.Program:
    from .parser import parse_source  # the parser imports Lark; keep this module light

    return parse_source(text, filename)


def _is_file(filename: str) -> bool:
    return not (filename.startswith("<") and filename.endswith(">"))


class _Loader:
    def __init__(self, extra_paths: Sequence[Path]):
        self.extra_paths = list(extra_paths)
        self.modules: dict[str, ast.Program] = {}
        self.paths: dict[str, Path] = {}
        self.errors: list[WiaError] = []

    def candidates(self, name: str, importer: str) -> list[Path]:
        folders = [Path(importer).resolve().parent] if _is_file(importer) else []
        folders += self.extra_paths + [stdlib_dir()]
        return [f / f"{name}.wia" for f in folders]

    def visit(self, program: ast.Program, stack: list[tuple[str, str]]) -> None:
        """Load every import of ``program``; ``stack`` holds (module, resolved path) being loaded."""
        for imp in program.of_type(ast.Import):
            self.visit_import(imp, program.filename, stack)

    def visit_import(self, imp: ast.Import, importer: str, stack: list[tuple[str, str]]) -> None:
        path = next((p for p in self.candidates(imp.module, importer) if p.is_file()), None)
        if path is None:
            self.errors.append(WiaImportError(
                f"cannot find module '{imp.module}': no {imp.module}.wia next to "
                f"this file or in the stdlib", imp.span))
            return
        resolved = str(path.resolve())
        on_stack = [p for _, p in stack]
        if resolved in on_stack:
            names = [n for n, _ in stack[on_stack.index(resolved):]] + [imp.module]
            self.errors.append(WiaImportError(f"cyclic import: {' -> '.join(names)}", imp.span))
            return
        known = self.paths.get(imp.module)
        if known is not None:
            if str(known) != resolved:
                self.errors.append(WiaImportError(
                    f"module '{imp.module}' resolves to both {known} and {resolved}", imp.span))
            return
        self.paths[imp.module] = Path(resolved)
        program = _parse(path.read_text(encoding="utf-8"), str(path))
        self.modules[imp.module] = program
        self.visit(program, stack + [(imp.module, resolved)])


def _main_key(filename: str) -> tuple[str, str]:
    name = Path(filename).stem if _is_file(filename) else MAIN_MODULE
    path = str(Path(filename).resolve()) if _is_file(filename) else filename
    return name, path


def load_program(text: str, filename: str = "<string>",
                 extra_paths: Sequence[Path] = ()) -> LoadedProgram:
    """Parse ``text`` and every module it imports; raise all import errors together."""
    main = _parse(text, filename)
    loader = _Loader(extra_paths)
    loader.visit(main, [_main_key(filename)])
    raise_all(loader.errors)
    return LoadedProgram(main, loader.modules)


def load_file(path: str | Path, extra_paths: Sequence[Path] = ()) -> LoadedProgram:
    """``load_program`` of a file on disk (imports resolve next to it first)."""
    p = Path(path)
    return load_program(p.read_text(encoding="utf-8"), str(p), extra_paths)
