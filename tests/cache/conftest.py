"""Every test here runs against its own empty cache folder (never the user's)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def cache_dir(fresh_cache):
    return fresh_cache
