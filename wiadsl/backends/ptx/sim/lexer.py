"""PTX text to a token list.

Invariant: comments (``//`` and ``/* */``), ``.loc``/``.file`` debug lines and
``.section`` blocks are dropped; every token carries its 1-based source line.
Identifiers include dots and ``::`` (``ld.global.L1::no_allocate.v4.f32``,
``%tid.x``), so an opcode with all its modifiers is one token.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import PtxSimError


@dataclass(frozen=True)
class Token:
    """One token: ``kind`` is ident, num, float, str or punct; ``text`` is the exact source."""

    kind: str
    text: str
    line: int


_TOKEN = re.compile(
    r"""
    (?P<ws>[ \t\r\f\v]+)
  | (?P<nl>\n)
  | (?P<str>"[^"\n]*")
  | (?P<float>0[fF][0-9a-fA-F]{8}(?![\w$])|0[dD][0-9a-fA-F]{16}(?![\w$]))
  | (?P<num>(?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+
            |0[xX][0-9a-fA-F]+U?|0[bB][01]+U?|\d+U?)
  | (?P<ident>[%.$_a-zA-Z](?:[\w$.]|::)*)
  | (?P<punct>[{}()\[\],;:@!|+\-<>=*/])
    """,
    re.X,
)

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_DEBUG_LINE = re.compile(r"^[ \t]*\.(?:loc|file)\b[^\n]*", re.M)


def _blank(m: re.Match) -> str:
    """Replace a match by the same number of newlines (line numbers stay right)."""
    return "\n" * m.group(0).count("\n")


def _drop_sections(text: str) -> str:
    """Blank out ``.section name { ... }`` debug blocks (balanced braces)."""
    out, i = [], 0
    for m in re.finditer(r"^[ \t]*\.section\b", text, re.M):
        if m.start() < i:
            continue
        j = text.find("{", m.end())
        if j < 0:
            break
        depth, k = 0, j
        while k < len(text):
            depth += {"{": 1, "}": -1}.get(text[k], 0)
            if depth == 0:
                break
            k += 1
        out.append(text[i : m.start()])
        out.append("\n" * text.count("\n", m.start(), k + 1))
        i = k + 1
    out.append(text[i:])
    return "".join(out)


def tokenize(text: str) -> list[Token]:
    """Split PTX text into tokens; raise ``PtxSimError`` on a character PTX cannot contain."""
    text = _COMMENT.sub(_blank, text)
    text = _DEBUG_LINE.sub("", text)
    text = _drop_sections(text)
    tokens: list[Token] = []
    line, pos = 1, 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise PtxSimError(f"unexpected character {text[pos]!r} in PTX", line=line)
        kind = m.lastgroup
        assert kind is not None  # every alternative of _TOKEN is a named group
        if kind == "nl":
            line += 1
        elif kind != "ws":
            tokens.append(Token(kind, m.group(0), line))
        pos = m.end()
    return tokens
