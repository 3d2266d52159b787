"""The disk cache's size bound (issue 21): least recently used files go first, a hit
counts as a use, measurements are kept, and an evicted kernel just recompiles."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

import wiadsl
from wiadsl.cache import entries as cache
from wiadsl.cache import store as cache_store
from wiadsl.cache.limit import LEDGER, cache_limit, parse_size, prune
from wiadsl.diagnostics import WiaUsageError


def _kernel(k: int):
    src = f"kernel k{k}(input x: f32[N], output y: f32[N]) {{ y = x * {k}.0 + {k}.0; }}"
    return wiadsl.jit(src, kernel=f"k{k}")


def _call(k: int) -> None:
    x = np.arange(11, dtype=np.float32)
    np.testing.assert_allclose(_kernel(k)(x), x * k + k)


def _used_bytes() -> int:
    root = cache_store.root()
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file()
               and p.relative_to(root).parts[0] not in ("tune", "machine", LEDGER))


def _age_everything(seconds: float) -> None:
    past = time.time() - seconds
    for p in cache_store.root().rglob("*"):
        if p.is_file():
            os.utime(p, (past, past))


def test_sizes_parse_and_bad_ones_name_the_variable(monkeypatch):
    assert parse_size("512M") == 512 << 20 and parse_size("2GiB") == 2 << 30
    assert parse_size("100000") == 100000 and parse_size("1.5k") == 1536
    monkeypatch.setenv("WIADSL_CACHE_MAX", "lots")
    with pytest.raises(WiaUsageError, match="WIADSL_CACHE_MAX: expected a size"):
        cache_limit()
    monkeypatch.delenv("WIADSL_CACHE_MAX")
    assert cache_limit() == 512 << 20


def test_the_cache_stays_under_its_limit(cache_dir, monkeypatch):
    _call(1)
    one_kernel = _used_bytes()
    limit = int(one_kernel * 3.5)
    monkeypatch.setenv("WIADSL_CACHE_MAX", str(limit))
    for k in range(2, 12):
        _call(k)
        assert _used_bytes() <= limit, f"over the limit after kernel {k}"
    assert cache.STATS.compiles >= 11


def test_a_hit_protects_an_entry_and_an_evicted_one_recompiles(cache_dir, monkeypatch):
    for k in (1, 2, 3):
        _call(k)
    _age_everything(100)
    cache.clear_memory()
    _call(1)  # a disk hit: kernel 1 is now the most recently used
    assert cache.STATS.disk_hits >= 1
    report = prune(int(_used_bytes() * 0.5), low_water=1.0)
    assert report.removed > 0
    compiles = cache.STATS.compiles
    cache.clear_memory()
    _call(1)
    assert cache.STATS.compiles == compiles  # kept: loaded from disk again
    cache.clear_memory()
    _call(3)  # evicted: compiled again, with the right result
    assert cache.STATS.compiles > compiles


def test_measurements_are_never_evicted(cache_dir):
    from wiadsl.backends.llvm.gemm import GemmConfig
    from wiadsl.tune.records import record_dir, save

    save("r1", GemmConfig(), 1.0, "matmul", "mm")
    _call(1)
    _age_everything(100)
    prune(1, low_water=0.0)
    assert list(record_dir("r1").glob("*.json"))
    assert _used_bytes() == 0


def test_prune_command(wiac_in_cache):
    proc = wiac_in_cache("cache", "prune", "1K")
    assert proc.returncode == 0 and "removed" in proc.out and "limit 1.0 KiB" in proc.out
    bad = wiac_in_cache("cache", "prune", "huge")
    assert bad.returncode == 1 and "wiac cache prune SIZE: expected a size" in bad.err


@pytest.fixture
def wiac_in_cache(cache_dir):
    import subprocess
    import sys

    def run(*args: str):
        env = dict(os.environ, WIADSL_CACHE_DIR=str(cache_dir))
        proc = subprocess.run([sys.executable, "-m", "wiadsl", *args], env=env,
                              capture_output=True, text=True, timeout=120)
        proc.out, proc.err = proc.stdout, proc.stderr  # type: ignore[attr-defined]
        assert "Traceback" not in proc.stderr
        return proc
    return run


def test_a_store_walks_the_folder_only_when_the_limit_may_be_reached(cache_dir, monkeypatch):
    from wiadsl.cache import limit as cache_limit

    walks = []
    real = cache_limit._evictable
    monkeypatch.setattr(cache_limit, "_evictable", lambda: walks.append(1) or real())
    monkeypatch.setenv("WIADSL_CACHE_MAX", "100M")
    for k in range(1, 5):
        _call(k)
    assert len(walks) == 1  # the first store; the others fit in the allowance
    limit = _used_bytes() + 1
    monkeypatch.setenv("WIADSL_CACHE_MAX", str(limit))  # a new limit: walked again
    _call(5)
    _call(6)
    assert len(walks) >= 2 and _used_bytes() <= limit


def test_the_ledger_counts_every_process_store_and_a_missing_one_is_rebuilt(cache_dir, monkeypatch):
    """The walk happens when the ledger (shared by the processes storing in the folder)
    is missing or says the limit may be reached, whoever wrote the bytes."""
    from wiadsl.cache import limit as cache_limit

    walks = []
    real = cache_limit._evictable
    monkeypatch.setattr(cache_limit, "_evictable", lambda: walks.append(1) or real())
    monkeypatch.setenv("WIADSL_CACHE_MAX", "100M")
    ledger = cache_store.root() / LEDGER
    _call(1)
    _call(2)
    assert len(walks) == 1 and int(ledger.read_text()) == _used_bytes()
    ledger.unlink()  # lost (a folder cleared by hand): the next store walks again
    _call(3)
    assert len(walks) == 2 and int(ledger.read_text()) == _used_bytes()
    ledger.write_text(f"{100 << 20}\n")  # another process filled the allowance
    _call(4)
    assert len(walks) == 3 and int(ledger.read_text()) == _used_bytes()
    _call(5)
    assert len(walks) == 3  # counted, not walked


def test_processes_storing_at_once_count_into_one_ledger(cache_dir):
    """Two processes compiling into one folder at the same time: the ledger holds at
    least what both left there (each adds its stores under the file lock; a helper both
    built is counted twice, never less than once)."""
    import subprocess
    import sys

    code = ("import sys, numpy as np, wiadsl\n"
            "for k in range(int(sys.argv[1]), int(sys.argv[1]) + 3):\n"
            "    src = f'kernel k{k}(input x: f32[N], output y: f32[N]) {{ y = x * {k}.0; }}'\n"
            "    wiadsl.jit(src, kernel=f'k{k}')(np.ones(5, np.float32))\n")
    env = dict(os.environ, WIADSL_CACHE_DIR=str(cache_dir), WIADSL_CACHE_MAX="100M")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(first)], env=env,
                              stderr=subprocess.PIPE, text=True) for first in (100, 200)]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    used = _used_bytes()
    counted = int((cache_store.root() / LEDGER).read_text())
    assert used <= counted <= 2 * used


def test_a_folder_without_file_locks_still_keeps_its_limit(cache_dir, monkeypatch):
    """Where ``flock`` fails (some network file systems), stores go on unlocked and the
    limit still holds."""
    import fcntl

    def no_locks(*_):
        raise OSError(37, "No locks available")
    monkeypatch.setattr(fcntl, "flock", no_locks)
    _call(1)
    limit = int(_used_bytes() * 2.5)
    monkeypatch.setenv("WIADSL_CACHE_MAX", str(limit))
    for k in range(2, 8):
        _call(k)
        assert _used_bytes() <= limit, f"over the limit after kernel {k}"
