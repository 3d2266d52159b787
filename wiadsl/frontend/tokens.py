"""Lexical layer of the frontend: a pre-scan, and the lexer over the grammar's
terminals (grammar_tables.py: made by Lark, read without it).

Invariants:
- ``prescan`` runs before the lexer sees the text. It raises at once for the two errors
  that make the rest of the file meaningless (an unterminated block comment, and
  brackets nested deeper than ``MAX_DEPTH``, which would otherwise make recursive
  consumers overflow the stack), and it replaces every character that starts no
  token by a space, recording an "invalid character" error for it. The cleaned
  text has the same length and line structure, so token positions stay true.
- ``lex`` therefore never raises: every lexical problem is a recorded error.
- ``lex`` gives the tokens Lark's basic lexer gives (same terminals, order, keyword
  rule and positions), from one ``finditer`` over the text: Lark's lexer loop
  costs several times more per token.
"""

from __future__ import annotations

import functools
import re

from ..diagnostics import SourceFile, Span, WiaError, WiaSyntaxError, raise_all
from ..records import record
from .grammar_tables import INVALID, Token, tables

#: Deepest bracket or AST nesting the frontend accepts (far below Python's recursion limit);
#: a flat chain ``a + b + ... + z`` is not nesting (see parser._check_depth).
MAX_DEPTH = 200
#: Errors reported for one file at most; the rest would be noise.
MAX_ERRORS = 50

_VALID = r"A-Za-z0-9_ \t\f\r\n+\-*/%@!=<>&|(),;:.\[\]{}"
_SCAN = re.compile(
    r"(?P<comment>//[^\n]*|/\*[\s\S]*?\*/)"
    r"|(?P<open_comment>/\*)"
    r"|(?P<open>[(\[{])"
    r"|(?P<close>[)\]}])"
    r"|(?P<pair>&&|\|\|)"
    r"|(?P<bad>[&|]|[^" + _VALID + r"])"
)


def offset_span(source: SourceFile, offset: int, length: int = 1) -> Span:
    """The span of ``length`` characters at ``offset`` (on one line)."""
    line, column = source.position(offset)
    return Span(source, line, column, line, column + length)


def _known(value: int | None) -> int:
    """A position field of a lexed token: typed Optional (as Lark's), ``lex`` always sets them."""
    assert value is not None, "token without a position"
    return value


def token_start(token: Token) -> tuple[int, int]:
    """The 1-based (line, column) where a lexed token starts."""
    return _known(token.line), _known(token.column)


def token_end(token: Token) -> tuple[int, int]:
    """The 1-based (line, column) just after a lexed token (its start for ``$END``)."""
    end_line = token.end_line if token.end_line is not None else token.line
    end_column = token.end_column if token.end_column is not None else token.column
    return _known(end_line), _known(end_column)


def token_span(source: SourceFile, token: Token) -> Span:
    """The span of a token; ``$END`` tokens have zero width."""
    return Span(source, *token_start(token), *token_end(token))


def describe_char(char: str) -> str:
    """A character as an error message shows it: quoted if printable, else U+XXXX."""
    if char.isprintable() and not char.isspace():
        return f"'{char}'"
    return f"U+{ord(char):04X}"


def prescan(source: SourceFile) -> tuple[str, list[WiaError]]:
    """Check comments and nesting; blank out invalid characters (see the module doc).

    Returns the cleaned text and the invalid-character errors; raises
    ``WiaSyntaxError`` for an unterminated comment or nesting beyond ``MAX_DEPTH``.
    """
    text = source.text
    errors: list[WiaError] = []
    bad_offsets: list[int] = []
    depth = 0
    for m in _SCAN.finditer(text):
        kind = m.lastgroup
        if kind == "open_comment":
            raise WiaSyntaxError("unterminated block comment", offset_span(source, m.start(), 2))
        if kind == "open":
            depth += 1
            if depth > MAX_DEPTH:
                raise WiaSyntaxError(f"nesting too deep (more than {MAX_DEPTH} levels)",
                                     offset_span(source, m.start()))
        elif kind == "close":
            depth = max(0, depth - 1)
        elif kind == "bad":
            bad_offsets.append(m.start())
            if len(errors) < MAX_ERRORS:
                message = f"invalid character {describe_char(m.group())}"
                errors.append(WiaSyntaxError(message, offset_span(source, m.start())))
    if not bad_offsets:
        return text, errors
    chars = list(text)
    for offset in bad_offsets:
        chars[offset] = " "
    return "".join(chars), errors


