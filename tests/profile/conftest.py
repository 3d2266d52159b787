"""Every cache test runs against its own empty cache folder (never the user's)."""

from __future__ import annotations

import pytest

from wiadsl.runtime import cache


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    folder = tmp_path / "wiadsl-cache"
    monkeypatch.setenv("WIADSL_CACHE_DIR", str(folder))
    monkeypatch.delenv("WIADSL_CACHE", raising=False)
    monkeypatch.delenv("WIADSL_VERBOSE", raising=False)
    cache.clear_memory()
    cache.STATS.reset()
    yield folder
    cache.clear_memory()
