"""The assembler: systolic assembly text -> ``isa.Listing`` (the printer's inverse).

Syntax (one item per line; ``;`` starts a comment):
    .target rows=R cols=C dataflow=ws timing=overlap spad=B acc=B dma_bw=B dma_latency=N vec_lanes=L
    .kernel NAME        (a listing of several kernels: before each one's sections)
    .section NAME array|vector|host "what"   ...   .end
    .dram NAME DTYPE [d0, d1, ...] in|out
    .view NAME = KIND BASE key=[ints] ...
    .spad NAME DTYPE [rows, cols]      .acc NAME [rows, cols]
    LABEL:
    MNEMONIC operand, operand, ...      (matmul.ws / .os / .is, [.acc]; mvin; mvout; ...)
    ; schedule key=value ...            (a structured comment, kept: the ws scheduler's note)
Operands: ``buf[r0:r1, c0:c1]`` (optionally ``:dtype``), ``view[b, r0:r1, c0:c1]``, ``w0``/``w1``.
Errors raise ``SasmError`` naming the line; semantic checks live in ``check.py``.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable

from ...diagnostics import WiaUsageError
from ...dtypes import IR_DTYPE_NAMES, DType
from .config import ArrayConfig, config_from_header
from .isa import (
    Buffer,
    Dram,
    Instruction,
    Label,
    Listing,
    Local,
    MatmulIS,
    MatmulOS,
    MatmulWS,
    Mvin,
    Mvout,
    Preload,
    Program,
    Remote,
    SasmError,
    Schedule,
    Section,
    Vec,
    VecReduce,
    View,
)

_NAME = r"[A-Za-z_][\w.]*"
_LOCAL = re.compile(rf"^({_NAME})\[(\d+):(\d+), (\d+):(\d+)\](?::(\w+))?$")
_REMOTE = re.compile(rf"^({_NAME})\[(\d+), (\d+):(\d+), (\d+):(\d+)\]$")
_SLOT = re.compile(r"^w([01])$")
_INTS = re.compile(r"^\[((?:-?\d+(?:, -?\d+)*)?)\]$")
_LABEL = re.compile(rf"^({_NAME}):$")


def _dtype(text: str) -> DType:
    if text not in IR_DTYPE_NAMES:
        raise SasmError(f"unknown dtype '{text}'")
    return IR_DTYPE_NAMES[text]


def _ints(text: str) -> tuple[int, ...]:
    m = _INTS.match(text)
    if m is None:
        raise SasmError(f"expected an integer list like [1, 2], got '{text}'")
    return tuple(int(x) for x in m.group(1).split(", ")) if m.group(1) else ()


def _range(a: str, b: str) -> tuple[int, int]:
    lo, hi = int(a), int(b)
    if hi <= lo:
        raise SasmError(f"empty range {lo}:{hi}")
    return (lo, hi)


def local(text: str) -> Local:
    m = _LOCAL.match(text)
    if m is None:
        raise SasmError(f"expected a buffer operand like a0[0:8, 0:8], got '{text}'")
    dtype = _dtype(m.group(6)) if m.group(6) else None
    return Local(m.group(1), _range(m.group(2), m.group(3)), _range(m.group(4), m.group(5)), dtype)


def remote(text: str) -> Remote:
    m = _REMOTE.match(text)
    if m is None:
        raise SasmError(f"expected a view operand like A[0, 0:8, 0:8], got '{text}'")
    return Remote(m.group(1), int(m.group(2)), _range(m.group(3), m.group(4)),
                  _range(m.group(5), m.group(6)))


def slot(text: str) -> int:
    m = _SLOT.match(text)
    if m is None:
        raise SasmError(f"expected a weight slot w0 or w1, got '{text}'")
    return int(m.group(1))


def _split_operands(text: str) -> list[str]:
    """Split at commas outside brackets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return [p for p in parts if p]


def _fixed(n: int, build: Callable[[list[str]], Instruction]) -> Callable[[list[str]], Instruction]:
    def parse(ops: list[str]) -> Instruction:
        if len(ops) != n:
            raise SasmError(f"takes {n} operands, got {len(ops)}")
        return build(ops)
    return parse


