"""The grammar's LALR table and lexer as plain data: a process parses WIA DSL
without importing Lark.

Why: importing Lark (and the ``regex`` module it takes) cost ~25 ms of every
process that parses: of ResNet-18's first result from ONNX, of a ``wiadsl.jit`` of
new source. The parser (lalr.py) and the lexer (tokens.py) only read tables made
from the grammar. Lark makes them (``build``); ``python -m wiadsl.frontend.grammar_tables``
writes them into ``grammar_data.py``, as parser generators write their tables
(yacc, Lark's own standalone mode), and ``tables`` reads that module.

Invariants:
- The tables are self-contained: the LALR actions, the rules' child plans and the
  terminals all come from one Lark build.
- ``grammar_data.py`` names what it was made from (the grammar's text and this
  module's, generated.py). When either differs (edited, not yet regenerated),
  ``tables`` builds them with Lark instead: parsing follows the grammar file either
  way, and tests/test_generated.py fails until it is regenerated. (Lark numbers the
  states differently from one build to the next, with the hash seed: the module is
  compared by what it was made from, not by its contents.)
- ``Token`` is, to the parser, the AST builder and error messages, what Lark's
  token is: a ``str`` with its terminal's name and its position.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..generated import made_from, module_text, write
from ..records import record
from ..resources import grammar_path

if TYPE_CHECKING:
    from lark import Lark
    from lark.grammar import Rule


class Token(str):
    """A lexed token: its text, the grammar's terminal name (``type``) and its
    1-based position (as Lark's ``Token``, whose fields and repr it has)."""

    __slots__ = ("type", "value", "start_pos", "line", "column", "end_line", "end_column",
                 "end_pos")
    type: str
    value: str
    start_pos: int | None
    line: int | None
    column: int | None
    end_line: int | None
    end_column: int | None
    end_pos: int | None

    def __new__(cls, type: str, value: str, start_pos: int | None = None,
                line: int | None = None, column: int | None = None, end_line: int | None = None,
                end_column: int | None = None, end_pos: int | None = None) -> Token:
        token = str.__new__(cls, value)
        token.type, token.value, token.start_pos = type, value, start_pos
        token.line, token.column, token.end_line, token.end_column, token.end_pos = \
            line, column, end_line, end_column, end_pos
        return token

    def __repr__(self) -> str:
        return f"Token({self.type!r}, {self.value!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Token, (self.type, self.value, self.start_pos, self.line, self.column,
                        self.end_line, self.end_column, self.end_pos))

    def __eq__(self, other: object) -> bool:  # as Lark's: tokens of two kinds differ
        if isinstance(other, Token) and self.type != other.type:
            return False
        return str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:  # (str's own would ignore the kinds)
        return not self == other

    __hash__ = str.__hash__


#: One rule's reduction for lalr.py's ``_RulePlan``: (symbols popped, origin, builder
#: method or None, expand1, kept children (index, splice, Nones before), Nones after, plain)
RulePlan = tuple[int, str, "str | None", bool, tuple[tuple[int, bool, int], ...], int, bool]


@record(frozen=True)
class Tables:
    """What parsing needs of the grammar (module docstring)."""

    #: ``actions[state][symbol]``: a state to shift or go to when ``>= 0``, else
    #: ``-1 - i`` reduces ``rules[i]``
    actions: dict[int, dict[str, int]]
    rules: tuple[RulePlan, ...]
    start: int
    end: int
    #: the lexer's one regex (tokens.py's ``_Scanner``)
    scanner: str
    keywords: dict[str, dict[str, str]]  # regex terminal -> {text: string terminal}
    multiline: frozenset[str]  # terminals whose text may hold a newline
    spellings: dict[str, str]  # string terminal -> its text, quoted, for error messages


#: the scanner's group for a character no terminal matches
INVALID = "_invalid"


@functools.cache
def tables() -> Tables:
    """The grammar's tables: grammar_data.py's, or Lark's when it is out of date."""
    from . import grammar_data

    if grammar_data.MADE_FROM == made_from(_sources()):
        return Tables(*(getattr(grammar_data, f.upper()) for f in _FIELDS))
    return Tables(*build(grammar_path().read_text(encoding="utf-8")))


_FIELDS = ("actions", "rules", "start", "end", "scanner", "keywords", "multiline", "spellings")


def _sources() -> list[Path]:
    """What grammar_data.py is made from."""
    return [grammar_path(), Path(__file__)]


def render() -> str:
    """The text of grammar_data.py."""
    fields = build(grammar_path().read_text(encoding="utf-8"))
    return module_text("The grammar's LALR table and lexer (grammar_tables.py), made by Lark from\n"
                       "grammar/wia.lark.", "wiadsl.frontend.grammar_tables", made_from(_sources()),
                       {f.upper(): v for f, v in zip(_FIELDS, fields, strict=True)})


