"""Pattern text to plain data: Lark's parse of ``patterns/pattern.lark`` (imported
only when text is parsed), and patterns_data.py, the built-in patterns parsed ahead
of time (generated.py), which every compile reads.

A pattern is ``(name, match statements, rewrite statement)``, a statement
``(result, op, args)``: declarative.py checks the names and builds the matcher.
"""

from __future__ import annotations

import functools
import pathlib
from typing import Any

from ..diagnostics import WiaUsageError
from ..generated import made_from, module_text, write

_DIR = pathlib.Path(__file__).parent / "patterns"

#: a statement as the parser gives it, (result, op, args), and a pattern
Plain = tuple[str, str, tuple[str, ...]]
PlainPattern = tuple[str, list[Plain], Plain]


@functools.cache
def _parser() -> tuple[Any, Any]:
    """Lark's parser of ``patterns/pattern.lark`` and the transformer from its trees to
    plain data. Made on the first parse of pattern text (a user's: the built-in
    patterns come parsed)."""
    from lark import Lark, Transformer

    class Build(Transformer):  # type: ignore[misc]
        def values(self, items):
            return tuple(str(v)[1:] for v in items)

        def opname(self, items):
            return ".".join(map(str, items))

        def stmt(self, items):
            return (str(items[0])[1:], items[1], items[2] or ())

        def stmts(self, items):
            return list(items)

        def rewrite_op(self, items):
            return (str(items[0])[1:], items[1], items[2] or ())

        def rewrite_forward(self, items):
            return (str(items[0])[1:], "", (str(items[1])[1:],))

        def pattern(self, items):
            return (str(items[0]), items[1], items[2])

        def start(self, items):
            return list(items)

    # cache=True: Lark keys a cache file on the grammar and options, so a process
    # after the first skips building the grammar and its tables
    return Lark((_DIR / "pattern.lark").read_text(), parser="lalr", cache=True), Build()


def plain_patterns(text: str, filename: str) -> list[PlainPattern]:
    """The patterns of ``text``; a syntax error is a WiaUsageError naming ``filename``."""
    from lark.exceptions import LarkError

    parser, build = _parser()
    try:
        return build.transform(parser.parse(text))  # type: ignore[no-any-return]
    except LarkError as e:
        raise WiaUsageError(f"{filename}: cannot parse patterns: {e}") from None


def builtin_sources() -> list[pathlib.Path]:
    """What patterns_data.py is made from: the pattern files, their grammar, this module."""
    return [*_builtin_files(), _DIR / "pattern.lark", pathlib.Path(__file__)]


def _builtin_files() -> list[pathlib.Path]:
    return sorted(_DIR.glob("*.pat"))


def builtin_plain() -> list[PlainPattern]:
    """The shipped patterns, parsed now."""
    return [p for f in _builtin_files() for p in plain_patterns(f.read_text(), f.name)]


def render() -> str:
    """The text of patterns_data.py."""
    return module_text("The built-in rewrite patterns (rewrite/patterns/*.pat) as parsed by Lark\n"
                       "(pattern_text.py).", "wiadsl.rewrite.pattern_text",
                       made_from(builtin_sources()), {"PATTERNS": builtin_plain()})


__all__ = ["Plain", "PlainPattern", "builtin_plain", "builtin_sources", "plain_patterns", "render"]


if __name__ == "__main__":
    write(pathlib.Path(__file__).with_name("patterns_data.py"), render())
