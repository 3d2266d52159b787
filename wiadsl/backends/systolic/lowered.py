"""What lowering a group yields (a section and where its inputs come from), and the
DRAM names a section gives IR values.

Invariant: DRAM names are valid identifiers, unique within a section, and never
look like the names the tiling gives local buffers (``a0``, ``c1``, ``w0buf``...).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...ir.core import Value
from .isa import Section
from .plan import Group


@dataclass
class Lowered:
    section: Section
    #: DRAM input name -> the IR value (read from the environment at each run)
    #: or constant array that fills it
    inputs: dict[str, Value | np.ndarray]
    output: str


#: names the tiling gives local buffers; DRAM names must differ from them
_LOCAL_NAME = re.compile(r"^([acte]\d+|w\d+buf)$")


class Names:
    """DRAM names from IR value names: valid identifiers, unique within a section."""

    def __init__(self) -> None:
        self.used: set[str] = set()
        self.by_value: dict[int, str] = {}

    def __call__(self, key: Any, hint: str | None) -> str:
        if id(key) in self.by_value:
            return self.by_value[id(key)]
        base = re.sub(r"\W", "_", hint or "") or "v"
        if not re.match(r"[A-Za-z_]", base):
            base = "v" + base
        name, n = base, 1
        while name in self.used or _LOCAL_NAME.match(name):
            name, n = f"{base}_{n}", n + 1
        self.used.add(name)
        self.by_value[id(key)] = name
        return name


def invariance(index: np.ndarray) -> tuple[bool, bool]:
    """(constant along rows, constant along columns) of an index matrix [B, R, C]: an
    operand that is loads one row (or column) per tile."""
    return bool((index == index[:, :1, :]).all()), bool((index == index[:, :, :1]).all())


def describe(group: Group) -> str:
    """The section's one-line ``what``: its ops and the values they define."""
    parts = [f"{op.name} %{op.results[0].name_hint}" if op.results and op.results[0].name_hint
             else op.name for op in group.ops]
    return " + ".join(parts).replace('"', "'").replace(";", ",")
