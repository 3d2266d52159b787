"""The REPL's state: declarations the user typed, and named NumPy values.

Declarations (``kernel``, ``func``, ``const``, ``import``) are kept as source
chunks, one per declaration, and compiled together as one program. Values are
NumPy arrays (or Python scalars, which stay *weak* as NEP 50 treats them).

Invariants:
- A declaration is added only if the whole program still compiles with it; a
  redefinition replaces the earlier declaration of that name.
- Every error names the input it came from (``<in3>:2:7``), with the caret, and
  leaves the session as it was.
- The program compiled for a call always has the same text for the same session,
  so compiled kernels are cached by that text and target.
"""

from __future__ import annotations

import keyword
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ..diagnostics import SourceFile, Span, WiaError, WiaErrors, WiaNameError, WiaUsageError
from ..dtypes import DTYPE_NAMES, DType, from_numpy
from ..frontend import ast
from ..frontend.builtins import BUILTINS
from ..runtime.jit import KernelFunction, Module, jit

EVAL_KERNEL = "__wia_eval"
EVAL_OUTPUT = "__wia_out"


@dataclass(frozen=True)
class Chunk:
    """One declaration as typed: its text, and where it came from (input label, line)."""

    name: str
    kind: str
    text: str
    label: str
    first_line: int = 1


class Origin(NamedTuple):
    """Where ``n`` lines of a generated program, from line ``start``, were typed: input
    ``label`` from its line ``rel``; the first line shifted right by ``col`` (an
    expression the REPL cut out of what was typed: ``y = x +`` evaluates ``x +``),
    and ``typed``, the input as typed (errors show it under the caret), if known."""

    start: int
    n: int
    label: str
    rel: int = 1
    col: int = 0
    typed: str | None = None


@dataclass
class LineMap:
    """Which input each line of a generated program came from."""

    spans: list[Origin] = field(default_factory=list)

    def add(self, start: int, text: str, label: str, rel: int = 1) -> None:
        self.spans.append(Origin(start, text.count("\n") + 1, label, rel))

    def locate(self, line: int, column: int) -> tuple[Origin, int, int] | None:
        """The origin of a generated (line, column), and the (line, column) typed."""
        for o in self.spans:
            if o.start <= line < o.start + o.n:
                return o, line - o.start + o.rel, column + (o.col if line == o.start else 0)
        return None


def render_error(err: WiaError, lines: LineMap, filename: str) -> str:
    """``err`` with each source location named by the input it came from."""
    if isinstance(err, WiaErrors):
        return "\n".join(render_error(e, lines, filename) for e in err.errors)
    span = err.span
    where = (lines.locate(span.line, span.column)
             if span is not None and span.filename == filename else None)
    if span is None or where is None:
        text = err.render()
        return text if span is not None else text.replace(filename, "<repl>")
    origin, line, column = where
    caret = span.render_caret()
    if origin.typed is not None:  # the caret under what was typed
        end = lines.locate(span.end_line, span.end_column)
        end_line, end_column = (end[1], end[2]) if end and end[0] is origin else (line, column + 1)
        typed = SourceFile(origin.label, origin.typed)
        caret = Span(typed, line, column, end_line, end_column).render_caret()
    head = f"{origin.label}:{line}:{column}: error: {err.message}\n{caret}"
    return "\n".join([head, *(f"note: {n}" for n in err.notes)])


class SessionError(WiaError):
    """An error already rendered for the REPL (locations name the inputs)."""

    def render(self) -> str:
        return self.message


def value_type(value: object) -> str:
    """The WIA DSL type of a session value: ``f32[64, 64]``, ``f64``."""
    array = np.asarray(value)
    dtype = from_numpy(array.dtype)
    if dtype is None:
        raise WiaUsageError(f"values of dtype {array.dtype} cannot enter a kernel "
                            "(use bool, int8, int32, int64, float16, float32 or float64)")
    if array.ndim == 0:
        return str(dtype)
    return f"{dtype}[{', '.join(str(n) for n in array.shape)}]"


def is_weak(value: object) -> bool:
    """Python scalars stay weak (``alpha = 0.5`` scales an f32 tensor to f32)."""
    return isinstance(value, (bool, int, float)) and np.isfinite(float(value))


