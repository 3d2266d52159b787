"""Warp schedules: in which order the warps of a block run between barriers.

* ``lockstep``: every thread of the wave advances together (min-PC); fastest,
  and the race tracker still sees every unsynchronised pair.
* ``forward`` / ``reverse`` / ``rotate``: warp-interleaved.  The wave's lanes are
  split into warp slots (warp ``k`` of every block, simulated together, since
  blocks never share memory); one slot runs, 32 lanes in lockstep as on hardware,
  until all of its threads wait at a barrier (or an mbarrier) or exit, then the
  next slot runs.  A kernel with warpgroup instructions (``wgmma``, ``setmaxnreg``) is
  split into warpgroup slots of 128 threads instead.
  ``forward`` visits slots 0, 1, ... each cycle, ``reverse`` the other way,
  ``rotate`` starts cycle ``c`` at slot ``c mod n``.  A missing barrier then
  lets one warp see another's shared memory too early or too late, so values
  change, as they would on a GPU.

Invariant: a schedule is deterministic (the same launch gives the same result)
and never changes the results of a race-free kernel.
"""

from __future__ import annotations

import numpy as np

SCHEDULES = ("lockstep", "forward", "reverse", "rotate")


def warp_slots(tlin: np.ndarray, bsize: int, width: int = 32) -> list[np.ndarray]:
    """Lanes of each slot: threads ``k*width .. (k+1)*width - 1`` of every block of the wave
    (``tlin``: thread index); ``width`` is 32 (warps), or 128 (warpgroups) for a kernel with
    warpgroup-collective instructions (``wgmma``), whose warpgroup must run together."""
    nslots = (bsize + width - 1) // width
    slot = tlin // width
    return [np.flatnonzero(slot == k) for k in range(nslots)]


def slot_order(schedule: str, cycle: int, nslots: int) -> list[int]:
    """The slots to visit in ``cycle`` (0, 1, ...) of a warp-interleaved schedule."""
    if schedule == "forward":
        return list(range(nslots))
    if schedule == "reverse":
        return list(range(nslots - 1, -1, -1))
    if schedule == "rotate":
        return [(cycle + i) % nslots for i in range(nslots)]
    raise ValueError(f"not an interleaved schedule: {schedule!r}")