def build(grammar: str) -> tuple[Any, ...]:
    """``Tables``' fields for ``grammar``, from Lark's LALR parser and basic lexer."""
    from lark.lexer import BasicLexer
    from lark.parsers.lalr_analysis import Shift

    parser = _lark(grammar)
    parse_table = parser.parser.parser.parser.parse_table
    index: dict[Rule, int] = {}
    actions: dict[int, dict[str, int]] = {}
    for state, row in parse_table.states.items():
        actions[state] = {
            symbol: arg if action is Shift else -1 - index.setdefault(arg, len(index))
            for symbol, (action, arg) in row.items()
        }
    plans = tuple(_plan(rule) for rule in index)  # dicts keep insertion order
    lexer = BasicLexer(parser.lexer_conf)
    scanner, keywords, multiline = _scanner(lexer)
    spellings = {t.name: f"'{t.pattern.value}'" for t in parser.terminals if t.pattern.type == "str"}
    return (actions, plans, parse_table.start_states["start"], parse_table.end_states["start"],
            scanner, keywords, multiline, spellings)


def _lark(grammar: str) -> Lark:
    """Lark's LALR parser for the grammar (basic lexer, so keywords are reserved)."""
    from lark import Lark

    return Lark(
        grammar,
        parser="lalr",
        lexer="basic",
        # No propagate_positions: no parse tree is built (lalr.LalrParser computes
        # extents itself); the placeholders shape children (``_plan``).
        maybe_placeholders=True,
        # Lark keys its own cache file on the grammar text and options: a rebuild of
        # the tables skips its LALR analysis (~0.25 s)
        cache=True,
    )


def _plan(rule: Rule) -> RulePlan:
    """The child filter of Lark's ``parse_tree_builder.maybe_create_child_filter``."""
    from lark.grammar import Terminal

    expansion = rule.expansion
    options = rule.options
    if options.empty_indices:
        flags = "".join(str(int(b)) for b in options.empty_indices)
        empty = [len(ones) for ones in flags.split("0")]
    else:
        empty = [0] * (len(expansion) + 1)
    kept: list[tuple[int, bool, int]] = []
    nones = 0
    for i, sym in enumerate(expansion):
        nones += empty[i]
        if options.keep_all_tokens or not (isinstance(sym, Terminal) and sym.filter_out):
            kept.append((i, not sym.is_term and sym.name.startswith("_"), nones))
            nones = 0
    nones += empty[len(expansion)]
    name = rule.alias or options.template_source or rule.origin.name
    plain = (len(kept) == len(expansion) and not nones
             and not any(splice or before for _, splice, before in kept))
    return (len(expansion), rule.origin.name, None if name.startswith("_") else name,
            bool(options.expand1 and not rule.alias), tuple(kept), nones, plain)


def _may_span_lines(regexp: str) -> bool:
    """Lark's ``_regexp_has_newline``: whether a terminal's text may hold a newline."""
    return ("\n" in regexp or "\\n" in regexp or "\\s" in regexp or "[^" in regexp
            or ("(?s" in regexp and "." in regexp))


def _scanner(lexer: Any) -> tuple[str, dict[str, dict[str, str]], frozenset[str]]:
    """Lark's basic lexer as one regex: each match skips ignored text (spaces,
    comments), then takes one token, one invalid character, or the end.

    The terminals are tried in Lark's order (priority, then longest first), as its
    ``Scanner`` builds them. The ignored ones are skipped first: in this grammar no
    token starts like a comment or a space. A string terminal that a regex terminal
    of the same priority also matches (a keyword and NAME) is found by looking the
    regex terminal's text up, as Lark's "unless" callback does.
    """
    from lark.lexer import PatternRE, PatternStr

    strings = [t for t in lexer.terminals if isinstance(t.pattern, PatternStr)]
    keywords: dict[str, dict[str, str]] = {}
    embedded: set[str] = set()
    for t in lexer.terminals:
        if not isinstance(t.pattern, PatternRE):
            continue
        regex = re.compile(t.pattern.to_regexp())
        for k in strings:
            m = regex.match(k.pattern.value)
            if k.priority == t.priority and m and m.group() == k.pattern.value:
                assert not k.pattern.flags, "a keyword looked up by its exact text"
                keywords.setdefault(t.name, {})[k.pattern.value] = k.name
                embedded.add(k.name)
    ignored = "|".join(t.pattern.to_regexp() for t in lexer.terminals
                       if t.name in lexer.ignore_types)
    tokens = "|".join(f"(?P<{t.name}>{t.pattern.to_regexp()})" for t in lexer.terminals
                      if t.name not in embedded and t.name not in lexer.ignore_types)
    # Possessive: skipped text is never given back to be matched as a token.
    scanner = f"(?:{ignored})*+(?:{tokens}|(?P<{INVALID}>[\\s\\S])|\\Z)"
    multiline = frozenset(t.name for t in lexer.terminals
                          if _may_span_lines(t.pattern.to_regexp()))
    return scanner, keywords, multiline


__all__ = ["INVALID", "Tables", "Token", "build", "render", "tables"]


if __name__ == "__main__":
    write(Path(__file__).with_name("grammar_data.py"), render())
