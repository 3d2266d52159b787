"""Source text to AST: ``parse_source``, ``parse_bytes`` and ``tokenize``.

The flow: pre-scan (comments, nesting, invalid characters) -> the lexer (Lark's
basic lexer as one regex) -> ``lalr.LalrParser`` (Lark's LALR table; both kept as
plain data, grammar_tables.py) fed token by token, with recovery, its
reductions calling ``AstBuilder`` -> ``ast.Program``. No parse tree is built.

Invariants:
- Every failure is a ``WiaSyntaxError`` (several: ``WiaErrors``, in source order);
  no other exception escapes for any input text.
- Recovery: after a parse error the parser skips to the end of the statement (the
  next ``;`` or the ``}`` closing a block, at the same brace depth) and unwinds its
  stack to the nearest place where a statement or declaration may start, so each
  bad statement gives one error. A parse error in a statement that already has a
  lexical error is not reported (it is almost always a consequence of it), nor
  is a builder error in the values recovery discards, nor any builder error when
  the end of the file cannot be reached.
- Accepted programs nest at most ``MAX_DEPTH`` AST levels, so the recursive
  consumers (the unparser, later phases) stay far from Python's stack limit. A
  left-associated chain ``a + b + ... + z`` counts as one level whatever its
  length: those consumers fold it in a loop (``exprtext.left_chain``).
"""

from __future__ import annotations

from ..diagnostics import SourceFile, Span, WiaError, WiaSyntaxError, raise_all
from ..gcpause import no_cyclic_gc
from ..records import record
from .ast import BinOp, Program, child_fields
from .ast_builder import AstBuilder
from .grammar_tables import Token
from .lalr import LalrParser
from .tokens import (
    MAX_DEPTH,
    MAX_ERRORS,
    lex,
    prescan,
    token_end,
    token_span,
    tokenize,
    unexpected_token_message,
)

__all__ = ["parse_source", "parse_bytes", "tokenize"]

# A parser state that accepts one of these is where a statement (WHILE) or a
# top-level declaration (KERNEL) may start: the states recovery unwinds to.
_SYNC_TERMINALS = frozenset({"WHILE", "KERNEL"})
_DECL_KEYWORDS = frozenset({"IMPORT", "CONST", "FUNC", "KERNEL"})
# The tokens ``_Driver._track`` looks at (tested before the call: most tokens are not).
_TRACKED = _DECL_KEYWORDS | {"LBRACE", "RBRACE", "SEMICOLON"}


def parse_source(text: str, filename: str = "<string>") -> Program:
    """Parse one source file. Raises ``WiaSyntaxError`` or ``WiaErrors``."""
    source = SourceFile(filename, text)
    with no_cyclic_gc():
        cleaned, errors = prescan(source)
        tokens = lex(source, cleaned, errors)
        builder = AstBuilder(source)
        decls = _Driver(source, tokens, [e.span for e in errors if e.span], builder).run(errors)
        program = None
        if decls is not None:
            program = Program(decls, filename=filename)
            errors.extend(builder.errors)
            if not errors:
                errors.extend(_check_depth(program))
    errors.sort(key=lambda e: (e.span.line, e.span.column) if e.span else (0, 0))
    raise_all(errors[:MAX_ERRORS])
    assert program is not None
    return program


