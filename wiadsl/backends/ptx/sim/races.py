"""Shared-memory race reports: ``Race``, ``SimRaceError`` and the per-launch ``RaceLog``.

A race is two accesses to one shared-memory byte of one block, by threads of
different warps (or a thread and an async agent: a TMA copy, a wgmma), at least one
a write, that nothing orders (a completed ``bar.sync``, an mbarrier phase a waiter
observed, a ``wgmma.wait_group``); an access to bytes that a ``cp.async`` has not
yet delivered (no ``cp.async.wait_group``/``wait_all`` of the issuing thread retired
it); or an async-proxy access after a generic write with no ``fence.proxy.async``.
The tracker that finds them lives in ``tracker.py``; this module only names them.

Invariant: a ``Race`` is self-describing (both instructions with line and text,
both threads, the block, the variable and byte offset), so a test can assert on
it and a user can find both sides in the PTX.  ``RaceLog`` either raises the
first race as ``SimRaceError`` (mode ``"raise"``) or keeps one example of each
distinct (kind, earlier pc, later pc) pair (mode ``"collect"``, at most ``limit``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .ast import Instr
from .errors import PtxSimError
from .state import Geometry

RACE_MODES = ("raise", "collect", "off")

#: kind -> what was missing between the two accesses (for the message).
_ORDER = " (nor an mbarrier phase or wgmma.wait_group ordering them)"
KINDS = {
    "read-after-write": "no bar.sync between the write and the read" + _ORDER,
    "write-after-read": "no bar.sync between the read and the write" + _ORDER,
    "write-after-write": "no bar.sync between the two writes" + _ORDER,
    "read-before-async-wait": "no cp.async.wait_group retired the copy before the read",
    "write-before-async-wait": "no cp.async.wait_group retired the copy before the write",
    "async-after-generic-write": "no fence.proxy.async by the writer between its generic-proxy "
                                 "write and the async-proxy (TMA, wgmma) access",
}


@dataclass(frozen=True)
class Access:
    """One side of a race: the instruction (index, PTX line, text) and the thread."""

    pc: int
    line: int | None
    instr: str
    thread: tuple[int, int, int]

    def __str__(self) -> str:
        return f"line {self.line} ({self.instr!r}) by thread {self.thread}"


@dataclass(frozen=True)
class Race:
    """Two conflicting accesses to shared ``variable`` + ``offset`` of one block."""

    kind: str
    kernel: str
    block: tuple[int, int, int]
    address: int
    variable: str
    offset: int
    earlier: Access
    later: Access

    def __str__(self) -> str:
        return (f"{self.kind} race on shared '{self.variable}'+{self.offset} (address "
                f"0x{self.address:x}) in kernel '{self.kernel}' block {self.block}: "
                f"{self.earlier}, then {self.later}; {KINDS[self.kind]}")


class SimRaceError(PtxSimError):
    """A launch found at least one shared-memory race; ``races`` lists them."""

    def __init__(self, races: tuple[Race, ...]):
        self.races = races
        first = races[0]
        more = f" (and {len(races) - 1} more)" if len(races) > 1 else ""
        super().__init__(f"data race: {first}{more}", kernel=first.kernel,
                         line=first.later.line, instr=first.later.instr,
                         address=first.address)


@dataclass
class RaceLog:
    """Turns raw race findings of one launch into ``Race`` records (raise or collect)."""

    kernel: str
    instrs: list[Instr]
    geom: Geometry
    mode: str = "raise"
    limit: int = 64
    races: list[Race] = field(default_factory=list)
    _seen: set[tuple[str, int, int]] = field(default_factory=set)

    def access(self, pc: int, tid: int) -> Access:
        ins = self.instrs[pc] if 0 <= pc < len(self.instrs) else None
        return Access(pc, ins.line if ins else None, str(ins) if ins else "?",
                      self.geom.thread_coords(tid))

    def add(self, kind: str, block: int, address: int, variable: str, offset: int,
            earlier: tuple[int, int], later: tuple[int, int]) -> None:
        """Record one race: ``earlier``/``later`` are (pc, thread index in the block)."""
        key = (kind, earlier[0], later[0])
        if key in self._seen or len(self.races) >= self.limit:
            return
        self._seen.add(key)
        race = Race(kind, self.kernel, self.geom.block_coords(block), address, variable, offset,
                    self.access(*earlier), self.access(*later))
        self.races.append(race)
        if self.mode == "raise":
            raise SimRaceError((race,))

    def wants_all(self) -> bool:
        """True when every distinct pair of an access is worth reporting (collect mode)."""
        return self.mode == "collect" and len(self.races) < self.limit
