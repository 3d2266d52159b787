"""A small FileCheck: match compiler output against ``CHECK`` lines, as LLVM's tests do.

Directives, one per line of the check text (leading ``//`` or ``#`` is allowed):
- ``CHECK: pat``        the next match at or after the current line
- ``CHECK-NEXT: pat``   on the line right after the previous match
- ``CHECK-SAME: pat``   on the same line as the previous match, further right
- ``CHECK-NOT: pat``    not between the previous match and the next one
- ``CHECK-LABEL: pat``  like CHECK (a visual section marker)
- ``CHECK-EMPTY:``      the next line is empty

A pattern matches as a substring, except ``{{regex}}`` parts, which are regular
expressions; runs of whitespace match any whitespace. On failure ``FileCheckError``
says which directive failed and shows the output around where it looked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_DIRECTIVE = re.compile(r"^\s*(?://|#)?\s*(CHECK(?:-NEXT|-SAME|-NOT|-LABEL|-EMPTY)?):(.*)$")


class FileCheckError(AssertionError):
    pass


@dataclass(frozen=True)
class Directive:
    kind: str
    pattern: str
    line: int

    def regex(self) -> re.Pattern[str]:
        parts = re.split(r"(\{\{.*?\}\})", self.pattern.strip())
        out = []
        for part in parts:
            if part.startswith("{{") and part.endswith("}}"):
                out.append(f"(?:{part[2:-2]})")
            else:
                out.extend(r"\s+" if tok.isspace() else re.escape(tok)
                           for tok in re.split(r"(\s+)", part) if tok)
        return re.compile("".join(out))


def parse_checks(check_text: str) -> list[Directive]:
    checks = []
    for number, line in enumerate(check_text.splitlines(), 1):
        m = _DIRECTIVE.match(line)
        if m:
            checks.append(Directive(m.group(1), m.group(2), number))
    if not checks:
        raise FileCheckError("no CHECK directives found")
    return checks


def filecheck(output: str, check_text: str) -> None:
    """Raise ``FileCheckError`` unless ``output`` satisfies the directives."""
    lines = output.splitlines()
    line, col = 0, 0  # the position after the previous match
    pending_not: list[Directive] = []
    for d in parse_checks(check_text):
        if d.kind == "CHECK-NOT":
            pending_not.append(d)
            continue
        start = (line, col)
        line, col = _find(d, lines, line, col)
        _check_nots(pending_not, lines, start, (line, col))
        pending_not = []
    _check_nots(pending_not, lines, (line, col), (len(lines), 0))


def _find(d: Directive, lines: list[str], line: int, col: int) -> tuple[int, int]:
    rx = d.regex()
    if d.kind == "CHECK-SAME":
        m = rx.search(lines[line - 1], col) if line > 0 else None
        if m:
            return line, m.end()
        _fail(d, lines, line - 1, "not found on the same line")
    if d.kind in ("CHECK-NEXT", "CHECK-EMPTY"):
        if line >= len(lines):
            _fail(d, lines, line, "no next line")
        if d.kind == "CHECK-EMPTY":
            if lines[line].strip():
                _fail(d, lines, line, "the next line is not empty")
            return line + 1, 0
        m = rx.search(lines[line])
        if not m:
            _fail(d, lines, line, "not found on the next line")
        return line + 1, m.end()  # type: ignore[union-attr]
    for i in range(line, len(lines)):
        m = rx.search(lines[i])
        if m:
            return i + 1, m.end()
    _fail(d, lines, line, "not found")
    raise AssertionError  # unreachable


def _check_nots(nots: list[Directive], lines: list[str], start: tuple[int, int],
                end: tuple[int, int]) -> None:
    for d in nots:
        rx = d.regex()
        for i in range(max(start[0] - 1, 0), min(end[0], len(lines))):
            if rx.search(lines[i]):
                _fail(d, lines, i, "found, but must not appear here")


def _fail(d: Directive, lines: list[str], at: int, why: str) -> None:
    lo, hi = max(at - 3, 0), min(at + 4, len(lines))
    shown = "\n".join(f"{'>' if i == at else ' '} {i + 1:4}| {lines[i]}" for i in range(lo, hi))
    raise FileCheckError(f"{d.kind}: {d.pattern.strip()!r} (check line {d.line}): {why}\n"
                         f"output near line {at + 1}:\n{shown}")
