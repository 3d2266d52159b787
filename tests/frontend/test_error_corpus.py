"""Every malformed program in ``error_corpus/`` gives exactly the error its header states.

Each corpus file starts with ``// error: <exact message>`` and ``// at: LINE:COL``;
the loader and checker must raise exactly one error with that message and position.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from wiadsl.diagnostics import WiaError, WiaErrors
from wiadsl.frontend.loader import load_program
from wiadsl.frontend.typecheck import check

CORPUS = Path(__file__).parent / "error_corpus"
FILES = sorted(CORPUS.glob("*.wia"))
_HEADER = re.compile(r"// error: (?P<message>.*)\n// at: (?P<line>\d+):(?P<col>\d+)\n")


def test_corpus_is_large_enough() -> None:
    assert len(FILES) >= 40


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_corpus_file(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    header = _HEADER.match(text)
    assert header, f"{path.name} must start with '// error:' and '// at:' lines"
    with pytest.raises(WiaError) as info:
        check(load_program(text, str(path)))
    errors = info.value.errors if isinstance(info.value, WiaErrors) else [info.value]
    assert [e.message for e in errors] == [header["message"]]
    span = errors[0].span
    assert span is not None
    assert (span.line, span.column) == (int(header["line"]), int(header["col"]))
    assert span.filename == str(path)
