"""Every test here runs against its own empty cache folder (never the user's)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def cache_dir(fresh_cache):
    # The arena helper every kernel links against is compiled once per process (the
    # first test's): loaded before the statistics a test counts start.
    from wiadsl.backends.llvm.library import ARENA_SPEC, ensure_loaded
    from wiadsl.cache import entries as cache

    ensure_loaded([ARENA_SPEC])
    cache.STATS.reset()
    return fresh_cache
