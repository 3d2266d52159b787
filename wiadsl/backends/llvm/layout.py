"""How to call a compiled entry (its argument slots and result plan), as stored
beside the object code in the compile cache. Light on purpose: a warm process
reads it without importing the code generator (issue 21)."""

from __future__ import annotations

from typing import Any

from ...diagnostics import SourceFile, Span
from ...records import as_dict, field, record


@record(frozen=True)
class Layout:
    """How to call a compiled entry: argument slots and result plan (JSON-able)."""

    symbol: str
    messages: list[list[Any]]       #: per error code: [message, span as a dict or None]
    in_dtypes: list[str]            #: storage dtype per input
    results: list[list[Any]]        #: per result: [first slot, rank or -1, dtype]
    n_slots: int                    #: every i64 slot of the argument array (runtime.py)
    libraries: list[dict[str, Any]] = field(default_factory=list)  #: library.py specs to load first
    #: [input, axis] per extent read at run time, in the last slots (a shape-generic entry)
    dynamic: list[list[int]] = field(default_factory=list)
    #: cells of the entry's state (prepacked.py): its address is the last slot
    state: int = 0
    #: tensor results (their index among them) the entry computes in the caller's
    #: buffer when one of the right size is given (destinations.py): never copied
    in_place: list[int] = field(default_factory=list)
    #: how many slices of its batch the entry runs, one per thread (batch_split.py; 1: none)
    slices: int = 1

    def as_dict(self) -> dict[str, Any]:
        return as_dict(self)

    @staticmethod
    def from_dict(d: dict[str, Any]) -> Layout:
        return Layout(d["symbol"], [list(m) for m in d["messages"]], list(d["in_dtypes"]),
                      [list(r) for r in d["results"]], int(d["n_slots"]),
                      [dict(s) for s in d.get("libraries", [])],
                      [list(a) for a in d.get("dynamic", [])], int(d.get("state", 0)),
                      [int(j) for j in d.get("in_place", [])], int(d.get("slices", 1)))

    def errors(self, sources: dict[str, SourceFile]) -> list[tuple[str, Span | None]]:
        """The runtime error messages with their spans rebuilt on ``sources`` (file
        name -> source; a span whose file is not among them is dropped, the message kept)."""
        out: list[tuple[str, Span | None]] = []
        for message, span in self.messages:
            source = sources.get(span["file"]) if span else None
            out.append((message, None if source is None else Span(
                source, span["line"], span["column"], span["end_line"], span["end_column"])))
        return out