@record(frozen=True)
class _Scanner:
    """Lark's basic lexer as one regex (grammar_tables.py's ``scanner``)."""

    regex: re.Pattern[str]
    keywords: dict[str, dict[str, str]]  # regex terminal -> {text: string terminal}
    multiline: frozenset[str]  # terminals whose text may hold a newline


@functools.cache
def _scanner() -> _Scanner:
    t = tables()
    return _Scanner(re.compile(t.scanner), t.keywords, t.multiline)


def lex(source: SourceFile, text: str, errors: list[WiaError]) -> list[Token]:
    """The tokens of the pre-scanned ``text``; lexical errors are appended to ``errors``."""
    scanner = _scanner()
    keywords, multiline = scanner.keywords, scanner.multiline
    tokens: list[Token] = []
    append, count, new_token = tokens.append, text.count, str.__new__
    line, line_start, pos = 1, 0, 0
    for m in scanner.regex.finditer(text):
        kind = m.lastgroup
        if kind is None:  # the end, after ignored text
            break
        start, end = m.span(kind)
        if start != pos:  # ignored text before the token: count its newlines
            newlines = count("\n", pos, start)
            if newlines:
                line += newlines
                line_start = text.rindex("\n", pos, start) + 1
        pos = end
        if kind == INVALID:
            # The pre-scan blanks every such character; stay total anyway.
            errors.append(WiaSyntaxError(f"invalid character {describe_char(text[start])}",
                                         offset_span(source, start)))
            continue
        value = text[start:end]
        column = start - line_start + 1
        if kind in keywords:
            kind = keywords[kind].get(value, kind)
        token_line = line
        if kind in multiline and "\n" in value:
            line += value.count("\n")
            line_start = start + value.rindex("\n") + 1
        # A ``Token`` with every slot set, made without calling ``Token.__new__`` (a
        # Python call per token: Lark's own cost a quarter of the lexer's time on a
        # large file). The same fields and repr as Lark's token.
        token = new_token(Token, value)
        token.type, token.value, token.start_pos = kind, value, start
        token.line, token.column, token.end_line, token.end_column, token.end_pos = \
            token_line, column, line, end - line_start + 1, end
        append(token)
    return tokens


def tokenize(text: str, filename: str = "<string>") -> list[tuple[str, str, int, int]]:
    """The tokens of ``text`` as ``(kind, text, line, column)``, for ``wiac --emit tokens``.

    ``kind`` is the grammar's terminal name (``NAME``, ``INT``, ``KERNEL``, ``LPAR``...).
    Raises ``WiaSyntaxError`` / ``WiaErrors`` for lexical errors.
    """
    source = SourceFile(filename, text)
    cleaned, errors = prescan(source)
    tokens = lex(source, cleaned, errors)
    raise_all(errors)
    return [(t.type, str(t), *token_start(t)) for t in tokens]


# ------------------------------------------------------------------ words for errors
# Parse errors name tokens the way a user writes them, never by terminal name.

_KEYWORDS = frozenset({
    "IMPORT", "CONST", "FUNC", "KERNEL", "INPUT", "OUTPUT", "IF", "ELSE", "FOR", "IN",
    "WHILE", "RETURN", "TRUE", "FALSE",
})
_DECL_START = frozenset({"IMPORT", "CONST", "FUNC", "KERNEL"})
_CMP_OPS = frozenset({"EQEQ", "NOTEQ", "LESS", "LESSEQ", "GREATER", "GREATEREQ"})
_BINARY_OPS = _CMP_OPS | {"OROR", "ANDAND", "PLUS", "MINUS", "STAR", "SLASH", "PERCENT",
                          "AT", "POW"}
