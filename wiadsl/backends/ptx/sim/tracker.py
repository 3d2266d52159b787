"""Per-byte access stamps of shared memory: finds races as accesses happen.

Every shared *unit* of every block of a wave keeps three stamps (int64, -1 = none):
``wr`` the last write, ``rd`` the last read, ``pend`` an in-flight ``cp.async``.
A stamp packs ``epoch << 32 | pc << 12 | multi << 11 | tid``: the block's barrier
epoch at the access (completed barriers so far), the instruction index, the
thread index in the block, and (read stamps only) whether readers of more than
one warp read the unit in that epoch.  A unit is the smallest shared access size
of the kernel (``shared_unit``: 4 bytes for an f32 kernel, 2 with f16 stores, 1 with
byte accesses); accesses are aligned to their size, so every access covers whole
units and per-unit stamps are exact, at a quarter of the per-byte cost for f32.

Rules (``races.py`` names the kinds):

* a read races with a write of the same epoch by another warp;
* a write races with a write or read of the same epoch by another warp;
* any access races with an in-flight ``cp.async`` to the byte (even the issuing
  thread's own: the data may not have arrived); a ``cp.async`` is checked as a
  write when issued and stamped as a write when a wait retires it.

Lanes of one warp run in lockstep here, as on hardware between divergence
points, so two lanes of the same warp never race (we do not model Volta's
independent thread scheduling, which would need ``__syncwarp`` between them).
Atomics are not tracked.  Any completed barrier of a block (also a named
``bar.sync id, count``) starts a new epoch for the whole block.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .ast import Imm, Instr
from .ptxtypes import TYPES
from .races import RaceLog

_TID = np.int64(0x7FF)
_MULTI = np.int64(1 << 11)
_PC = np.int64(0xFFFFF)
NONE = -1


def _warp(stamp: np.ndarray) -> np.ndarray:
    return (stamp & _TID) >> 5


class RaceTracker:
    """Stamps for ``rows`` blocks x ``total`` bytes of shared memory (see module docstring)."""

    def __init__(self, rows: int, total: int, tid_of_lane: np.ndarray, first_block: int,
                 log: RaceLog, describe: Callable[[int], tuple[str, int]], unit: int = 1):
        self.unit = unit
        self.total = total
        size = rows * total // unit
        self.wr = np.full(size, NONE, np.int64)
        self.rd = np.full(size, NONE, np.int64)
        self.pend = np.full(size, NONE, np.int64)
        self.pending = 0  # bytes in flight: when 0 the ``pend`` gathers are skipped
        self.epoch = np.zeros(rows, np.int64)
        self.tid = tid_of_lane.astype(np.int64)
        self.first = first_block
        self.log = log
        self.describe = describe  # shared offset -> (variable name, offset in it)
        self.pc = 0

    def units(self, rows: np.ndarray, off: np.ndarray, nbytes: int) -> np.ndarray:
        """Linear unit indices [n, nbytes // unit] of an access of ``nbytes`` at ``off`` per lane."""
        first = (rows * self.total + off) // self.unit
        n = max(1, nbytes // self.unit)
        return first[:, None] if n == 1 else first[:, None] + np.arange(n)

    def barrier(self, rows: np.ndarray | None) -> None:
        """Blocks ``rows`` (all when None) completed a barrier: a new epoch starts."""
        if rows is None:
            self.epoch += 1
        else:
            self.epoch[rows] += 1

    def _stamp(self, lanes: np.ndarray, rows: np.ndarray, pc: int | np.ndarray) -> np.ndarray:
        return (self.epoch[rows] << 32) | (np.asarray(pc, np.int64) << 12) | self.tid[lanes]

    def _conflicts(self, prev: np.ndarray, cur: np.ndarray, warp: np.ndarray,
                   any_multi: bool = False) -> np.ndarray:
        same = (prev >> 32) == cur[:, None]
        other = _warp(prev) != warp[:, None]
        if any_multi:
            other |= (prev & _MULTI) != 0
        return same & other & (prev >= 0)

    def read(self, lin: np.ndarray, lanes: np.ndarray, rows: np.ndarray) -> None:
        """Check and record a read of units ``lin`` [n, units] (linear, see ``units``) by ``lanes``."""
        cur, warp = self.epoch[rows], self.tid[lanes] >> 5
        self._check(lin, lanes, cur, warp, write=False)
        new = self._stamp(lanes, rows, self.pc)[:, None]
        rs = self.rd[lin]
        same = (rs >> 32) == cur[:, None]
        multi = same & ((_warp(rs) != warp[:, None]) | ((rs & _MULTI) != 0))
        self.rd[lin] = np.where(multi, new | _MULTI, new)
        # lanes of different warps reading one unit in this very instruction
        clash = _warp(self.rd[lin]) != warp[:, None]
        if clash.any():
            self.rd[lin[clash]] |= _MULTI

    def write(self, lin: np.ndarray, lanes: np.ndarray, rows: np.ndarray) -> None:
        """Check and record a plain store of units ``lin`` by ``lanes``."""
        cur, warp = self.epoch[rows], self.tid[lanes] >> 5
        self._check(lin, lanes, cur, warp, write=True)
        new = np.broadcast_to(self._stamp(lanes, rows, self.pc)[:, None], lin.shape)
        self.wr[lin] = new
        self._same_instr(self.wr, lin, lanes, warp, "write-after-write")

    def issue_async(self, lin: np.ndarray, lanes: np.ndarray, rows: np.ndarray) -> None:
        """A ``cp.async`` to units ``lin`` is issued: checked as a write, then in flight."""
        cur, warp = self.epoch[rows], self.tid[lanes] >> 5
        self._check(lin, lanes, cur, warp, write=True)
        self.pend[lin] = np.broadcast_to(self._stamp(lanes, rows, self.pc)[:, None], lin.shape)
        self.pending += lin.size
        self._same_instr(self.pend, lin, lanes, warp, "write-before-async-wait")

    def land_async(self, lin: np.ndarray, lanes: np.ndarray, rows: np.ndarray,
                   pcs: np.ndarray) -> None:
        """A wait retired copies (issued at ``pcs``): their units count as written now."""
        self.pend[lin] = NONE
        self.pending -= lin.size
        self.wr[lin] = self._stamp(lanes, rows, pcs)[:, None]

    def _check(self, lin, lanes, cur, warp, write: bool) -> None:
        ws = self.wr[lin]
        bad = self._conflicts(ws, cur, warp)
        if bad.any():
            self._found("write-after-write" if write else "read-after-write", bad, ws, lin, lanes)
        if write:
            rs = self.rd[lin]
            bad = self._conflicts(rs, cur, warp, any_multi=True)
            if bad.any():
                self._found("write-after-read", bad, rs, lin, lanes)
        if self.pending:
            ps = self.pend[lin]
            bad = ps >= 0
            if bad.any():
                kind = "write-before-async-wait" if write else "read-before-async-wait"
                self._found(kind, bad, ps, lin, lanes)

    def _same_instr(self, stamps: np.ndarray, lin, lanes, warp, kind: str) -> None:
        """Lanes of different warps writing one byte in one instruction (lockstep mode)."""
        back = stamps[lin]
        clash = _warp(back) != warp[:, None]
        if clash.any():
            self._found(kind, clash, back, lin, lanes)

    def _found(self, kind: str, bad: np.ndarray, prev: np.ndarray, lin: np.ndarray,
               lanes: np.ndarray) -> None:
        """Report the racing entries ``bad`` [n, units] (the first, or one per earlier pc)."""
        ks, bs = np.nonzero(bad)
        if not self.log.wants_all():
            ks, bs = ks[:1], bs[:1]
        else:
            _, first = np.unique((prev[ks, bs] >> 12) & _PC, return_index=True)
            ks, bs = ks[first], bs[first]
        for k, b in zip(ks.tolist(), bs.tolist()):
            p = int(prev[k, b])
            where = int(lin[k, b]) * self.unit
            row, off = divmod(where, self.total)
            var, rel = self.describe(off)
            self.log.add(kind, self.first + row, off, var, rel, (int((p >> 12) & _PC), int(p & _TID)),
                         (self.pc, int(self.tid[lanes[k]])))


#: Opcodes that may access shared memory (atomics are not tracked).
_ACCESSES = {"ld", "ldu", "st", "ldmatrix"}


def shared_unit(instrs: list[Instr]) -> int:
    """The largest unit (1, 2 or 4 bytes) dividing every shared or generic access of ``instrs``."""
    unit = 4
    for ins in instrs:
        spaces = {m.split("::")[0] for m in ins.mods}
        if "shared" not in spaces and spaces & {"global", "local", "param", "const"}:
            continue
        if ins.op == "cp" and len(ins.operands) > 2 and isinstance(ins.operands[2], Imm):
            unit = min(unit, int(ins.operands[2].value))
        elif ins.op in _ACCESSES:
            sizes = [TYPES[m].size for m in ins.mods if m in TYPES and TYPES[m].kind != "pred"]
            unit = min([unit, *sizes]) if sizes else 1
    return unit
