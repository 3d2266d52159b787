"""The generated modules (wiadsl/generated.py): the grammar's parse tables
(frontend/grammar_data.py) and the built-in rewrite patterns (rewrite/patterns_data.py)
are current, parse exactly as what Lark makes from the files now, and let a process
parse and compile without importing Lark."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from wiadsl.diagnostics import WiaError
from wiadsl.frontend import grammar_data, grammar_tables, lalr, tokens
from wiadsl.frontend.astdump import dump_program
from wiadsl.frontend.parser import parse_source
from wiadsl.generated import made_from
from wiadsl.rewrite import declarative, pattern_text, patterns_data

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted((ROOT / "examples").glob("*.wia")) + sorted((ROOT / "stdlib").glob("*.wia"))
#: bad programs whose messages come from the tables (expected terminals, spellings)
BAD = ["kernel k(input x: f32[N], output y: f32[N]) { y = x + ; }",
       "kernel k(x: f32[N]) { }",
       "kernel k(input x: f32[N], output y: f32[N]) { y = x }",
       "const a = 1 < 2 < 3;",
       "kernel k(input x: f32[N], output y: f32[N]) { y = x @@ x; }",
       "func f(a, b) { return a $ b; }",
       "kernel k(input x: f32[N] output y: f32[N]) { y = x; }"]


def test_the_grammar_tables_are_current() -> None:
    assert grammar_data.MADE_FROM == made_from(grammar_tables._sources()), \
        "the grammar or grammar_tables.py changed: run python -m wiadsl.frontend.grammar_tables"


def test_the_builtin_patterns_are_current() -> None:
    assert patterns_data.MADE_FROM == made_from(pattern_text.builtin_sources()), \
        "a pattern file or pattern_text.py changed: run python -m wiadsl.rewrite.pattern_text"
    assert patterns_data.PATTERNS == pattern_text.builtin_plain()


def _forget_tables() -> None:
    for cached in (grammar_tables.tables, lalr._table, tokens._scanner, tokens._spellings):
        cached.cache_clear()


def _parses() -> list[str]:
    """Every source's AST dump, and every bad program's messages."""
    out = [dump_program(parse_source(p.read_text(), p.name)) for p in SOURCES]
    for text in BAD:
        with pytest.raises(WiaError) as info:
            parse_source(text, "bad.wia")
        out.append(str(info.value))
    return out


def test_the_generated_tables_parse_as_lark_makes_them(monkeypatch) -> None:
    """Lark numbers its states differently per build: compared by what they parse."""
    builds = []
    real = grammar_tables.build
    monkeypatch.setattr(grammar_tables, "build", lambda grammar: builds.append(1) or real(grammar))
    _forget_tables()
    try:
        generated = _parses()
        assert builds == []  # read from grammar_data.py
        monkeypatch.setattr(grammar_data, "MADE_FROM", None)  # out of date: Lark builds them
        _forget_tables()
        assert _parses() == generated
        assert builds == [1]
    finally:
        monkeypatch.undo()
        _forget_tables()
    assert len(generated) == len(SOURCES) + len(BAD) and len(SOURCES) > 10


def test_out_of_date_patterns_are_parsed_again(monkeypatch) -> None:
    monkeypatch.setattr(patterns_data, "MADE_FROM", None)
    declarative.builtin_patterns.cache_clear()
    try:
        names = [p.name for p in declarative.builtin_patterns()]
    finally:
        monkeypatch.undo()
        declarative.builtin_patterns.cache_clear()
    assert names == [p[0] for p in patterns_data.PATTERNS]


def test_parsing_and_compiling_import_no_lark(tmp_path) -> None:
    code = ("import sys, numpy as np, wiadsl\n"
            f"mod = wiadsl.jit_file({str(ROOT / 'examples' / 'mlp.wia')!r}, target='cpu')\n"
            "f = lambda *s: np.full(s, 0.5, np.float32)\n"
            "mod.mlp_relu(f(5, 12), f(12, 32), f(32), f(32, 7), f(7))\n"
            "print(sorted(m for m in ('lark', 'regex') if m in sys.modules))\n")
    env = {"WIADSL_CACHE_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_a_token_is_a_string_with_its_kind_and_place() -> None:
    import copy
    import pickle

    from wiadsl.frontend.grammar_tables import Token

    name = Token("NAME", "x", 4, 1, 5, 1, 6, 5)
    assert name == "x" and hash(name) == hash("x") and repr(name) == "Token('NAME', 'x')"
    assert name != Token("INT", "x")  # tokens of two kinds differ, as Lark's do
    for again in (pickle.loads(pickle.dumps(name)), copy.deepcopy(name)):
        assert again == name and (again.type, again.line, again.column, again.end_pos) == ("NAME", 1, 5, 5)
