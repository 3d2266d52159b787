"""The frontend as one call: source text to checked program, and to verified IR."""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.module import ModuleOp
from ..ir.verifier import verify
from . import ast
from .loader import load_program
from .lower_module import GenericTypes, lower_program
from .typecheck import CheckedProgram, check


@dataclass(frozen=True)
class CompiledSource:
    """A source file that parsed and passed every check."""

    checked: CheckedProgram
    filename: str

    @property
    def kernels(self) -> list[ast.Kernel]:
        return self.checked.loaded.main.kernels

    def lower_kernel(self, name: str, generic: GenericTypes | None = None) -> ModuleOp:
        """The verified IR of kernel ``name`` (``tensor`` params typed by ``generic``)."""
        module = lower_program(self.checked, name, generic)
        verify(module)
        return module


def compile_source(text: str, filename: str = "<string>") -> CompiledSource:
    """Parse, resolve imports and check ``text``; raise every error found."""
    return CompiledSource(check(load_program(text, filename)), filename)


def compile_to_ir(text: str, filename: str = "<string>", kernel: str | None = None
                  ) -> ModuleOp:
    """The verified IR of every kernel of ``text`` (or just ``kernel``)."""
    module = lower_program(compile_source(text, filename).checked, kernel)
    verify(module)
    return module
