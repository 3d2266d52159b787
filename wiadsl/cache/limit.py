"""A size bound on the disk cache, with least-recently-used eviction (issue 21: one
machine's shared cache held over 4,000 entries, and nothing bounded it).

- The limit is ``$WIADSL_CACHE_MAX`` (bytes, or with a K/M/G suffix: ``512M``;
  ``0`` means no limit), else ``DEFAULT_LIMIT``.
- "Used" means written or hit: a disk hit sets the file's modification time to
  now (``touch``), as access times are often not kept (``noatime`` mounts).
- ``enforce(written)`` after each store of compiled code adds ``written`` to the
  folder's ledger (``usage``: the bytes of evictable files, one number, updated
  under a file lock by every process that stores there) and walks the folder (to
  sum its size) only when the ledger is missing or the limit may be reached. So a
  store costs a few system calls, not a walk: a fuzz run on a 30,000-file cache
  slowed 4x when every store walked it, and a process's first store on a 57,000-file
  cache waited ~500 ms for a walk when each process began with one. A walk removes
  the least recently used files (objects and the source index) down to
  ``LOW_WATER`` of the limit when over it, and writes the ledger anew. Files
  written without a store (the host probe, a few bytes) are counted at the next
  walk; a ledger that counts too much (a file replaced, a folder cleared by hand)
  only brings that walk forward. Autotuner records and machine probes
  (measurements, small) are never evicted.
- Eviction only ever costs a recompile: an index entry whose object is gone, or an
  object whose index entry is gone, is a miss like any other.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from ..diagnostics import WiaUsageError
from ..forking import child_safe_lock
from ..records import record
from . import store

DEFAULT_LIMIT = 512 << 20
LOW_WATER = 0.8
#: folders under the cache root that hold measurements, not compiled code
_KEPT = ("tune", "machine")
#: the ledger's file name in the cache root (neither counted nor evicted)
LEDGER = "usage"
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


def _evictable() -> list[tuple[float, int, str]]:
    """(modification time, size, path) of every file that eviction may remove.
    ``os.scandir`` gives each entry's stat without a ``Path`` per file (a third of
    the time of ``os.walk`` + ``Path.stat`` on a 57,000-file cache)."""
    root = store.root()
    found: list[tuple[float, int, str]] = []
    pending = [str(root)]
    while pending:
        folder = pending.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        top = folder == str(root)
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    if not (top and entry.name in _KEPT):
                        pending.append(entry.path)
                elif not (top and entry.name == LEDGER):
                    st = entry.stat(follow_symlinks=False)
                    found.append((st.st_mtime, st.st_size, entry.path))
            except OSError:
                continue  # removed meanwhile by another process
    return found


_ledger_lock = child_safe_lock(globals(), "_ledger_lock")


@contextmanager
def _ledger() -> Iterator[int]:
    """The open ledger file, locked against the other processes (and, by
    ``_ledger_lock``, the other threads) until the block ends."""
    try:  # here, not at the top: a warm start imports this module and never stores
        import fcntl
    except ImportError:  # no flock (Windows): the other threads wait, not the processes
        fcntl = None  # type: ignore[assignment]
    root = store.root()
    root.mkdir(parents=True, exist_ok=True)
    with _ledger_lock:
        fd = os.open(root / LEDGER, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            # a file system without locks (some network mounts): unlocked, where a
            # lost update only moves the next walk, which rewrites the ledger
            with suppress(OSError):
                if fcntl is not None:
                    fcntl.flock(fd, fcntl.LOCK_EX)
            yield fd
        finally:
            os.close(fd)  # releases the flock


def _read_ledger(fd: int) -> int | None:
    text = os.pread(fd, 32, 0).strip()
    return int(text) if text.isdigit() else None


def _write_ledger(fd: int, used: int) -> None:
    data = b"%d\n" % used
    os.pwrite(fd, data, 0)
    os.ftruncate(fd, len(data))


def prune(limit: int, low_water: float = LOW_WATER) -> PruneReport:
    """Remove the least recently used files until at most ``low_water * limit`` bytes
    remain (when the cache is over ``limit``; ``limit`` 0: nothing to do), and write
    what is left in the ledger (a cache folder that does not exist stays so)."""
    if not store.root().is_dir():
        return PruneReport(0, 0, 0)
    with _ledger() as fd:
        report = _evict(limit, low_water)
        _write_ledger(fd, report.kept)
    return report


def _evict(limit: int, low_water: float) -> PruneReport:
    files = _evictable()
    total = sum(size for _, size, _ in files)
    if limit <= 0 or total <= limit:
        return PruneReport(0, 0, total)
    target = int(limit * low_water)
    removed = freed = 0
    for _, size, path in sorted(files):
        if total - freed <= target:
            break
        try:
            os.unlink(path)
        except OSError:
            continue  # another process removed it, or it is not ours to remove
        removed += 1
        freed += size
    return PruneReport(removed, freed, total - freed)


def enforce(written: int) -> None:
    """Keep the cache under its limit after a store of ``written`` bytes (see the
    module docstring); never raises for the disk."""
    limit = cache_limit()
    if limit <= 0:
        return
    try:
        with _ledger() as fd:
            used = _read_ledger(fd)
            if used is not None and used + written <= limit:
                _write_ledger(fd, used + written)
                return
            _write_ledger(fd, _evict(limit, LOW_WATER).kept)
    except OSError:
        return


__all__ = ["DEFAULT_LIMIT", "PruneReport", "cache_limit", "enforce", "parse_size", "prune", "touch"]