# Tokens that may continue a complete expression; listing them all would bury the
# one token the user most likely forgot.
_CONTINUATION = _BINARY_OPS | {"LPAR", "LSQB", "DOT"}
_CLOSING = frozenset({"RPAR", "RSQB", "RBRACE"})
_ORDER = ["INPUT", "OUTPUT", "COMMA", "COLON", "SEMICOLON", "ASSIGN", "RPAR", "RSQB",
          "LBRACE", "RBRACE", "NAME", "INT", "FLOAT"]
_NAMED_WORDS = {"NAME": "a name", "INT": "an integer", "FLOAT": "a number",
                "$END": "end of file"}


@functools.cache
def _spellings() -> dict[str, str]:
    """Terminal name -> how an error message spells it (``'{'``, ``a name``)."""
    return {**tables().spellings, **_NAMED_WORDS}


def found_words(token: Token) -> str:
    """What was found, for a message: ``keyword 'if'``, ``name 'x'``, ``'}'``."""
    if token.type == "$END":
        return "end of file"
    if token.type in _KEYWORDS:
        return f"keyword '{token}'"
    if token.type == "NAME":
        return f"name '{token}'"
    if token.type in ("INT", "FLOAT"):
        return f"number '{token}'"
    return f"'{token}'"


def _join(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def _list_expected(expected: set[str]) -> str | None:
    """The expected terminals in words, or None when they are too many to help."""
    if expected & _BINARY_OPS:
        expected = expected - _CONTINUATION
    if not expected or len(expected) > 5:
        return None
    rank = {name: i for i, name in enumerate(_ORDER)}
    names = sorted(expected, key=lambda n: (rank.get(n, len(rank)), n))
    return _join([_spellings().get(n, n) for n in names])


def expected_words(expected: set[str], in_block: bool, decl: str | None) -> str | None:
    """What the parser wanted, in words, chosen by the kind of place it was in."""
    expected = set(expected) - {"$END"}
    if expected & _DECL_START:
        return "a declaration ('import', 'const', 'func' or 'kernel')"
    if "WHILE" in expected:
        return "a statement or '}'"
    if "SEMICOLON" in expected:
        return "';' after statement" if in_block or decl is None else f"';' after {decl}"
    if "INT" in expected and "LPAR" in expected:
        extras = [_spellings()[n] for n in ("COLON", "RPAR", "RSQB") if n in expected]
        return _join(["an expression", *extras])
    return _list_expected(expected)


def unexpected_token_message(token: Token, expected: set[str], in_block: bool,
                             decl: str | None) -> str:
    """The message for a parse error at ``token`` (see tests/frontend/test_syntax_errors.py).

    ``in_block`` says the error is inside a ``{...}`` body; ``decl`` is the keyword
    of the top-level declaration being parsed, for "expected ';' after const".
    """
    if token.type in _CMP_OPS and "PLUS" in expected and not expected & _CMP_OPS:
        return "comparison operators cannot be chained; combine them with '&&'"
    want = expected_words(expected, in_block, decl)
    if token.type == "$END":
        if "RBRACE" in expected:
            return "unexpected end of file; expected '}'"
        return "unexpected end of file" + (f"; expected {want}" if want else "")
    if token.type in _CLOSING and (expected & _DECL_START or "WHILE" in expected):
        return f"unexpected {found_words(token)}"
    if want is None:
        return f"unexpected {found_words(token)}"
    if token.type == "NAME" and "INPUT" in expected:
        return "expected 'input' or 'output' before the parameter name"
    if token.type in _KEYWORDS:
        return f"expected {want}, found {found_words(token)}"
    return f"expected {want}"