def parse_bytes(data: bytes, filename: str = "<string>") -> Program:
    """Decode UTF-8 (a leading BOM is dropped) and parse; bad bytes are a ``WiaSyntaxError``."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise _decode_error(data, e, filename) from None
    return parse_source(text, filename)


def _decode_error(data: bytes, e: UnicodeDecodeError, filename: str) -> WiaSyntaxError:
    """The error for the first invalid byte, located by line and column."""
    line_start = data.rfind(b"\n", 0, e.start) + 1
    line = data.count(b"\n", 0, e.start) + 1
    column = len(data[line_start:e.start].decode("utf-8", errors="replace")) + 1
    source = SourceFile(filename, data.decode("utf-8", errors="replace"))
    span = Span(source, line, column, line, column + 1)
    return WiaSyntaxError(f"invalid UTF-8 byte 0x{data[e.start]:02x}", span)


@record
class _Driver:
    """Feeds tokens to the LALR parser and recovers from errors."""

    source: SourceFile
    tokens: list[Token]
    lexical_errors: list[Span]
    builder: AstBuilder
    brace_depth: int = 0
    decl: str | None = None
    stmt_start: tuple[int, int] = (1, 1)
    skipped_to_end: bool = False  # the last recovery found no end of statement

    def run(self, errors: list[WiaError]) -> tuple | None:
        """The decls, or None when the end of the file could not be reached."""
        parser = LalrParser(self.builder)
        i, recovering = 0, False
        while i < len(self.tokens) and len(errors) < MAX_ERRORS:
            token = self.tokens[i]
            if not parser.feed(token):
                if recovering:  # not yet back in step: drop the token silently
                    i += 1
                    continue
                self._report(token, parser, errors)
                i = self._skip_statement(i)
                at_decl = i < len(self.tokens) and self.tokens[i].type in _DECL_KEYWORDS
                self._unwind(parser, frozenset({"KERNEL"}) if at_decl else _SYNC_TERMINALS)
                recovering = True
                continue
            recovering = False
            if token.type in _TRACKED:
                self._track(token)
            i += 1
        end = self._end_token()
        if parser.feed(end):
            return parser.result  # type: ignore[no-any-return]
        # Unless the last skip ran to the end (the error is then that same one),
        # an unexpected end is an error of its own, typically a missing '}'.
        if not self.skipped_to_end:
            self._report(end, parser, errors)
        return None

    def _report(self, token: Token, parser: LalrParser, errors: list[WiaError]) -> None:
        """Record the error at ``token`` unless a lexical error in its statement explains it."""
        where = (token.line, token.column)
        if any(self.stmt_start <= (s.line, s.column) <= where for s in self.lexical_errors):
            return
        message = unexpected_token_message(token, parser.accepts(), self.brace_depth > 0,
                                           self.decl)
        errors.append(WiaSyntaxError(message, token_span(self.source, token)))

    def _unwind(self, parser: LalrParser, sync: frozenset[str]) -> None:
        """Unwind the stack (``LalrParser.unwind``), dropping the discarded values' errors.

        With ``_SYNC_TERMINALS`` the stack is cut to where a statement or
        declaration may start; the values popped are the half-built bad statement,
        and the builder's errors from them (they lie within it) go with them.
        """
        start = parser.unwind(sync)
        if start is not None:
            self.builder.errors = [e for e in self.builder.errors
                                   if e.span is None or (e.span.line, e.span.column) < start]

    def _track(self, token: Token) -> None:
        """Keep the context the messages and the cascade filter need."""
        if token.type == "LBRACE":
            self.brace_depth += 1
        elif token.type == "RBRACE":
            self.brace_depth = max(0, self.brace_depth - 1)
        elif self.brace_depth == 0 and token.type in _DECL_KEYWORDS:
            self.decl = str(token)
        if token.type in ("SEMICOLON", "LBRACE", "RBRACE"):
            self.stmt_start = token_end(token)

    def _skip_statement(self, i: int) -> int:
        """The index after the bad statement starting near ``i``.

        A ``;`` at brace depth 0 is consumed, a ``}`` closing a block opened inside
        the skipped text is consumed, a ``}`` closing an enclosing block is kept, and
        so is a declaration keyword at depth 0 (a new declaration starts there).
        """
        depth = 0
        while i < len(self.tokens):
            kind = self.tokens[i].type
            if kind == "LBRACE":
                depth += 1
            elif kind == "RBRACE":
                if depth == 0:
                    return i
                depth -= 1
                if depth == 0:
                    self._track(self.tokens[i])
                    return i + 1
            elif kind == "SEMICOLON" and depth == 0:
                self._track(self.tokens[i])
                return i + 1
            elif kind in _DECL_KEYWORDS and depth == 0:
                self.brace_depth = 0
                return i
            i += 1
        self.skipped_to_end = True
        return i

    def _end_token(self) -> Token:
        """``$END``, placed just after the last token (or at 1:1 for an empty file)."""
        if not self.tokens:
            return Token("$END", "", 0, 1, 1, 1, 1, 0)
        last = self.tokens[-1]
        return Token("$END", "", last.end_pos, last.end_line, last.end_column,
                     last.end_line, last.end_column, last.end_pos)


def _check_depth(program: Program) -> list[WiaError]:
    """An error at the first node (in source order) nested deeper than ``MAX_DEPTH``.

    The left operand of a ``BinOp`` that is itself a ``BinOp`` does not count as a
    level: every consumer walks such a chain (``a + b + ... + z``) with a loop
    (``exprtext.left_chain``), so only real nesting deepens their recursion.
    An iterative walk: the tree may be far deeper than Python's recursion limit.
    """
    too_deep: list[Span] = []
    stack: list[tuple[object, int]] = [(d, 1) for d in program.decls]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            too_deep.append(node.span)  # type: ignore[attr-defined]
            continue
        deeper = depth + 1
        for name in child_fields(type(node)) or ():
            value = getattr(node, name)
            if isinstance(value, tuple):
                stack.extend((c, deeper) for c in value if child_fields(type(c)) is not None)
            elif child_fields(type(value)) is not None:
                in_chain = name == "lhs" and isinstance(node, BinOp) and isinstance(value, BinOp)
                stack.append((value, depth if in_chain else deeper))
    if not too_deep:
        return []
    first = min(too_deep, key=lambda s: (s.line, s.column))
    return [WiaSyntaxError(f"nesting too deep (more than {MAX_DEPTH} levels)", first)]

