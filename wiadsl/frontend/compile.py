"""The frontend as one call: source text to checked program, and to verified IR."""

from __future__ import annotations

from collections import OrderedDict

from ..ir.module import ModuleOp
from ..ir.verifier import verify
from ..records import record
from . import ast
from .loader import load_program
from .lower_module import GenericTypes, lower_program
from .typecheck import CheckedProgram, check


@record(frozen=True)
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


#: Recently checked sources without imports, by (text, filename): ``wiadsl.jit`` on the
#: same string again (a notebook cell, a test, the fuzzer's targets) skips parse and
#: check. A source with imports also depends on other files, so it is not kept.
_RECENT: OrderedDict[tuple[str, str], CompiledSource] = OrderedDict()
_RECENT_LIMIT = 64


def compile_source(text: str, filename: str = "<string>") -> CompiledSource:
    """Parse, resolve imports and check ``text``; raise every error found."""
    key = (text, filename)
    if key in _RECENT:
        _RECENT.move_to_end(key)
        return _RECENT[key]
    compiled = CompiledSource(check(load_program(text, filename)), filename)
    if not compiled.checked.loaded.modules:
        _RECENT[key] = compiled
        if len(_RECENT) > _RECENT_LIMIT:
            _RECENT.popitem(last=False)
    return compiled


def compile_to_ir(text: str, filename: str = "<string>", kernel: str | None = None
                  ) -> ModuleOp:
    """The verified IR of every kernel of ``text`` (or just ``kernel``)."""
    module = lower_program(compile_source(text, filename).checked, kernel)
    verify(module)
    return module
