"""The host record (backends/llvm/host.py): LLVM's name and features for this CPU,
kept in the cache so a warm process needs no LLVM; the same answer LLVM gives, and
LLVM is asked again when the record is missing, damaged or not for this machine."""

from __future__ import annotations

import pytest

from wiadsl.backends.llvm import host
from wiadsl.cache import store as cache_store

SAMPLE = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 26
model\t\t: 2
model name\t: AMD EPYC
stepping\t: 1
cpu MHz\t\t: 2596.120
flags\t\t: fpu  vme de avx2
bogomips\t: 5192.24

processor\t: 1
vendor_id\t: GenuineIntel
"""


def test_the_first_processor_s_identity_is_read():
    assert host.cpu_description(SAMPLE) == {
        "vendor_id": "AuthenticAMD", "cpu family": "26", "model": "2", "model name": "AMD EPYC",
        "stepping": "1", "flags": "fpu vme de avx2"}
    assert host.cpu_description("processor : 0\nvendor_id : x\n") is None  # fields missing


def _described() -> bool:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            return host.cpu_description(f.read(1 << 16)) is not None
    except OSError:
        return False


@pytest.mark.skipif(not _described(), reason="no x86 /proc/cpuinfo identity: LLVM every time")
def test_the_record_holds_llvm_s_answer(fresh_cache, monkeypatch):
    host.llvm_host.cache_clear()
    try:
        first = host.llvm_host()
        path = host._record_path()
        assert path is not None and path.is_file()
        assert first == host.ask_llvm()
        # a later process reads it: LLVM is not asked
        host.llvm_host.cache_clear()
        real = host.ask_llvm
        monkeypatch.setattr(host, "ask_llvm", lambda: pytest.fail("LLVM was asked"))
        assert host.llvm_host() == first
        # a damaged record is a miss
        monkeypatch.setattr(host, "ask_llvm", real)
        path.write_bytes(path.read_bytes()[:-2])
        host.llvm_host.cache_clear()
        assert host.llvm_host() == first
        assert cache_store.read(path.stem, path).meta["cpu"] == first.cpu  # and written again
    finally:
        host.llvm_host.cache_clear()
