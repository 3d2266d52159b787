"""The compile cache (seed §5.9): in memory, then on disk, then compile.

``get_or_compile(parts, compile_fn, load_fn)`` is the one entry point a backend
uses. ``parts`` (``key.KeyParts``) is everything the compiled code
depends on; its SHA-256 is the key. Lookup order:

1. the process-wide memory table (key -> the loaded kernel): no I/O at all;
2. the disk entry (``store``): verified, then its object code is handed to
   ``load_fn`` (no LLVM optimization or code generation: a warm process skips
   LLVM entirely);
3. ``compile_fn(stages)`` -> ``(object code, metadata)``: loaded, stored on disk,
   remembered in memory.

Invariants:
- A damaged entry (truncated, bit flips, unreadable) is never loaded: it warns
  (``WiaCacheWarning``), counts in ``STATS.corrupt``, is recompiled and replaced.
  So is an entry whose recorded key components differ from the lookup's (a
  hash collision or a hand-edited file) or whose code fails to load.
- Disk errors while storing warn and leave the compiled kernel usable.
- ``STATS.compiles`` counts cache misses in this process: a process that hits
  for every kernel ends with ``compiles == 0`` (tests read this and the log).
- ``WIADSL_CACHE=0`` turns the disk half off (memory still works).

Threads (issue 17: eight threads calling one matmul on new shapes deadlocked):
- The memory table is a ``OnceTable``: its lock (and ``_LOCK``, the counters')
  guards dict operations only and is never held while reading the disk,
  compiling or loading. A key being obtained has a ``Flight``: the first thread
  to miss owns it and compiles (or loads); every other thread that misses on that
  key waits for it and then takes the loaded kernel from memory (so one compile
  per key, however many threads). When the owner fails, a waiter tries again
  itself (and gets its own error).
- A kernel's ``compile_fn`` runs under ``_COMPILE_LOCK`` (the tensor passes and
  lowering keep per-run state in module globals), a leaf lock: a compile takes no other lock (but the engine's)
  and waits for no flight, so no cycle can go through it. ``load_fn`` runs under
  no lock of this module: it may obtain other keys (the CPU backend's helpers do,
  through backends/llvm/keys.py's ``cached_object``), also from a thread that native
  code called back into Python (the thread pool's loader) while another thread compiles.
- Flights wait on flights only downwards (a kernel's load on its helpers, a
  helper on nothing), so they form no cycle either; a load that asks for the key
  it is itself obtaining gets a RuntimeError instead of waiting for itself.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import warnings
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from ..forking import child_safe_lock
from ..records import as_dict, record
from . import store
from .key import KeyParts
from .limit import enforce, touch
from .log import Stages, log_compile, log_hit
from .store import CorruptEntry

T = TypeVar("T")


class WiaCacheWarning(UserWarning):
    """A cache entry was damaged or could not be written; the kernel was recompiled."""


@record
class CacheStats:
    """Counters of this process's cache traffic."""

    compiles: int = 0
    memory_hits: int = 0
    disk_hits: int = 0
    corrupt: int = 0
    stores: int = 0
    store_errors: int = 0

    def as_dict(self) -> dict[str, int]:
        return as_dict(self)

    def reset(self) -> None:
        for name in self.as_dict():
            setattr(self, name, 0)


STATS = CacheStats()
#: guards STATS; held for counting only
_LOCK = child_safe_lock(globals(), "_LOCK")
#: serializes the kernels' compile_fn (the tensor passes keep per-run state in module
#: globals); a leaf: under it nothing is waited for and no lock is taken but the
#: backend's own (the CPU's LLVM engine). A ``get_or_compile(..., exclusive=False)``
#: (the CPU backend's helpers) compiles outside it: their builds are LLVM in contexts
#: of their own, so they run beside a kernel's compile.
_COMPILE_LOCK = child_safe_lock(globals(), "_COMPILE_LOCK", threading.RLock)


class Flight:
    """One key (or helper) being obtained by one thread; others ``wait`` for it."""

    def __init__(self) -> None:
        self.owner = threading.get_ident()
        self._done = threading.Event()

    def finish(self) -> None:
        self._done.set()

    def wait(self) -> None:
        if self.owner == threading.get_ident():  # would wait for itself forever
            raise RuntimeError("a compile or load asked for the kernel it is obtaining")
        self._done.wait()


#: every OnceTable (the loaded kernels here, the loaded helpers in library.py)
_TABLES: weakref.WeakSet[OnceTable] = weakref.WeakSet()


class OnceTable:
    """Values made once per key from any number of threads: ``get(key, make)``
    returns the stored value, or makes it -- one thread per key at a time, the others
    waiting for that one -- and stores it. No lock is held while ``make`` runs, so
    ``make`` may use other tables (or this one, for other keys) freely."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.values: dict[Any, Any] = {}
        self._flights: dict[Any, Flight] = {}
        _TABLES.add(self)  # a forked child forgets its flights (_after_fork_in_child)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self.values

    def peek(self, key: Any) -> Any:
        with self._lock:
            return self.values.get(key)

    def get(self, key: Any, make: Callable[[], T]) -> T:
        while True:
            with self._lock:
                if key in self.values:
                    return self.values[key]  # type: ignore[no-any-return]
                flight = self._flights.get(key)
                if flight is None:
                    flight = self._flights[key] = Flight()
                    break
            flight.wait()  # then look again: the value, or (it failed) a try of our own
        try:
            value = make()
            with self._lock:
                self.values[key] = value
            return value
        finally:
            with self._lock:
                del self._flights[key]
            flight.finish()

    def after_fork_in_child(self) -> None:
        """Forget the flights: their threads are the parent's, gone in a forked child."""
        self._lock = threading.Lock()
        self._flights.clear()

    def clear(self) -> None:
        """Forget every value (a flight in progress still stores its own)."""
        with self._lock:
            self.values.clear()


