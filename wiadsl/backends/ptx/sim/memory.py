"""Simulated state spaces with bounds, alignment and (optionally) initialization checks.

Address map (all addresses are unsigned 64-bit):

* global: buffer ``i`` (kernel arguments, then module ``.global``/``.const``
  variables) starts at ``GLOBAL_BASE + i * GLOBAL_STRIDE``; generic == global.
* shared: per-block; shared-space offsets start at 0, variables separated by
  guard gaps; generic shared address = ``SHARED_WINDOW + offset``.
* local: per-thread, the same scheme with ``LOCAL_WINDOW``.
* param: kernel parameters, read-only, one copy shared by all threads; generic
  param address (``cvta.param``) = ``PARAM_WINDOW + offset``.

Invariant: every access goes through ``resolve``, which maps each lane's address
to (region, offset) and raises ``MemoryFault`` — naming the lane and address —
if the access is not wholly inside one region, is not aligned to its size, writes
a read-only region, or (shared, when enabled) reads bytes never written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .errors import MemoryFault
from .ptxtypes import UINT, PtxType

if TYPE_CHECKING:
    from .tracker import RaceTracker

GLOBAL_BASE = 1 << 40
GLOBAL_STRIDE = 1 << 34
PARAM_WINDOW = 1 << 45
LOCAL_WINDOW = 1 << 46
SHARED_WINDOW = 1 << 47
WINDOW_SIZE = 1 << 32
_GUARD = 64
_ONES = {8: np.uint8(1), 16: np.uint16(0x0101), 32: np.uint32(0x01010101),
         64: np.uint64(0x0101010101010101)}


@dataclass
class Region:
    """One buffer: ``size`` bytes of ``data`` (padded to 16), named for diagnostics."""

    name: str
    size: int
    data: np.ndarray
    writable: bool = True
    written: bool = False


def padded(nbytes: int) -> int:
    return (nbytes + 31) // 16 * 16


class GlobalMemory:
    """Device buffers, one ``Region`` each, at ``GLOBAL_BASE + i * GLOBAL_STRIDE``."""

    space = "global"

    def __init__(self) -> None:
        self.regions: list[Region] = []

    def add(self, name: str, data: bytes | np.ndarray, writable: bool = True) -> int:
        """Add a buffer initialised from ``data``; return its base address."""
        raw = np.frombuffer(bytes(data), np.uint8) if isinstance(data, bytes) else data
        buf = np.zeros(padded(raw.size), np.uint8)
        buf[: raw.size] = raw
        self.regions.append(Region(name, int(raw.size), buf, writable))
        return GLOBAL_BASE + (len(self.regions) - 1) * GLOBAL_STRIDE

    def chunks(self, addr: np.ndarray, lanes: np.ndarray, t: PtxType, count: int, write: bool,
               track: bool = True):
        """Yield ``(sel, view, index)``: lanes ``sel`` access ``view[index]`` (shape [n, count]).

        ``track`` is for shared memory's race tracker; global memory is not tracked."""
        nbytes = t.size * count
        a = addr.astype(np.uint64)
        bad_low = a < GLOBAL_BASE
        rel = np.where(bad_low, 0, a - np.uint64(GLOBAL_BASE))
        ri = (rel >> np.uint64(34)).astype(np.int64)
        off = (rel & np.uint64(GLOBAL_STRIDE - 1)).astype(np.int64)
        sizes = np.array([r.size for r in self.regions] + [0], np.int64)
        ri = np.where(bad_low | (ri >= len(self.regions)), len(self.regions), ri)
        ok = (ri < len(self.regions)) & (off + nbytes <= sizes[ri])
        _check(ok, a, lanes, lambda k: self._describe(int(ri[k]), int(off[k]), nbytes, write))
        _check_align(a, nbytes, lanes, "global")
        regions = np.unique(ri)
        for r in regions:
            reg = self.regions[int(r)]
            if write and not reg.writable:
                k = int(np.flatnonzero(ri == r)[0])
                raise MemoryFault(f"store to read-only buffer '{reg.name}'", int(lanes[k]), int(a[k]))
            reg.written |= write
            sel = np.flatnonzero(ri == r) if len(regions) > 1 else slice(None)
            view = reg.data.view(t.np) if t.kind != "bf" else reg.data.view(np.uint16)
            idx = (off[sel] // t.size)[:, None] + np.arange(count)
            yield sel, view, (idx,)

    def _describe(self, ri: int, off: int, nbytes: int, write: bool) -> str:
        what = f"out-of-bounds global {'store' if write else 'load'} of {nbytes} bytes"
        if ri >= len(self.regions):
            return f"{what}: address is not inside any buffer"
        reg = self.regions[ri]
        return f"{what}: offset {off} of buffer '{reg.name}' (size {reg.size} bytes)"


class BankedMemory:
    """Shared (one row per block) or local (one row per thread) memory with named variables."""

    def __init__(self, space: str, layout: dict[str, tuple[int, int]], total: int, rows: int,
                 row_of_lane: np.ndarray, track_init: bool):
        self.space = space
        self.layout = layout
        self.total = padded(total)
        self.data = np.zeros((rows, self.total), np.uint8)
        self.row_of_lane = row_of_lane
        spans = sorted(layout.values())
        self.starts = np.array([s for s, _ in spans] + [1 << 62], np.int64)
        self.ends = np.array([s + n for s, n in spans] + [1 << 62], np.int64)
        self.names = {s: nm for nm, (s, _) in layout.items()}
        self.init = np.zeros_like(self.data, np.uint8) if track_init else None
        self.tracker: RaceTracker | None = None  # set by the launch when races are checked

    def locate(self, addr: np.ndarray, lanes: np.ndarray, nbytes: int, write: bool):
        """(rows, byte offsets) of an access of ``nbytes`` per lane, bounds- and alignment-checked."""
        off = addr.astype(np.uint64).astype(np.int64)
        ri = np.searchsorted(self.starts, off, side="right") - 1
        ok = (ri >= 0) & (off + nbytes <= self.ends[np.maximum(ri, 0)]) & (off >= 0)
        _check(ok, addr, lanes, lambda k: self._describe(int(off[k]), int(ri[k]), nbytes, write))
        _check_align(off, nbytes, lanes, self.space)
        return self.row_of_lane[lanes], off

    def locate_span(self, off: int, lane: int, nbytes: int, write: bool) -> None:
        """Check that bytes ``off .. off+nbytes-1`` lie in one variable (no alignment rule)."""
        ri = int(np.searchsorted(self.starts, off, side="right") - 1)
        if ri < 0 or off + nbytes > self.ends[ri]:
            raise MemoryFault(self._describe(off, ri, nbytes, write), lane, off)

    def chunks(self, addr: np.ndarray, lanes: np.ndarray, t: PtxType, count: int, write: bool,
               track: bool = True):
        nbytes = t.size * count
        rows, off = self.locate(addr, lanes, nbytes, write)
        if self.tracker is not None and track:
            lin = self.tracker.units(rows, off, nbytes)
            (self.tracker.write if write else self.tracker.read)(lin, lanes, rows)
        idx = (off // t.size)[:, None] + np.arange(count) if count > 1 else (off // t.size)[:, None]
        if self.init is not None:
            # init flags are bytes of 1: an element is initialised iff its flag word is 0x0101..
            flags = self.init.view(UINT[t.bits])
            if write:
                flags[rows[:, None], idx] = _ONES[t.bits]
            else:
                done = (flags[rows[:, None], idx] == _ONES[t.bits]).all(axis=1)
                if not done.all():
                    k = int(np.flatnonzero(~done)[0])
                    raise MemoryFault(f"read of uninitialized {self.space} memory "
                                      f"(variable '{self.variable_at(int(off[k]))[0]}')", int(lanes[k]),
                                      int(off[k]))
        view = self.data.view(t.np) if t.kind != "bf" else self.data.view(np.uint16)
        yield slice(None), view, (rows[:, None], idx)

    def variable_at(self, off: int) -> tuple[str, int]:
        """(variable name, offset in it) of a byte offset, ``('?', off)`` outside variables."""
        ri = int(np.searchsorted(self.starts, off, side="right") - 1)
        if ri < 0:
            return "?", off
        start = int(self.starts[ri])
        return self.names.get(start, "?"), off - start

    def _var(self, ri: int) -> str:
        return f"variable '{self.names.get(int(self.starts[ri]), '?')}'" if ri >= 0 else "no variable"

    def _describe(self, off: int, ri: int, nbytes: int, write: bool) -> str:
        what = f"out-of-bounds {self.space} {'store' if write else 'load'} of {nbytes} bytes"
        if ri < 0 or ri >= len(self.starts) - 1:
            return f"{what}: offset {off} is not inside any {self.space} variable"
        if off >= self.ends[ri]:
            start, end = int(self.starts[ri]), int(self.ends[ri])
            return (f"{what}: offset {off} is {off - end} bytes past the end of "
                    f"{self._var(ri)} (size {end - start} bytes)")
        start, end = int(self.starts[ri]), int(self.ends[ri])
        return f"{what}: offset {off - start} of {self._var(ri)} (size {end - start} bytes)"


def layout_vars(decls: list[tuple[str, int | None, int]], dynamic: int) -> tuple[dict, int]:
    """Place (name, size or None for extern, align) with guard gaps; extern ones share one spot."""
    layout: dict[str, tuple[int, int]] = {}
    pos = 0
    externs = []
    for name, size, align in decls:
        if size is None:
            externs.append((name, align))
            continue
        pos = (pos + max(align, 16) - 1) // max(align, 16) * max(align, 16)
        layout[name] = (pos, size)
        pos += size + _GUARD
    if externs:
        al = max(16, *(a for _, a in externs))
        pos = (pos + al - 1) // al * al
        for name, _ in externs:
            layout[name] = (pos, dynamic)
        pos += dynamic + _GUARD
    return layout, pos


def _check(ok: np.ndarray, addr: np.ndarray, lanes: np.ndarray, describe) -> None:
    if not ok.all():
        k = int(np.flatnonzero(~ok)[0])
        raise MemoryFault(describe(k), int(lanes[k]), int(np.asarray(addr)[k]))


def _check_align(addr: np.ndarray, nbytes: int, lanes: np.ndarray, space: str) -> None:
    mis = (addr.astype(np.int64) % nbytes) != 0 if nbytes > 1 else None
    if mis is not None and mis.any():
        k = int(np.flatnonzero(mis)[0])
        raise MemoryFault(f"misaligned {space} access of {nbytes} bytes (address must be a "
                          f"multiple of {nbytes})", int(lanes[k]), int(np.asarray(addr)[k]))
