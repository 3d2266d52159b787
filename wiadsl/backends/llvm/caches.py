"""The host's L1 data cache, for the code choices that depend on its geometry.

Read from Linux's description of CPU 0's caches (``/sys/devices/system/cpu/cpu0/
cache/index*``: level, type, ways of associativity). Where that is missing or
unreadable (another OS, a container without sysfs) the answer is ``DEFAULT_WAYS``,
the L1 of most hosts we meet (AMD Zen 2 to Zen 4, Intel up to Skylake: 32 KiB,
8 ways). A helper whose code depends on it names it in its cache identity
(library.py), so a host with another L1 never loads that code.
"""

from __future__ import annotations

import os
from functools import cache

SYSFS = "/sys/devices/system/cpu/cpu0/cache"
DEFAULT_WAYS = 8


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


def _read(folder: str, name: str) -> str:
    with open(os.path.join(folder, name)) as f:
        return f.read().strip()


__all__ = ["DEFAULT_WAYS", "l1_data_ways"]
