"""Suite-wide settings: the compile cache lives in a temporary folder, never the user's."""

from __future__ import annotations

import os
import tempfile

import pytest


@pytest.fixture(autouse=True, scope="session")
def _private_compile_cache():
    # Set before any kernel compiles; child processes inherit it through os.environ.
    with tempfile.TemporaryDirectory(prefix="wiadsl-test-cache-") as folder:
        old = os.environ.get("WIADSL_CACHE_DIR")
        os.environ["WIADSL_CACHE_DIR"] = folder
        yield
        if old is None:
            os.environ.pop("WIADSL_CACHE_DIR", None)
        else:
            os.environ["WIADSL_CACHE_DIR"] = old
