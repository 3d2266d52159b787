"""Tokens of the IR text form, with 1-based line and column.

Newlines are insignificant (the grammar never needs them); ``//`` comments are
skipped. Any character no token starts with is an error at its position.
"""

from __future__ import annotations

import re

from ..diagnostics import SourceFile, Span, WiaIRError
from ..records import record

_TOKEN_SPEC = [
    ("WS", r"[ \t\r\n]+"),
    ("COMMENT", r"//[^\n]*"),
    ("TENSOR", r"tensor<(?:(?:\d+|\?)x)*[A-Za-z0-9]+>"),
    ("VECTOR", r"vector<\d+x[A-Za-z0-9]+>"),
    ("VALUE", r"%[A-Za-z0-9_.$]+"),
    ("BLOCK", r"\^[A-Za-z0-9_.$]+"),
    ("SYMBOL", r"@[A-Za-z_][A-Za-z0-9_.$]*"),
    ("FLOAT", r"-?(?:\d+\.\d*(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|inf\b|nan\b)"),
    ("INT", r"-?\d+"),
    ("STRING", r'"(?:[^"\\\n]|\\.)*"'),
    ("ARROW", r"->"),
    ("IDENT", r"[A-Za-z_][A-Za-z0-9_.]*"),
    ("PUNCT", r"[(){}\[\]<>,:=]"),
]
_MASTER = re.compile("|".join(f"(?P<{k}>{p})" for k, p in _TOKEN_SPEC))


@record(frozen=True)
class Token:
    kind: str
    text: str
    line: int
    column: int


def error_at(source: SourceFile, line: int, column: int, width: int, message: str) -> WiaIRError:
    return WiaIRError(message, Span(source, line, column, line, column + max(1, width)))


def tokenize(source: SourceFile) -> list[Token]:
    """All tokens of ``source`` followed by one ``EOF`` token."""
    text, pos, line, line_start = source.text, 0, 1, 0
    tokens: list[Token] = []
    while pos < len(text):
        m = _MASTER.match(text, pos)
        if m is None:
            raise error_at(source, line, pos - line_start + 1, 1,
                           f"unexpected character {text[pos]!r}")
        kind, value = m.lastgroup or "", m.group()
        if kind not in ("WS", "COMMENT"):
            tokens.append(Token(kind, value, line, pos - line_start + 1))
        newlines = value.count("\n")
        if newlines:
            line += newlines
            line_start = pos + value.rindex("\n") + 1
        pos = m.end()
    tokens.append(Token("EOF", "", line, pos - line_start + 1))
    return tokens