#: mnemonic -> operand parser (the whitelist of instructions)
MNEMONICS: dict[str, Callable[[list[str]], Instruction]] = {
    "mvin": _fixed(2, lambda o: Mvin(local(o[0]), remote(o[1]))),
    "mvout": _fixed(2, lambda o: Mvout(remote(o[0]), local(o[1]))),
    "preload": _fixed(2, lambda o: Preload(slot(o[0]), local(o[1]))),
    "matmul.ws": _fixed(3, lambda o: MatmulWS(local(o[0]), local(o[1]), slot(o[2]), False)),
    "matmul.ws.acc": _fixed(3, lambda o: MatmulWS(local(o[0]), local(o[1]), slot(o[2]), True)),
    "matmul.os": _fixed(3, lambda o: MatmulOS(local(o[0]), local(o[1]), local(o[2]), False)),
    "matmul.os.acc": _fixed(3, lambda o: MatmulOS(local(o[0]), local(o[1]), local(o[2]), True)),
    "matmul.is": _fixed(3, lambda o: MatmulIS(local(o[0]), local(o[1]), slot(o[2]), False)),
    "matmul.is.acc": _fixed(3, lambda o: MatmulIS(local(o[0]), local(o[1]), slot(o[2]), True)),
}


def _reduce(kind: str, accumulate: bool) -> Callable[[list[str]], Instruction]:
    return _fixed(2, lambda o: VecReduce(kind, local(o[0]), local(o[1]), accumulate))


#: row reductions of the vector unit: vec.rmax / vec.rmin / vec.rsum, each with .acc
for _kind in ("max", "min", "sum"):
    MNEMONICS[f"vec.r{_kind}"] = _reduce(_kind, False)
    MNEMONICS[f"vec.r{_kind}.acc"] = _reduce(_kind, True)


def schedule_note(text: str) -> Schedule:
    """``; schedule key=value ...`` (a structured comment) -> Schedule."""
    pairs = [w.partition("=") for w in text.split()[2:]]
    if any(not eq or not k for k, eq, _ in pairs):
        raise SasmError(f"expected '; schedule key=value ...', got '{text}'")
    return Schedule(tuple((k, v) for k, _, v in pairs))


def instruction(text: str) -> Instruction:
    m = _LABEL.match(text)
    if m is not None:
        return Label(m.group(1))
    mnemonic, _, rest = text.partition(" ")
    ops = _split_operands(rest)
    if mnemonic.startswith("vec.") and mnemonic not in MNEMONICS:
        if len(ops) < 2:
            raise SasmError(f"'{mnemonic}' needs a destination and at least one source")
        return Vec(mnemonic[4:], local(ops[0]), tuple(local(o) for o in ops[1:]))
    if mnemonic not in MNEMONICS:
        raise SasmError(f"unknown instruction '{mnemonic}'")
    return MNEMONICS[mnemonic](ops)


class _SectionBuilder:
    def __init__(self, words: list[str]):
        if len(words) != 4 or words[2] not in ("array", "vector", "host"):
            raise SasmError('expected .section NAME array|vector|host "what"')
        self.head = (words[1], words[2], words[3])
        self.drams: list[Dram] = []
        self.views: list[View] = []
        self.buffers: list[Buffer] = []
        self.body: list[Instruction] = []

    def directive(self, words: list[str]) -> None:
        kind = words[0]
        if kind == ".dram" and len(words) >= 5 and words[-1] in ("in", "out"):
            self.drams.append(Dram(words[1], _dtype(words[2]), _ints(" ".join(words[3:-1])),
                                   words[-1]))
        elif kind == ".view" and len(words) >= 5 and words[2] == "=":
            params = tuple(_param(w) for w in _join_lists(words[5:]))
            self.views.append(View(words[1], words[3], words[4], params))
        elif kind == ".spad" and len(words) >= 4:
            r, c = _pair(" ".join(words[3:]))
            self.buffers.append(Buffer(words[1], "spad", r, c, _dtype(words[2])))
        elif kind == ".acc" and len(words) >= 3:
            r, c = _pair(" ".join(words[2:]))
            self.buffers.append(Buffer(words[1], "acc", r, c))
        else:
            raise SasmError(f"malformed directive '{' '.join(words)}'")

    def build(self) -> Section:
        return Section(*self.head, tuple(self.drams), tuple(self.views), tuple(self.buffers),
                       tuple(self.body))


