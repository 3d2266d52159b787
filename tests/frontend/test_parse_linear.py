"""The frontend's work on positions grows linearly with the source (issue 17, item 8).

Not timed: the source text is a ``str`` subclass that adds up how many
characters its own search methods may scan, so a step that rescans the file per
node (as ``exprtext._offset`` once did, per ``BinOp``) shows as a quadratic
count however busy the machine is.
"""

from __future__ import annotations

from typing import Any

from wiadsl.diagnostics import SourceFile
from wiadsl.frontend import ast
from wiadsl.frontend.exprtext import op_span
from wiadsl.frontend.loader import load_program
from wiadsl.frontend.parser import parse_source
from wiadsl.frontend.scope import iter_nodes
from wiadsl.frontend.typecheck import check


class ScanCountingText(str):
    """Source text that counts the characters its search methods may look at."""

    scanned = 0

    def _note(self, start: Any = None, end: Any = None) -> None:
        lo = 0 if start is None else start % (len(self) + 1) if start < 0 else start
        hi = len(self) if end is None else min(end, len(self))
        ScanCountingText.scanned += max(0, hi - lo)

    def find(self, sub: Any, start: Any = None, end: Any = None) -> int:
        self._note(start, end)
        return super().find(sub, start, end)

    def rfind(self, sub: Any, start: Any = None, end: Any = None) -> int:
        self._note(start, end)
        return super().rfind(sub, start, end)

    def index(self, sub: Any, start: Any = None, end: Any = None) -> int:
        self._note(start, end)
        return super().index(sub, start, end)

    def rindex(self, sub: Any, start: Any = None, end: Any = None) -> int:
        self._note(start, end)
        return super().rindex(sub, start, end)

    def count(self, sub: Any, start: Any = None, end: Any = None) -> int:
        self._note(start, end)
        return super().count(sub, start, end)

    def split(self, sep: Any = None, maxsplit: int = -1) -> list[str]:
        self._note()
        return super().split(sep, maxsplit)

    def splitlines(self, keepends: bool = False) -> list[str]:
        self._note()
        return super().splitlines(keepends)


def program(kernels: int) -> str:
    """``kernels`` small kernels, each with a few operators to locate."""
    body = "kernel k{i}(input a: f32[N], input b: f32[N], output c: f32[N]) {{\n" \
           "    t = a * b + a - b;\n    c = t @ t + t / 2.0;\n}}\n"
    return "".join(body.format(i=i) for i in range(kernels))


def scanned_checking(kernels: int) -> int:
    ScanCountingText.scanned = 0
    check(load_program(ScanCountingText(program(kernels)), "lin.wia"))
    return ScanCountingText.scanned


def test_parse_and_check_scan_the_source_a_linear_number_of_times():
    small, large = scanned_checking(25), scanned_checking(100)
    # Linear work gives a ratio of 4; rescanning from line 1 per operator gives 16.
    assert large <= 6 * small, (small, large)


def test_op_span_does_not_rescan_the_source():
    text = ScanCountingText(program(200))
    binops = [n for n in iter_nodes(parse_source(text, "ops.wia"))
              if isinstance(n, ast.BinOp)]
    ScanCountingText.scanned = 0
    spans = [op_span(e) for e in binops]
    # The line table (one split of the whole text) plus the gaps between operands.
    assert ScanCountingText.scanned <= len(text) + 10 * len(binops)
    last = binops[-1]
    assert spans[-1].line == last.span.line
    assert text.split("\n")[spans[-1].line - 1][spans[-1].column - 1] == last.op


def test_line_table_conversions_match_a_direct_count():
    text = "ab\n\ncd\r\nef\fg\n"
    source = SourceFile("t.wia", text)
    for offset in range(len(text) + 1):
        line, column = source.position(offset)
        assert line == text.count("\n", 0, offset) + 1
        assert column == offset - (text.rfind("\n", 0, offset) + 1) + 1
        assert source.offset(line, column) == offset
    assert [source.line_text(i) for i in range(0, 7)] == ["", "ab", "", "cd", "ef\fg", "", ""]
