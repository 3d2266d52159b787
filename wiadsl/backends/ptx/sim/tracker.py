"""Per-unit access stamps of shared memory and per-warp vector clocks: finds races as they happen.

Happens-before is tracked with vector clocks, one per warp of every block:
``vc[row, warp, comp]`` is the latest clock of component ``comp`` that the warp has
synchronised with.  Components are the warps of the block and the *async agents*:

* one per warpgroup: its wgmma unit, whose shared-memory reads (issued by
  ``wgmma.mma_async``) complete when ``wgmma.wait_group`` retires their group;
  the agent's clock for group ``k`` is ``k + 1``;
* one per mbarrier that a TMA (``cp.async.bulk.tensor``) completes on: the copy
  engine, whose shared-memory writes become visible when the barrier's phase
  ``p`` completes; the agent's clock for that phase is ``p + 1``.

Synchronisation (see ``ops_mbarrier``, ``ops_wgmma``, ``exec``):

* a completed barrier (``bar.sync``): the participating warps join (element-wise
  max) and then each advances its own clock;
* ``mbarrier.arrive`` releases: the barrier's current phase accumulates the warp's
  vector, the warp advances its clock; a TMA's ``complete_tx`` adds its issuer's
  vector and its agent's clock; a waiter that observes the phase complete acquires
  the phase's vector;
* ``wgmma.wait_group`` retiring group ``k`` acquires agent clock ``k + 1``;
* ``fence.proxy.async`` marks the warp's generic-proxy writes so far visible to the
  async proxy (TMA, wgmma), then advances its clock.

A stamp (int64, -1 = none) packs ``clock << 38 | pc << 18 | comp << 11 | tid``: the
component's clock at the access, the instruction index, the component and the
thread index in the block.  An access ``(comp u, clock c)`` happens before an
access by warp ``w`` iff ``u == w`` or ``vc[w][u] >= c``.

Every shared *unit* (the smallest shared access size of the kernel, ``shared_unit``:
accesses are aligned to their size, so per-unit stamps are exact) keeps its last
write ``wr``, the last read of every component ``rd[unit, comp]`` (so concurrent
readers are all remembered) and any in-flight ``cp.async`` ``pend``.  A race is:

* a read not ordered after the last write (``read-after-write``);
* a write not ordered after the last write or after some component's last read;
* any access to a byte an issued ``cp.async`` has not delivered (no wait of the
  issuing thread retired it), even by the issuing thread;
* an async-proxy access (TMA write, wgmma read) of a byte whose generic-proxy write
  was not followed by a ``fence.proxy.async`` of the writing warp.

With only whole-block barriers this is exactly the barrier-epoch rule (two
accesses race when no barrier completed between them).  Lanes of one warp run in
lockstep here, as on hardware between divergence points, so they never race with
each other (Volta's independent thread scheduling, which would need
``__syncwarp``, is not modelled).  Atomics and mbarrier objects are not tracked.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .ast import Imm, Instr
from .errors import PtxSimError
from .ptxtypes import TYPES
from .races import RaceLog

_TID = np.int64(0x7FF)
_COMP_SHIFT, _COMP = 11, np.int64(0x7F)
_PC_SHIFT, _PC = 18, np.int64(0xFFFFF)
_CLOCK_SHIFT = 38
NONE = -1
#: mbarriers per block a TMA may complete on (each gets an agent component)
MAX_MBARRIER_AGENTS = 32
#: components per block (the stamp's comp field has 7 bits)
MAX_COMPONENTS = 128


def _comp(stamp: np.ndarray) -> np.ndarray:
    return (stamp >> _COMP_SHIFT) & _COMP


def _clock(stamp: np.ndarray) -> np.ndarray:
    return stamp >> _CLOCK_SHIFT


class RaceTracker:
    """Stamps for ``rows`` blocks x ``total`` bytes of shared memory (see module docstring)."""

    def __init__(self, rows: int, total: int, tid_of_lane: np.ndarray, first_block: int,
                 log: RaceLog, describe: Callable[[int], tuple[str, int]], unit: int = 1,
                 bsize: int = 1, warpgroup_agents: bool = False, mbarrier_agents: bool = False):
        self.unit = unit
        self.total = total
        self.warps = nw = max(1, (bsize + 31) // 32)
        self.wg_base = nw
        self.mb_base = nw + ((nw + 3) // 4 if warpgroup_agents else 0)
        ncomp = self.mb_base + (MAX_MBARRIER_AGENTS if mbarrier_agents else 0)
        assert ncomp <= MAX_COMPONENTS
        self.ncomp = ncomp
        self.mb_slots: dict[int, int] = {}
        size = rows * total // unit
        self.wr = np.full(size, NONE, np.int64)
        self.rd = np.full((size, ncomp), NONE, np.int64)
        self.pend = np.full(size, NONE, np.int64)
        self.pending = 0  # bytes in flight: when 0 the ``pend`` gathers are skipped
        self.vc = np.zeros((rows, nw, ncomp), np.int64)
        self.vc[:, np.arange(nw), np.arange(nw)] = 1
        self.fenced = np.zeros((rows, nw), np.int64)  # generic writes visible to the async proxy
        self.tid = tid_of_lane.astype(np.int64)
        self.first = first_block
        self.log = log
        self.describe = describe  # shared offset -> (variable name, offset in it)
        self.pc = 0

    # ------------------------------------------------------------ clocks
    def units(self, rows: np.ndarray, off: np.ndarray, nbytes: int) -> np.ndarray:
        """Linear unit indices [n, nbytes // unit] of an access of ``nbytes`` at ``off`` per lane."""
        first = (rows * self.total + off) // self.unit
        n = max(1, nbytes // self.unit)
        return first[:, None] if n == 1 else first[:, None] + np.arange(n)

    def warp_of(self, lanes: np.ndarray) -> np.ndarray:
        return self.tid[lanes] >> 5

    def barrier(self, rows: np.ndarray | None, warps: np.ndarray | None = None) -> None:
        """Warps ``warps`` (all when None) of blocks ``rows`` (all when None) completed a barrier."""
        ws = np.arange(self.warps) if warps is None else np.asarray(warps, np.int64)
        rs = np.arange(len(self.vc)) if rows is None else np.asarray(rows, np.int64)
        sub = self.vc[rs[:, None], ws]                     # [rows, warps, comp]
        sub[:] = sub.max(axis=1, keepdims=True)
        sub[:, np.arange(len(ws)), ws] += 1
        self.vc[rs[:, None], ws] = sub

    def release(self, row: int, warp: int) -> np.ndarray:
        """The warp's clock vector (a release: the caller stores it), then its clock advances."""
        v = self.vc[row, warp].copy()
        self.vc[row, warp, warp] += 1
        return v

    def acquire(self, row: int, warp: int, vec: np.ndarray) -> None:
        np.maximum(self.vc[row, warp], vec, out=self.vc[row, warp])

    def acquire_agent(self, row: int, warp: int, comp: int, clock: int) -> None:
        """The warp observed agent ``comp`` complete up to ``clock`` (a retiring wait)."""
        if self.vc[row, warp, comp] < clock:
            self.vc[row, warp, comp] = clock

    def wgmma_agent(self, warpgroup: int) -> int:
        return self.wg_base + warpgroup

    def mbarrier_agent(self, offset: int) -> int:
        """The agent component of the TMA copies completing on the mbarrier at ``offset``."""
        slot = self.mb_slots.get(offset)
        if slot is None:
            slot = len(self.mb_slots)
            if self.mb_base + slot >= self.ncomp:
                raise PtxSimError(f"more than {self.ncomp - self.mb_base} mbarriers receive TMA "
                                  f"copies in one block (the race tracker's limit)")
            self.mb_slots[offset] = slot
        return self.mb_base + slot

    def fence_proxy(self, row: int, warp: int) -> None:
        """``fence.proxy.async`` by ``warp``: its generic writes so far reach the async proxy."""
        self.fenced[row, warp] = self.vc[row, warp, warp]
        self.vc[row, warp, warp] += 1

    def _stamp(self, lanes: np.ndarray, rows: np.ndarray, comp, clock, pc) -> np.ndarray:
        return ((np.asarray(clock, np.int64) << _CLOCK_SHIFT)
                | (np.asarray(pc, np.int64) << _PC_SHIFT)
                | (np.asarray(comp, np.int64) << _COMP_SHIFT) | self.tid[lanes])

    def own_stamps(self, lanes: np.ndarray, rows: np.ndarray, pc) -> np.ndarray:
        """Stamps of plain accesses by ``lanes`` (their warp, its current clock)."""
        w = self.warp_of(lanes)
        return self._stamp(lanes, rows, w, self.vc[rows, w, w], pc)

    def unordered(self, prev: np.ndarray, rows: np.ndarray, warp: np.ndarray) -> np.ndarray:
        """Which earlier stamps ``prev`` [n, k] do not happen before warps ``warp`` [n] (rows [n])."""
        comp = _comp(prev)
        other = (prev >= 0) & (comp != warp[:, None])
        if not other.any():  # the common case: nothing, or the warp's own accesses
            return other
        base = (rows * self.warps + warp) * self.ncomp
        seen = self.vc.reshape(-1).take(base[:, None] + np.minimum(comp, self.ncomp - 1))
        return other & (seen < _clock(prev))

    # ------------------------------------------------------------ plain accesses
    def read(self, lin: np.ndarray, lanes: np.ndarray, rows: np.ndarray) -> None:
        """Check and record a read of units ``lin`` [n, units] (linear, see ``units``) by ``lanes``."""
        warp = self.warp_of(lanes)
        self._check(lin, lanes, rows, warp, write=False)
        self.rd[lin, warp[:, None]] = self.own_stamps(lanes, rows, self.pc)[:, None]

    def write(self, lin: np.ndarray, lanes: np.ndarray, rows: np.ndarray) -> None:
        """Check and record a plain store of units ``lin`` by ``lanes``."""
        warp = self.warp_of(lanes)
        self._check(lin, lanes, rows, warp, write=True)
        self.wr[lin] = np.broadcast_to(self.own_stamps(lanes, rows, self.pc)[:, None], lin.shape)
        self.rd[lin] = NONE
        self._same_instr(self.wr, lin, lanes, warp, "write-after-write")

    def issue_async(self, lin: np.ndarray, lanes: np.ndarray, rows: np.ndarray) -> None:
        """A ``cp.async`` to units ``lin`` is issued: checked as a write, then in flight."""
        warp = self.warp_of(lanes)
        self._check(lin, lanes, rows, warp, write=True)
        self.pend[lin] = np.broadcast_to(self.own_stamps(lanes, rows, self.pc)[:, None], lin.shape)
        self.pending += lin.size
        self._same_instr(self.pend, lin, lanes, warp, "write-before-async-wait")

    def land_async(self, lin: np.ndarray, lanes: np.ndarray, rows: np.ndarray,
                   pcs: np.ndarray) -> None:
        """A wait retired copies (issued at ``pcs``): their units count as written now."""
        self.pend[lin] = NONE
        self.pending -= lin.size
        self.wr[lin] = self.own_stamps(lanes, rows, pcs)[:, None]
        self.rd[lin] = NONE

    # ------------------------------------------------------------ async proxy (TMA, wgmma)
    def async_write(self, lin: np.ndarray, lane: int, row: int, comp: int, clock: int) -> None:
        """A TMA issued by ``lane`` writes units ``lin`` [1, k] as agent ``comp`` at ``clock``:
        checked against earlier accesses with the issuer's clocks (the copy starts after its
        issue), then stamped as the agent's write."""
        lanes, rows = np.asarray([lane]), np.asarray([row])
        warp = self.warp_of(lanes)
        self._check(lin, lanes, rows, warp, write=True, proxy=True)
        self.wr[lin] = self._stamp(lanes, rows, comp, clock, self.pc)
        self.rd[lin] = NONE

    def async_read(self, lin: np.ndarray, lanes: np.ndarray, rows: np.ndarray, comp: int,
                   clock: int) -> None:
        """A wgmma of warps ``lanes`` (one lane per warp) reads units ``lin`` [n, k] as agent
        ``comp`` at ``clock`` (its wgmma group + 1)."""
        warp = self.warp_of(lanes)
        self._check(lin, lanes, rows, warp, write=False, proxy=True)
        self.rd[lin, comp] = self._stamp(lanes, rows, comp, clock, self.pc)[:, None]

    # ------------------------------------------------------------ checks
    def _check(self, lin, lanes, rows, warp, write: bool, proxy: bool = False) -> None:
        ws = self.wr[lin]
        bad = self.unordered(ws, rows, warp)
        if bad.any():
            self._found("write-after-write" if write else "read-after-write", bad, ws, lin, lanes)
        if proxy:
            comp = _comp(ws)
            generic = (ws >= 0) & (comp < self.warps)
            fenced = self.fenced[rows[:, None], np.minimum(comp, self.warps - 1)]
            bad = generic & (_clock(ws) > fenced)
            if bad.any():
                self._found("async-after-generic-write", bad, ws, lin, lanes)
        if write:
            rs = self.rd[lin]  # [n, k, comp]: column c holds component c's last read
            seen = self.vc[rows, warp][:, None, :]
            bad = (rs >= 0) & (_clock(rs) > seen)
            bad[np.arange(len(lin)), :, warp] = False  # the writer's own warp
            if bad.any():
                k, u, c = np.nonzero(bad)
                flat = np.zeros(lin.shape, bool)
                flat[k, u] = True
                prev = np.full(lin.shape, NONE, np.int64)
                prev[k, u] = rs[k, u, c]
                self._found("write-after-read", flat, prev, lin, lanes)
        if self.pending:
            ps = self.pend[lin]
            bad = ps >= 0
            if bad.any():
                kind = "write-before-async-wait" if write else "read-before-async-wait"
                self._found(kind, bad, ps, lin, lanes)

    def _same_instr(self, stamps: np.ndarray, lin, lanes, warp, kind: str) -> None:
        """Lanes of different warps writing one unit in one instruction (lockstep mode)."""
        back = stamps[lin]
        clash = _comp(back) != warp[:, None]
        if clash.any():
            self._found(kind, clash, back, lin, lanes)

    def _found(self, kind: str, bad: np.ndarray, prev: np.ndarray, lin: np.ndarray,
               lanes: np.ndarray) -> None:
        """Report the racing entries ``bad`` [n, units] (the first, or one per earlier pc)."""
        ks, bs = np.nonzero(bad)
        if not self.log.wants_all():
            ks, bs = ks[:1], bs[:1]
        else:
            _, first = np.unique((prev[ks, bs] >> _PC_SHIFT) & _PC, return_index=True)
            ks, bs = ks[first], bs[first]
        for k, b in zip(ks.tolist(), bs.tolist()):
            p = int(prev[k, b])
            where = int(lin[k, b]) * self.unit
            row, off = divmod(where, self.total)
            var, rel = self.describe(off)
            self.log.add(kind, self.first + row, off, var, rel,
                         (int((p >> _PC_SHIFT) & _PC), int(p & _TID)),
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
        if ins.op == "cp" and ins.mods[:1] == ("async",) and "bulk" not in ins.mods \
                and len(ins.operands) > 2 and isinstance(ins.operands[2], Imm):
            unit = min(unit, int(ins.operands[2].value))
        elif ins.op in _ACCESSES:
            sizes = [TYPES[m].size for m in ins.mods if m in TYPES and TYPES[m].kind != "pred"]
            unit = min([unit, *sizes]) if sizes else 1
    return unit