def _pair(text: str) -> tuple[int, int]:
    xs = _ints(text)
    if len(xs) != 2 or min(xs) < 1:
        raise SasmError(f"expected [rows, cols], got '{text}'")
    return xs[0], xs[1]


def _join_lists(words: list[str]) -> list[str]:
    """Re-join ``key=[1,`` ``2]`` split by whitespace into ``key=[1, 2]``."""
    out: list[str] = []
    for w in words:
        if out and out[-1].count("[") > out[-1].count("]"):
            out[-1] += " " + w
        else:
            out.append(w)
    return out


def _param(word: str) -> tuple[str, tuple[int, ...]]:
    key, eq, value = word.partition("=")
    if not eq:
        raise SasmError(f"expected key=[ints], got '{word}'")
    return key, _ints(value)


def parse_listing(text: str) -> Listing:
    """Assemble ``text``, one kernel's listing; SasmError (with the line number) on
    malformed input."""
    config, kernels = _parse(text)
    if list(kernels) != [None]:
        raise SasmError("a listing of several kernels (.kernel lines): read it with parse_program")
    return Listing(config, kernels[None])


def parse_program(text: str) -> Program:
    """Assemble a listing of several kernels (``.kernel NAME`` before each one's sections)."""
    config, kernels = _parse(text)
    named = {k: Listing(config, sections) for k, sections in kernels.items() if k is not None}
    if None in kernels and kernels[None]:
        raise SasmError("sections before the first .kernel line")
    if not named:
        raise SasmError("no .kernel line: read a one-kernel listing with parse_listing")
    return Program(config, named)


def _parse(text: str) -> tuple[ArrayConfig, dict[str | None, tuple[Section, ...]]]:
    """The ``.target`` config and the sections of each kernel (None: before any ``.kernel``)."""
    config = None
    kernels: dict[str | None, list[Section]] = {None: []}
    sections = kernels[None]
    current: _SectionBuilder | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split(";", 1)[0].strip() if not raw.lstrip().startswith(".section") else raw.strip()
        note = current is not None and raw.split()[:2] == [";", "schedule"]
        if not line and not note:
            continue
        try:
            if note:
                current.body.append(schedule_note(raw.strip()))  # type: ignore[union-attr]
            elif line.startswith(".target"):
                pairs = dict(w.split("=", 1) for w in line.split()[1:] if "=" in w)
                config = config_from_header(pairs)
            elif line.startswith(".kernel") and current is None:
                words = line.split()
                if len(words) != 2 or words[1] in kernels:
                    raise SasmError(f"'{line}': expected '.kernel NAME' with a new name")
                if None in kernels and not kernels[None]:
                    del kernels[None]
                sections = kernels.setdefault(words[1], [])
            elif line.startswith(".section"):
                if current is not None:
                    raise SasmError("nested .section (missing .end)")
                current = _SectionBuilder(shlex.split(line))
            elif line == ".end":
                if current is None:
                    raise SasmError(".end outside a section")
                sections.append(current.build())
                current = None
            elif current is None:
                raise SasmError(f"'{line}' outside a section")
            elif line.startswith("."):
                current.directive(line.split())
            else:
                current.body.append(instruction(line))
        except (SasmError, WiaUsageError, ValueError) as e:
            msg = e.message if isinstance(e, (SasmError, WiaUsageError)) else str(e)
            raise SasmError(f"line {number}: {msg}") from None
    if current is not None:
        raise SasmError("missing .end at the end of the listing")
    if config is None:
        raise SasmError("missing .target line")
    return config, {k: tuple(v) for k, v in kernels.items()}
