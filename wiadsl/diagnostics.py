"""Source spans and the one error hierarchy every user-facing failure goes through.

Invariant: anything a user can cause (bad source, a bad call, a bad command line)
raises a ``WiaError`` subclass; a source error carries a ``Span`` and renders as

    kernel.wia:3:11: error: shape mismatch in '@': ...
        y = A @ x;
              ^
"""

from __future__ import annotations

import bisect
import functools
import itertools

from .records import field, record


@record(frozen=True)
class SourceFile:
    """A named piece of source text; spans point into it."""

    name: str
    text: str

    @functools.cached_property
    def line_starts(self) -> list[int]:
        """The offset where each line starts, built once per file.

        Lines end at '\n' only, as Lark counts them (splitlines() would also split
        on \f, \x1c...). Every (line, column) <-> offset conversion goes through
        this table, so none of them rescans the text.
        """
        lengths = (len(line) + 1 for line in self.text.split("\n"))
        return list(itertools.accumulate(lengths, initial=0))[:-1]

    def offset(self, line: int, column: int) -> int:
        """The string offset of a 1-based (line, column); ``ValueError`` past the end."""
        if not 1 <= line <= len(self.line_starts):
            raise ValueError(f"line {line} is outside {self.name}")
        return self.line_starts[line - 1] + column - 1

    def position(self, offset: int) -> tuple[int, int]:
        """The 1-based (line, column) of ``offset``."""
        line = bisect.bisect_right(self.line_starts, offset)
        return line, offset - self.line_starts[line - 1] + 1

    def line_text(self, line: int) -> str:
        starts = self.line_starts
        if not 1 <= line <= len(starts):
            return ""
        end = starts[line] - 1 if line < len(starts) else len(self.text)
        return self.text[starts[line - 1]:end].rstrip("\r")


#: The most characters of a source line a diagnostic shows (the rest is cut).
CARET_WINDOW = 100


@record(frozen=True)
class Span:
    """A 1-based (line, column) range in a source file; ``end_*`` is exclusive."""

    source: SourceFile = field(repr=False, compare=False, hash=False)
    line: int
    column: int
    end_line: int
    end_column: int

    @property
    def filename(self) -> str:
        return self.source.name

    def render_caret(self) -> str:
        """The source line and a caret row underlining the span (on its first line).

        A long line shows only a window around the caret (``...`` marks the cut),
        and characters that cannot print (a binary file's bytes, escape codes) show
        as ``?``: one column each, so the caret still lines up.
        """
        raw = self.source.line_text(self.line)
        # Columns count characters; expand tabs in the prefix too, so the caret lines up.
        start = len(raw[: self.column - 1].expandtabs(4))
        if self.end_line == self.line and self.end_column > self.column + 1:
            end = len(raw[: self.end_column - 1].expandtabs(4))
        else:
            end = start + 1
        text = "".join(ch if ch.isprintable() else "?" for ch in raw.expandtabs(4))
        if len(text) > CARET_WINDOW:
            lo = max(0, min(start - CARET_WINDOW // 3, len(text) - CARET_WINDOW))
            hi = lo + CARET_WINDOW
            head, tail = ("..." if lo else ""), ("..." if hi < len(text) else "")
            text = head + text[lo:hi] + tail
            start, end = start - lo + len(head), min(end, hi) - lo + len(head)
        width = max(1, min(end - start, max(1, len(text) - start)))
        return f"    {text}\n    {' ' * start}{'^' * width}"

    def to(self, other: Span) -> Span:
        """The span from the start of ``self`` to the end of ``other``."""
        return Span(self.source, self.line, self.column, other.end_line, other.end_column)


def a_or_an(word: str) -> str:
    """``word`` with its indefinite article: "an int32", "a float32"."""
    return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {word}"


class WiaError(Exception):
    """Base of every error a user can cause. ``span`` is set for source errors."""

    kind = "error"

    def __init__(self, message: str, span: Span | None = None, notes: tuple[str, ...] = ()):
        self.message = message
        self.span = span
        self.notes = tuple(notes)
        super().__init__(self.render())

    def render(self) -> str:
        if self.span is None:
            head = f"error: {self.message}"
        else:
            s = self.span
            head = f"{s.filename}:{s.line}:{s.column}: error: {self.message}\n{s.render_caret()}"
        return "\n".join([head, *(f"note: {n}" for n in self.notes)])


class WiaSyntaxError(WiaError):
    """The source does not follow the grammar."""


class WiaNameError(WiaError):
    """An unknown, duplicate, or possibly unbound name."""


class WiaTypeError(WiaError):
    """A dtype or kind mismatch (bool condition, output dtype, arity, keywords)."""


class WiaShapeError(WiaError):
    """Shapes that cannot agree (broadcasting, '@', reshape counts, index bounds)."""


class WiaImportError(WiaError):
    """A missing or cyclic import."""


class WiaCallError(WiaError):
    """A bad call of a compiled kernel: dtype, rank, extent, missing or extra argument."""


class WiaRuntimeError(WiaError):
    """A failure detected while a kernel runs (dynamic index out of range, ...)."""


class WiaIRError(WiaError):
    """Malformed IR text or IR that fails verification."""


class WiaUsageError(WiaError):
    """A bad command line or API option."""


class WiaErrors(WiaError):
    """Several source errors found in one file, reported together."""

    def __init__(self, errors: list[WiaError]):
        self.errors = list(errors)
        first = self.errors[0]
        super().__init__(first.message, first.span)

    def render(self) -> str:
        return "\n".join(e.render() for e in self.errors)


def raise_all(errors: list[WiaError]) -> None:
    """Raise nothing, the single error, or a ``WiaErrors`` holding them all."""
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise WiaErrors(errors)