#: key -> the loaded kernel: the memory half of the cache
_KERNELS = OnceTable()


def _after_fork_in_child() -> None:
    """A forked child has only the thread that forked: a compile or load another thread
    was running (a ``tiered`` kernel's compile in the background; a helper that a
    kernel's first fast call loads) left its flight open (and its locks taken:
    ``child_safe_lock``), and waiting on it would hang. What was loaded stays."""
    for table in list(_TABLES):
        table.after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _count(name: str) -> None:
    with _LOCK:
        setattr(STATS, name, getattr(STATS, name) + 1)


def disk_enabled() -> bool:
    return os.environ.get("WIADSL_CACHE", "1") != "0"


def clear_memory() -> None:
    """Forget every kernel loaded in this process (the disk entries stay)."""
    _KERNELS.clear()


def is_cached(parts: KeyParts) -> bool:
    """Whether ``get_or_compile(parts, ...)`` would find the code, loaded in this
    process or on disk, rather than compile it (an unreadable entry counts as found:
    ``get_or_compile`` then compiles after all)."""
    key = parts.digest()
    if key in _KERNELS:
        return True
    return disk_enabled() and store.entry_path(key).is_file()


def get_or_compile(parts: KeyParts, compile_fn: Callable[[Stages], tuple[bytes, dict[str, Any]]],
                   load_fn: Callable[[bytes, dict[str, Any]], T],
                   stages: Stages | None = None, exclusive: bool = True) -> tuple[T, dict[str, Any]]:
    """The loaded kernel for ``parts`` and a record of how it was obtained
    (``{"key", "source": "memory" | "disk" | "compiled", "ms", "stages"}``).

    ``compile_fn`` must not call ``get_or_compile`` (with ``exclusive`` it runs under
    the compile lock); ``load_fn`` may."""
    stages = stages or Stages()
    with stages.stage("key"):
        key = parts.digest()
    source = "memory"

    def obtain() -> T:  # runs in the one thread that owns the key's flight
        nonlocal source
        loaded, source = _obtain(parts, key, compile_fn, load_fn, stages, exclusive)
        return loaded
    loaded: T = _KERNELS.get(key, obtain)
    if source == "memory":
        _count("memory_hits")
        log_hit(parts.kernel, key, "memory", stages)
    return loaded, _record(key, source, stages)


def _obtain(parts: KeyParts, key: str, compile_fn: Callable[[Stages], tuple[bytes, dict[str, Any]]],
            load_fn: Callable[[bytes, dict[str, Any]], T], stages: Stages,
            exclusive: bool) -> tuple[T, str]:
    """From disk, else compiled (and stored): this thread owns the key's flight."""
    if disk_enabled():
        loaded = _from_disk(parts, key, load_fn, stages)
        if loaded is not None:
            _count("disk_hits")
            log_hit(parts.kernel, key, "disk", stages)
            return loaded, "disk"
    with _COMPILE_LOCK if exclusive else contextlib.nullcontext():
        obj, meta = compile_fn(stages)
    meta = {**meta, "kernel": parts.kernel, "components": parts.components(),
            "created": time.time(), "compile_ms": dict(stages.ms)}
    with stages.stage("load"):
        loaded = load_fn(obj, meta)
    if disk_enabled():
        _store(key, meta, obj, stages)
    _count("compiles")
    log_compile(parts.kernel, key, stages)
    return loaded, "compiled"


def _from_disk(parts: KeyParts, key: str, load_fn: Callable[[bytes, dict[str, Any]], T],
               stages: Stages) -> T | None:
    try:
        with stages.stage("read"):
            entry = store.read(key)
    except (CorruptEntry, OSError) as exc:
        _damaged(parts.kernel, key, str(exc))
        return None
    if entry is None:
        return None
    touch(store.entry_path(key))  # used: the last to be evicted (limit.py)
    if entry.meta.get("components") != parts.components():
        _damaged(parts.kernel, key, "its key components do not match the lookup")
        return None
    try:
        with stages.stage("load"):
            return load_fn(bytes(entry.obj), entry.meta)
    except Exception as exc:  # noqa: BLE001 - any failure to load means: recompile
        _damaged(parts.kernel, key, f"its code did not load ({exc})")
        return None


def _damaged(kernel: str, key: str, why: str) -> None:
    _count("corrupt")
    warnings.warn(f"compile cache entry {key[:12]} of kernel '{kernel}' is damaged: {why}; "
                  f"recompiling and replacing it ({store.entry_path(key)})",
                  WiaCacheWarning, stacklevel=5)
    store.remove(key)


def _store(key: str, meta: dict[str, Any], obj: bytes, stages: Stages) -> None:
    try:
        with stages.stage("store"):
            path = store.write(key, meta, obj)
            enforce(path.stat().st_size)  # the size limit (WIADSL_CACHE_MAX): LRU goes first
        _count("stores")
    except OSError as exc:
        _count("store_errors")
        warnings.warn(f"could not write the compile cache entry {key[:12]} "
                      f"({store.entry_path(key)}): {exc}", WiaCacheWarning, stacklevel=5)


def _record(key: str, source: str, stages: Stages) -> dict[str, Any]:
    return {"key": key, "source": source, "ms": stages.total, "stages": dict(stages.ms)}


__all__ = ["STATS", "CacheStats", "Flight", "OnceTable", "WiaCacheWarning",
           "clear_memory", "disk_enabled", "get_or_compile", "is_cached"]
