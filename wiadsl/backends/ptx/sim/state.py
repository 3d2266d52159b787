"""The state of one wave of blocks: registers, special registers, memories, PCs.

A launch runs its grid in waves of whole blocks; a wave's threads are lanes
``0..n-1`` of every NumPy vector (block ``b`` of the wave owns lanes
``b*bsize .. (b+1)*bsize-1``, in ``%tid`` linear order, so warps are 32
consecutive lanes of a block).

Invariants: ``regs[name]`` is an array of length ``n`` holding raw bits of the
register's width (bool for predicates); special registers are read-only entries
of ``regs`` of type ``.u32`` (``%clock64`` ``.u64``); ``pc[i]`` is lane i's next
instruction while it runs, and ``DONE`` while it waits at a barrier or has exited
(``status`` tells which: RUN, WAIT, EXIT); a waiting lane waits at a ``bar.sync``
(``wait_mbar == -1``) or in ``mbarrier.try_wait`` on the mbarrier at shared offset
``wait_mbar`` of its block, until ``wake`` re-runs its ``try_wait``.  ``asyncq`` holds
the wave's in-flight ``cp.async`` copies, ``mbarriers`` the mbarrier objects
(``mbarrier.py``), ``wgmma`` the warpgroups' in-flight wgmma results (``wgmma.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .asyncq import AsyncCopies
from .memory import BankedMemory, GlobalMemory
from .ptxtypes import TYPES, PtxType, storage_dtype

RUN, WAIT, EXIT = 0, 1, 2
DONE = np.iinfo(np.int64).max

U32 = TYPES["u32"]
SPECIAL_TYPES: dict[str, PtxType] = {
    **{f"%{r}.{c}": U32 for r in ("tid", "ntid", "ctaid", "nctaid") for c in "xyz"},
    **{f"%{r}": U32 for r in ("laneid", "warpid", "nwarpid", "smid", "nsmid", "gridid", "clock",
                              "lanemask_eq", "lanemask_lt", "lanemask_le", "lanemask_gt",
                              "lanemask_ge", "dynamic_smem_size", "total_smem_size")},
    "%clock64": TYPES["u64"],
    "%globaltimer": TYPES["u64"],
}


@dataclass(frozen=True)
class Geometry:
    """Grid and block extents (x, y, z) of a launch."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]

    @property
    def bsize(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    @property
    def nblocks(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]

    def block_coords(self, b: int) -> tuple[int, int, int]:
        gx, gy, _ = self.grid
        return b % gx, (b // gx) % gy, b // (gx * gy)

    def thread_coords(self, t: int) -> tuple[int, int, int]:
        bx, by, _ = self.block
        return t % bx, (t // bx) % by, t // (bx * by)


@dataclass
class Wave:
    """Blocks ``first .. first+nblocks-1`` of a launch, simulated together."""

    geom: Geometry
    first: int
    nblocks: int
    reg_types: dict[str, PtxType]
    glob: GlobalMemory
    param: BankedMemory
    shared: BankedMemory | None = None
    local: BankedMemory | None = None
    regs: dict[str, np.ndarray] = field(default_factory=dict)
    steps: int = 0

    def __post_init__(self) -> None:
        bs = self.geom.bsize
        self.n = n = self.nblocks * bs
        lane = np.arange(n, dtype=np.int64)
        self.block_of_lane = lane // bs
        self.tlin = lane % bs
        self.lane_of_warp = self.tlin % 32
        self.warp_base = lane - self.lane_of_warp
        self.warp_end = np.minimum(self.warp_base + 32, (self.block_of_lane + 1) * bs)
        for name, t in self.reg_types.items():
            self.regs[name] = np.zeros(n, storage_dtype(t))
        self._specials(dynamic_smem=0, total_smem=0)
        self.pc = np.zeros(n, np.int64)
        self.status = np.full(n, RUN, np.int8)
        self.wait_bar = np.zeros(n, np.int64)
        self.wait_pc = np.zeros(n, np.int64)
        self.wait_cnt = np.full(n, -1, np.int64)
        self.wait_mbar = np.full(n, -1, np.int64)
        self.all_lanes = lane
        self.pc_now = 0  # the instruction being executed (cp.async records where it was issued)
        self.asyncq = AsyncCopies(n, self.shared) if self.shared is not None else None
        self.mbarriers: dict[tuple[int, int], Any] = {}  # (block row, offset) -> ``MBarrier``
        self.wgmma: Any = None  # ``wgmma.WgmmaState``, made by the first wgmma instruction

    def wake(self, row: int, offset: int) -> None:
        """Lanes of block ``row`` blocked in ``try_wait`` on the mbarrier at ``offset`` run
        their ``try_wait`` again (its phase completed)."""
        lanes = np.flatnonzero((self.wait_mbar == offset) & (self.block_of_lane == row)
                               & (self.status == WAIT))
        if len(lanes):
            self.status[lanes] = RUN
            self.pc[lanes] = self.wait_pc[lanes]
            self.wait_mbar[lanes] = -1

    def _specials(self, dynamic_smem: int, total_smem: int) -> None:
        g = self.geom
        bx, by, _ = g.block
        gx, gy, _ = g.grid
        blk = self.block_of_lane + self.first
        t = self.tlin
        vals = {
            "%tid.x": t % bx, "%tid.y": (t // bx) % by, "%tid.z": t // (bx * by),
            "%ctaid.x": blk % gx, "%ctaid.y": (blk // gx) % gy, "%ctaid.z": blk // (gx * gy),
            "%laneid": self.lane_of_warp, "%warpid": t // 32,
            "%lanemask_eq": 1 << self.lane_of_warp,
            "%lanemask_lt": (1 << self.lane_of_warp) - 1,
            "%lanemask_le": (2 << self.lane_of_warp) - 1,
            "%lanemask_gt": 0xFFFFFFFF ^ ((2 << self.lane_of_warp) - 1),
            "%lanemask_ge": 0xFFFFFFFF ^ ((1 << self.lane_of_warp) - 1),
        }
        consts = {
            "%ntid.x": g.block[0], "%ntid.y": g.block[1], "%ntid.z": g.block[2],
            "%nctaid.x": g.grid[0], "%nctaid.y": g.grid[1], "%nctaid.z": g.grid[2],
            "%nwarpid": (g.bsize + 31) // 32, "%smid": 0, "%nsmid": 1, "%gridid": 0,
            "%clock": 0, "%clock64": 0, "%globaltimer": 0,
            "%dynamic_smem_size": dynamic_smem, "%total_smem_size": total_smem,
        }
        for name, ptype in SPECIAL_TYPES.items():
            v = vals[name] if name in vals else np.full(self.n, consts[name])
            self.regs[name] = np.asarray(v).astype(np.int64).astype(storage_dtype(ptype))

    def set_smem_sizes(self, dynamic_smem: int, total_smem: int) -> None:
        self._specials(dynamic_smem, total_smem)

    def describe_lane(self, lane: int) -> str:
        """``block (x,y,z) thread (x,y,z)`` of a wave lane, for error messages."""
        b = self.first + lane // self.geom.bsize
        return (f"block {self.geom.block_coords(b)} thread "
                f"{self.geom.thread_coords(lane % self.geom.bsize)}")
