"""How many threads a parallel region of CPU code uses: the user's setting.

Compiled code never bakes this number in. It cuts its parallel loops into chunks
for ``parallel.THREADS`` (the host's CPUs, at most 8: a compile-time hint that
only shapes the chunking), and the thread pool reads the cell below at the start
of every region: it wakes that many threads less one (the caller is the other),
creating workers the first time a region asks for more than it has. So the
count changes between calls without a recompile, and cached code serves every
setting.

- ``WIADSL_NUM_THREADS``: the count a process starts with (default ``THREADS``).
- ``set_num_threads(n)`` / ``get_num_threads()``: change or read it at run time.

This module imports neither llvmlite nor the compiler: ``library.py`` registers
the cell's address for loaded code under ``LIMIT_SYMBOL``; the pool's other
symbols are named here too, so loading code needs no IR builder.
"""

from __future__ import annotations

import ctypes
import os

from ...diagnostics import WiaCallError, WiaUsageError

#: The most threads a region may use (the pool's own bound; a setting above the
#: host's CPUs is allowed, as in OpenMP, and only oversubscribes).
MAX_THREADS = 256
POOL_SYMBOL = "wia.lib.pool.parallel_for"
#: A process-wide cell holding POOL_SYMBOL's address once the pool is loaded (library.py).
SLOT_SYMBOL = "wia.lib.pool.slot"
#: ``ptr load()``: loads the pool and returns its ``parallel_for`` (null: run serially).
LOAD_SYMBOL = "wia.lib.pool.load"
#: A process-wide i64 cell: the threads of the next region (``LIMIT`` in a JIT
#: process; an ahead-of-time object defines it, set to THREADS, for its host to change).
LIMIT_SYMBOL = "wia.lib.pool.limit"
ENV = "WIADSL_NUM_THREADS"


def host_cpus() -> int:
    """CPUs this process may run on (its affinity mask, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


#: Threads a parallel region is cut for at compile time (the calling thread included).
THREADS = max(1, min(host_cpus(), 8))


def _valid(n: object) -> bool:
    return isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= MAX_THREADS


def _from_env() -> int:
    raw = os.environ.get(ENV)
    if raw is None or not raw.strip():
        return THREADS
    try:
        n = int(raw.strip())
    except ValueError:
        n = 0
    if not _valid(n):
        raise WiaUsageError(f"{ENV}={raw!r} is not a thread count: give a whole number "
                            f"from 1 to {MAX_THREADS} (or unset it for {THREADS}, this host's default)")
    return n


#: The threads of the next parallel region; native code reads it (an aligned i64).
LIMIT = ctypes.c_int64(_from_env())


def set_num_threads(n: int) -> None:
    """Use ``n`` threads (the caller included) in every later parallel region of CPU
    code, in this process. 1 runs everything on the calling thread."""
    if not _valid(n):
        raise WiaCallError(f"set_num_threads: argument 'n' must be a whole number from 1 to "
                           f"{MAX_THREADS}, got {n!r}")
    LIMIT.value = n


def get_num_threads() -> int:
    """The threads a parallel region of CPU code uses now."""
    return int(LIMIT.value)


__all__ = ["ENV", "LIMIT", "MAX_THREADS", "THREADS", "get_num_threads", "host_cpus", "set_num_threads"]
