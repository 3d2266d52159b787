"""A size bound on the disk cache, with least-recently-used eviction (issue 21: one
machine's shared cache held over 4,000 entries, and nothing bounded it).

- The limit is ``$WIADSL_CACHE_MAX`` (bytes, or with a K/M/G suffix: ``512M``;
  ``0`` means no limit), else ``DEFAULT_LIMIT``.
- "Used" means written or hit: a disk hit sets the file's modification time to
  now (``touch``), as access times are often not kept (``noatime`` mounts).
- After each store of compiled code, ``enforce`` removes the least recently used
  files (objects and the source index) until the cache is at most ``LOW_WATER``
  of the limit, so a cache at its limit does not prune on every store. Autotuner
  records and machine probes (measurements, small) are never evicted.
- Eviction only ever costs a recompile: an index entry whose object is gone, or an
  object whose index entry is gone, is a miss like any other.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..diagnostics import WiaUsageError
from . import cache_store

DEFAULT_LIMIT = 512 << 20
LOW_WATER = 0.8
#: folders under the cache root that hold measurements, not compiled code
_KEPT = ("tune", "machine")
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text: str, what: str = "WIADSL_CACHE_MAX") -> int:
    """``'512M'`` -> bytes; a WiaUsageError naming ``what`` for anything else."""
    raw = text.strip().upper().removesuffix("B").removesuffix("I")
    number, unit = (raw[:-1], raw[-1]) if raw and raw[-1] in _UNITS else (raw, "")
    try:
        value = float(number)
    except ValueError:
        value = -1.0
    if value < 0 or value != value:
        raise WiaUsageError(f"{what}: expected a size like 512M, 2G or 100000 (bytes), "
                            f"got {text!r}")
    return int(value * _UNITS[unit])


def cache_limit() -> int:
    """The configured limit in bytes (0: none)."""
    text = os.environ.get("WIADSL_CACHE_MAX")
    return DEFAULT_LIMIT if text is None or not text.strip() else parse_size(text)


def touch(path: Path) -> None:
    """Mark ``path`` as just used (its modification time), ignoring races."""
    try:
        os.utime(path)
    except OSError:
        pass


@dataclass(frozen=True)
class PruneReport:
    removed: int
    freed: int
    kept: int  #: bytes of evictable files left


def _evictable() -> list[tuple[float, int, Path]]:
    root = cache_store.root()
    if not root.is_dir():
        return []
    found = []
    for folder, subdirs, names in os.walk(root):
        if Path(folder) == root:
            subdirs[:] = [d for d in subdirs if d not in _KEPT]
        for name in names:
            path = Path(folder) / name
            try:
                st = path.stat()
            except OSError:
                continue
            found.append((st.st_mtime, st.st_size, path))
    return found


def prune(limit: int, low_water: float = LOW_WATER) -> PruneReport:
    """Remove the least recently used files until at most ``low_water * limit`` bytes
    remain (when the cache is over ``limit``; ``limit`` 0: nothing to do)."""
    files = _evictable()
    total = sum(size for _, size, _ in files)
    if limit <= 0 or total <= limit:
        return PruneReport(0, 0, total)
    target = int(limit * low_water)
    removed = freed = 0
    for _, size, path in sorted(files, key=lambda f: (f[0], str(f[2]))):
        if total - freed <= target:
            break
        try:
            path.unlink()
        except OSError:
            continue  # another process removed it, or it is not ours to remove
        removed += 1
        freed += size
    return PruneReport(removed, freed, total - freed)


def enforce() -> None:
    """Keep the cache under its limit (after a store); never raises for the disk."""
    try:
        prune(cache_limit())
    except OSError:
        pass


__all__ = ["DEFAULT_LIMIT", "PruneReport", "cache_limit", "enforce", "parse_size", "prune", "touch"]
