"""The host's caches, for the code choices that depend on them: the L1 data cache's
geometry, and the last-level cache's size.

The one such choice: a micro-kernel that reads a panel's rows in place (gemm.py's
few rows of A, conv.py's 1x1 convolutions) finds them all in one L1 set when they
lie a multiple of ``SET_BYTES`` apart. ``set_rows`` says how many such rows may
still be read in place; a panel with more is copied (packed) first. (No llvmlite
here: a warm start reads the ways for the helpers' cache identity.)

Read from Linux's description of CPU 0's caches (``/sys/devices/system/cpu/cpu0/
cache/index*``: level, type, ways of associativity). Where that is missing or
unreadable (another OS, a container without sysfs) the answer is ``DEFAULT_WAYS``,
the L1 of most hosts we meet (AMD Zen 2 to Zen 4, Intel up to Skylake: 32 KiB,
8 ways). A helper whose code depends on it names it in its cache identity
(library.py), so a host with another L1 never loads that code.

The last level's size decides which loops stream their stores past the caches
(loops/stream_stores.py: those that write a buffer larger than it); ``DEFAULT_LAST_LEVEL``
where the OS does not say.
"""

from __future__ import annotations

import os
from functools import cache

SYSFS = "/sys/devices/system/cpu/cpu0/cache"
DEFAULT_WAYS = 8
DEFAULT_LAST_LEVEL = 32 << 20
#: rows a multiple of this many bytes apart fall in one L1 set (the L1s we meet have 64
#: sets of 64-byte lines)
SET_BYTES = 4096
#: panel rows in one L1 set read in place, per way of the L1: 16 rows over a 12-way L1
#: (AMD Zen 5) read faster in place than packed, over an 8-way one (Zen 3) 20-28 %
#: slower (conv.py's 16 -> 64 channels at 32x32)
ROWS_PER_WAY = 4 / 3


@cache
def l1_data_ways() -> int:
    """Ways of associativity of the host's L1 data cache (``DEFAULT_WAYS`` when the OS
    does not say)."""
    try:
        entries = sorted(os.listdir(SYSFS))
    except OSError:
        return DEFAULT_WAYS
    for entry in entries:
        folder = os.path.join(SYSFS, entry)
        try:
            if _read(folder, "level") == "1" and _read(folder, "type") in ("Data", "Unified"):
                ways = int(_read(folder, "ways_of_associativity"))
                return ways if ways > 0 else DEFAULT_WAYS
        except (OSError, ValueError):
            continue
    return DEFAULT_WAYS


def in_place_tiles() -> int:
    """Row tiles (micro-kernel calls per panel) up to which a panel whose rows crowd one
    L1 set (more of them than ``set_rows``) is still read in place rather than copied
    first: gemm.py's few rows of A, conv.py's 1x1 convolutions (``panel_reads``). In
    place, each tile reads the panel from L2; copied, one pass does, then every tile
    reads L1. On a 12-way L1 (AMD Zen 5: 48 KiB, beside an L2 that delivers a line a
    cycle) up to 4; measured at one thread, copied -> in place: gemm 16x512x2048 269-271
    -> 143-173 us, 12x512x2048 243-245 -> 179-181, 23x512x2048 311-324 -> 200-253,
    16x1024x4096 1132-1136 -> 758-930, 7x512x2048 134 -> 119-133; 1x1 convolutions at
    32x32, batch 4: 64 -> 16 channels (2 tiles of 8 rows) 73-74 -> 47-55, 128 -> 32 (4
    tiles) 176-216 -> 166-169, 64 -> 32 91-96 -> 87-90; but 64 -> 64 (8 tiles) 157 ->
    194-211 and 128 -> 96 436-443 -> 446-499. On an 8-way one (Zen 3) one tile: gemm
    8x512x2048 took 449 us copied, 662 in place, the convolution 64 -> 16 at 32x32
    170-213 copied, 264-288 in place (gemm.py's ``DIRECT_ROW_TILES``)."""
    return 4 if l1_data_ways() >= 12 else 1


def l1_data_bytes() -> int:
    """The host's L1 data cache in bytes (``SET_BYTES`` per way: 32 KiB with 8 ways)."""
    return SET_BYTES * l1_data_ways()


def set_rows() -> int:
    """Panel rows that share one L1 set and are still read in place on this host (10
    with an 8-way L1, 16 with a 12-way one)."""
    return int(l1_data_ways() * ROWS_PER_WAY)


@cache
def last_level_bytes() -> int:
    """The size of the host's largest cache level in bytes (as sysfs gives it for CPU 0:
    on a chip whose L3 is split among core complexes, the part this core shares)."""
    found: dict[int, int] = {}
    try:
        entries = os.listdir(SYSFS)
    except OSError:
        return DEFAULT_LAST_LEVEL
    for entry in entries:
        folder = os.path.join(SYSFS, entry)
        try:
            if _read(folder, "type") in ("Data", "Unified"):
                found[int(_read(folder, "level"))] = parse_cache_size(_read(folder, "size"))
        except (OSError, ValueError):
            continue
    return found[max(found)] if found else DEFAULT_LAST_LEVEL


def parse_cache_size(text: str) -> int:
    """Bytes of a sysfs cache size (``32768K``, ``1M``, ``512``); ValueError otherwise."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    scale = units.get(text[-1:].upper(), 1)
    return int(text[:-1] if scale > 1 else text) * scale


def _read(folder: str, name: str) -> str:
    with open(os.path.join(folder, name)) as f:
        return f.read().strip()


__all__ = ["DEFAULT_LAST_LEVEL", "DEFAULT_WAYS", "ROWS_PER_WAY", "SET_BYTES", "l1_data_ways",
           "last_level_bytes", "parse_cache_size", "set_rows"]
