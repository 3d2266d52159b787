"""The CPU backend keeps freed intermediate buffers mapped (allocator.keep_freed_memory):
set once when native code first loads, off with WIADSL_KEEP_FREED_MEMORY=0, and never
over a program's own MALLOC_*_THRESHOLD_ settings."""

from __future__ import annotations

import ctypes.util
import platform

import numpy as np
import pytest

import wiadsl
from wiadsl.backends.llvm import library
from wiadsl.backends.llvm.allocator import keep_freed_memory

GLIBC = platform.libc_ver()[0] == "glibc" and ctypes.util.find_library("c") is not None


def test_opt_out_and_the_programs_own_settings_are_respected(monkeypatch):
    monkeypatch.setenv("WIADSL_KEEP_FREED_MEMORY", "0")
    assert keep_freed_memory() is False
    monkeypatch.delenv("WIADSL_KEEP_FREED_MEMORY")
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "1000000")
    assert keep_freed_memory() is False


@pytest.mark.skipif(not GLIBC, reason="mallopt's thresholds are glibc's")
def test_tuned_once_when_native_code_loads(monkeypatch):
    for key in ("WIADSL_KEEP_FREED_MEMORY", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"):
        monkeypatch.delenv(key, raising=False)
    assert keep_freed_memory() is True
    mod = wiadsl.jit("kernel k(input a: f32[N], output b: f32[N]) { b = a * 2.0; }")
    np.testing.assert_array_equal(mod.k(np.arange(5, dtype=np.float32)),
                                  np.arange(5, dtype=np.float32) * 2)
    assert len(library._MALLOC_TUNED) == 1