class Session:
    """Declarations and values of one REPL session, and how to run code against them."""

    def __init__(self, target: str | None = None, level: int = 2):
        from ..runtime.jit import DEFAULT_TARGET

        self.target = target or DEFAULT_TARGET
        self.level = level
        self.chunks: dict[str, Chunk] = {}
        self.values: dict[str, Any] = {}
        self.call_dims: dict[str, dict[str, int]] = {}
        #: per kernel, the dtype and shape of each input of its last call: what a
        #: listing (:ir, :llvm) of a kernel with 'tensor' parameters compiles for
        self.call_inputs: dict[str, dict[str, tuple[DType, tuple[int, ...]]]] = {}
        #: each input's text as typed, by label (errors show it under the caret)
        self.typed: dict[str, str] = {}
        self.filename = str(Path.cwd() / "<repl>")  # imports also resolve next to cwd
        self.rng = np.random.default_rng(0)
        #: what ``:ir`` and friends show by default: ("kernel", NAME) or ("expr", TEXT)
        self.last: tuple[str, str] | None = None
        self._modules: dict[tuple[str, str], Module] = {}

    # ------------------------------------------------------------ programs

    def program(self, extra: str = "", extra_label: str = "", skip: set[str] | None = None
                ) -> tuple[str, LineMap]:
        """The session's declarations (minus ``skip``), then ``extra``, as one source."""
        parts: list[str] = []
        lines = LineMap()
        line = 1
        for chunk in self.chunks.values():
            if skip and chunk.name in skip:
                continue
            lines.add(line, chunk.text, chunk.label, chunk.first_line)
            parts.append(chunk.text)
            line += chunk.text.count("\n") + 1
        if extra:
            lines.add(line, extra, extra_label)
            parts.append(extra)
        return "\n".join(parts) + "\n", lines

    def fail(self, err: WiaError, lines: LineMap) -> SessionError:
        return SessionError(render_error(err, lines, self.filename))

    def compile(self, text: str, lines: LineMap) -> Any:
        from ..frontend.compile import compile_source

        try:
            return compile_source(text, self.filename)
        except WiaError as err:
            raise self.fail(err, lines) from None

    def module(self, text: str, lines: LineMap, target: str | None = None) -> Module:
        """The jit Module of ``text`` on ``target`` (cached)."""
        key = (text, target or self.target)
        if key not in self._modules:
            try:
                mod = jit(text, target=key[1], filename=self.filename)
            except WiaError as err:
                raise self.fail(err, lines) from None
            assert isinstance(mod, Module)
            self._modules[key] = mod
        return self._modules[key]

    @property
    def kernels(self) -> list[str]:
        return [c.name for c in self.chunks.values() if c.kind == "kernel"]

    def kernel(self, name: str, target: str | None = None) -> KernelFunction:
        text, lines = self.program()
        return self.module(text, lines, target).kernels[name]

    # ------------------------------------------------------------ declarations

    def define(self, text: str, label: str) -> list[str]:
        """Add the declarations of ``text``; returns a line describing each."""
        from ..frontend.parser import parse_source

        lines = LineMap()
        lines.add(1, text, label)
        try:
            program = parse_source(text, self.filename)
        except WiaError as err:
            raise self.fail(err, lines) from None
        new = [self._chunk(decl, text, label) for decl in program.decls]
        for chunk in new:
            self._check_free(chunk.name, chunk.kind)
        names = {c.name for c in new}
        source, lines = self.program(skip=names)
        for chunk in new:
            lines.add(source.count("\n") + 1, chunk.text, chunk.label, chunk.first_line)
            source += chunk.text + "\n"
        compiled = self.compile(source, lines)
        for chunk in new:
            self.chunks.pop(chunk.name, None)
            self.chunks[chunk.name] = chunk
        self._modules.clear()
        kernels = [c.name for c in new if c.kind == "kernel"]
        if kernels:
            self.last = ("kernel", kernels[-1])
        sigs = {k.name: k for k in compiled.kernels}
        return [describe_decl(c, sigs) for c in new]

    def _chunk(self, decl: ast.Decl, text: str, label: str) -> Chunk:
        span = decl.span
        rows = text.splitlines()[span.line - 1: span.end_line]
        rows[-1] = rows[-1][: span.end_column - 1]
        rows[0] = " " * (span.column - 1) + rows[0][span.column - 1:]
        kind = type(decl).__name__.lower()
        name = decl.module if isinstance(decl, ast.Import) else decl.name
        if isinstance(decl, ast.Import):
            name = f"import {name}"
        return Chunk(name, kind, "\n".join(rows), label, span.line)

    def _check_free(self, name: str, kind: str) -> None:
        if name in self.values:
            raise WiaNameError(f"'{name}' is a session value; ':del {name}' first to "
                               f"declare a {kind} of that name")

    def check_value_name(self, name: str) -> None:
        """A name a value may be bound to, or a WiaNameError saying why not."""
        if name in BUILTINS or name in DTYPE_NAMES or keyword.iskeyword(name) \
                or name in ("kernel", "func", "const", "import", "input", "output", "true",
                            "false", "range", "in"):
            raise WiaNameError(f"cannot bind '{name}': it is a builtin or a keyword")
        if name.startswith("__wia"):
            raise WiaNameError(f"cannot bind '{name}': names starting with __wia are reserved")
        if name in self.chunks:
            kind = self.chunks[name].kind
            raise WiaNameError(f"cannot bind '{name}': it is a {kind} of this session")

    def forget(self, name: str) -> str:
        if name in self.values:
            del self.values[name]
            return f"deleted value {name}"
        for key in (name, f"import {name}"):
            if key in self.chunks:
                chunk = self.chunks.pop(key)
                self._modules.clear()
                if self.last == ("kernel", key):
                    self.last = None
                return f"deleted {chunk.kind} {name}"
        raise WiaNameError(f"nothing named '{name}' in this session")

    def reset(self) -> None:
        self.chunks.clear()
        self.values.clear()
        self.call_dims.clear()
        self.call_inputs.clear()
        self._modules.clear()
        self.last = None


def describe_decl(chunk: Chunk, sigs: dict[str, ast.Kernel]) -> str:
    if chunk.kind == "kernel":
        from ..signature import signature_of

        return f"kernel {signature_of(sigs[chunk.name]).describe()}"
    if chunk.kind == "import":
        return chunk.name
    return f"{chunk.kind} {chunk.name}"
