"""The host's L1 data cache (backends/llvm/caches.py) and the convolution choice that
depends on it: how many rows of a 1x1 panel sharing one L1 set are still read in place."""

from __future__ import annotations

import json

import pytest

from wiadsl.backends.llvm import caches, conv, library
from wiadsl.backends.llvm.gemm_config import default_config


def fake_sysfs(tmp_path, levels):
    for i, (level, kind, ways) in enumerate(levels):
        folder = tmp_path / f"index{i}"
        folder.mkdir()
        (folder / "level").write_text(f"{level}\n")
        (folder / "type").write_text(f"{kind}\n")
        (folder / "ways_of_associativity").write_text(f"{ways}\n")
    return str(tmp_path)


@pytest.fixture
def sysfs(monkeypatch):
    def use(path):
        monkeypatch.setattr(caches, "SYSFS", path)
        caches.l1_data_ways.cache_clear()
    yield use
    caches.l1_data_ways.cache_clear()


def test_the_l1_data_cache_is_read_from_sysfs(tmp_path, sysfs):
    sysfs(fake_sysfs(tmp_path, [(1, "Instruction", 8), (1, "Data", 12), (2, "Unified", 16)]))
    assert caches.l1_data_ways() == 12


@pytest.mark.parametrize("levels", [[], [(2, "Unified", 16)], [(1, "Data", 0)], [(1, "Data", "?")]])
def test_an_l1_the_os_does_not_describe_is_the_default(tmp_path, sysfs, levels):
    sysfs(fake_sysfs(tmp_path, levels))
    assert caches.l1_data_ways() == caches.DEFAULT_WAYS


def test_no_sysfs_is_the_default(tmp_path, sysfs):
    sysfs(str(tmp_path / "missing"))
    assert caches.l1_data_ways() == caches.DEFAULT_WAYS


@pytest.mark.parametrize("ways, rows", [(8, 10), (12, 16), (16, 21)])
def test_rows_sharing_a_set_scale_with_the_ways(monkeypatch, ways, rows):
    """16 rows of a panel in one set: in place on a 12-way L1, packed on an 8-way one
    (16 -> 64 channels at 32x32 measured both ways, conv.py)."""
    monkeypatch.setattr(conv, "l1_data_ways", lambda: ways)
    assert conv.in_place_set_rows() == rows


def test_a_convolution_helper_names_the_l1_it_was_built_for(monkeypatch):
    """Its code depends on the L1 (``reads_in_place``): a host with another L1 must not
    load it from a shared cache; a helper that does not depend on it keeps one key."""
    seen = {}

    def capture(name, identity, build):
        seen[name] = json.loads(identity)
        return b""
    monkeypatch.setattr("wiadsl.runtime.cache.cached_object", capture)
    config = default_config().as_dict()
    for kind in ("conv", "gemm"):
        spec = {"kind": kind, "dtype": "f32", "config": config, **({"stride": [1, 1]} if kind == "conv" else {})}
        library._object(spec, library.symbol(spec))
    (conv_name,) = (n for n in seen if ".conv." in n)
    (gemm_name,) = (n for n in seen if ".gemm." in n)
    assert seen[conv_name]["l1_ways"] == caches.l1_data_ways()
    assert "l1_ways" not in seen[gemm_name]
