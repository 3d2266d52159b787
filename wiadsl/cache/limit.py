"""A size bound on the disk cache, with least-recently-used eviction (issue 21: one
machine's shared cache held over 4,000 entries, and nothing bounded it).

- The limit is ``$WIADSL_CACHE_MAX`` (bytes, or with a K/M/G suffix: ``512M``;
  ``0`` means no limit), else ``DEFAULT_LIMIT``.
- "Used" means written or hit: a disk hit sets the file's modification time to
  now (``touch``), as access times are often not kept (``noatime`` mounts).
- ``enforce(written)`` after each store of compiled code: a process walks the cache
  folder (to sum its size) only when what it has written since its last walk could
  have reached the limit, so a store costs no directory walk in the common case (a
  fuzz run on a 30,000-file cache slowed 4x when every store walked it). When over
  the limit it removes the least recently used files (objects and the source index)
  down to ``LOW_WATER`` of it. Several processes sharing a folder each keep their
  own allowance, so the folder may exceed the limit by what they wrote in between.
  Autotuner records and machine probes (measurements, small) are never evicted.
- Eviction only ever costs a recompile: an index entry whose object is gone, or an
  object whose index entry is gone, is a miss like any other.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..diagnostics import WiaUsageError
from ..forking import child_safe_lock
from ..records import record
from . import store

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


@record(frozen=True)
class PruneReport:
    removed: int
    freed: int
    kept: int  #: bytes of evictable files left


def _evictable() -> list[tuple[float, int, Path]]:
    root = store.root()
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


#: (cache folder, limit) -> bytes this process may still write there before it walks
#: the folder again
_allowances: dict[tuple[str, int], int] = {}
_allowance_lock = child_safe_lock(globals(), "_allowance_lock")


def enforce(written: int) -> None:
    """Keep the cache under its limit after a store of ``written`` bytes (see the
    module docstring); never raises for the disk."""
    limit = cache_limit()
    if limit <= 0:
        return
    key = (str(store.root()), limit)
    with _allowance_lock:
        left = _allowances.get(key)
        if left is not None and left > written:
            _allowances[key] = left - written
            return
        try:
            report = prune(limit)
        except OSError:
            return
        _allowances[key] = max(limit - report.kept, 0)


__all__ = ["DEFAULT_LIMIT", "PruneReport", "cache_limit", "enforce", "parse_size", "prune", "touch"]
