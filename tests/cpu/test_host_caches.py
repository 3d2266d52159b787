"""The host's L1 data cache (backends/llvm/caches.py) and the choice that depends on
it: how many rows of a panel sharing one L1 set are still read in place (gemm.py's
few rows of A, conv.py's 1x1 convolutions)."""

from __future__ import annotations

import pytest

from wiadsl.backends.llvm import caches, library
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
    monkeypatch.setattr(caches, "l1_data_ways", lambda: ways)
    assert caches.set_rows() == rows


@pytest.mark.parametrize("ways, tiles", [(8, 1), (12, 4), (16, 4)])
def test_crowded_panels_are_read_in_place_by_few_tiles(monkeypatch, ways, tiles):
    monkeypatch.setattr(caches, "l1_data_ways", lambda: ways)
    assert caches.in_place_tiles() == tiles


#: a child that builds the helpers for an L1 of ``ways`` and runs the products whose
#: panels crowd one L1 set on both sides of ``in_place_tiles``, against NumPy
CROWDED = """
import sys
import numpy as np
from wiadsl.backends.llvm import caches
caches.l1_data_ways = lambda: {ways}
import wiadsl
mm = wiadsl.jit("kernel mm(input A: f32[M, K], input B: f32[K, N], output C: f32[M, N]) {{ C = A @ B; }}")
cv = wiadsl.jit("kernel cv(input x: f32[N, C, H, W], input w: f32[O, C, 1, 1], output y: f32[N, O, H, W])"
                " {{ y = conv2d(x, w); }}")
rng = np.random.default_rng(3)
for m in (2, 7, 9, 17, 23):            # one to three tiles of the gemm's few rows
    for k, n in ((600, 1024), (64, 1019)):
        a = rng.standard_normal((m, k), dtype=np.float32)
        b = rng.standard_normal((k, 1024), dtype=np.float32)[:, :n]
        np.testing.assert_allclose(mm.mm(a, b), a @ b, rtol=1e-4, atol=1e-3)
for c, o in ((64, 5), (64, 16), (600, 20), (64, 40)):   # 1x1 on 4 KiB planes
    x = rng.standard_normal((1, c, 32, 32), dtype=np.float32)
    w = rng.standard_normal((o, c, 1, 1), dtype=np.float32)
    want = np.einsum("oc,nchw->nohw", w[:, :, 0, 0], x)
    np.testing.assert_allclose(cv.cv(x, w), want, rtol=1e-4, atol=1e-3)
print("ok")
"""


@pytest.mark.parametrize("ways", [8, 12])
def test_crowded_panels_on_both_kinds_of_l1(tmp_path, ways):
    """Whatever this host's L1, both sides of the rule run: an 8-way L1 copies the
    panels read by two tiles or more, a 12-way one reads up to four tiles' in place."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, WIADSL_CACHE_DIR=str(tmp_path),
               PYTHONPATH=os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, "-c", CROWDED.format(ways=ways)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and proc.stdout.split() == ["ok"], proc.stderr[-3000:]


def test_helpers_that_read_panels_in_place_name_the_l1_they_were_built_for(monkeypatch):
    """Their code depends on the L1 (``set_rows``): a host with another L1 must not load
    it from a shared cache; a helper that does not depend on it keeps one key."""
    seen = {}

    def capture(name, identity, build):
        seen[name] = identity
        return b""
    monkeypatch.setattr("wiadsl.backends.llvm.keys.cached_object", capture)
    config = default_config().as_dict()
    specs = [{"kind": "conv", "dtype": "f32", "config": config, "stride": [1, 1]},
             {"kind": "gemm", "dtype": "f32", "config": config},
             {"kind": "gemm_packed", "dtype": "f32", "config": config}]
    for spec in specs:
        library._object(spec, library.symbol(spec))
    conv_name, gemm_name, packed_name = (library.symbol(spec) for spec in specs)
    assert seen[conv_name]["l1_ways"] == seen[gemm_name]["l1_ways"] == caches.l1_data_ways()
    assert "l1_ways" not in seen[packed_name]  # B prepacked: no panel read in place


def test_the_last_level_cache_is_the_largest_level_sysfs_gives(tmp_path, monkeypatch):
    for i, (level, kind, size) in enumerate([(1, "Data", "32K"), (1, "Instruction", "32K"),
                                             (2, "Unified", "512K"), (3, "Unified", "32768K")]):
        folder = tmp_path / f"index{i}"
        folder.mkdir()
        (folder / "level").write_text(f"{level}\n")
        (folder / "type").write_text(f"{kind}\n")
        (folder / "size").write_text(f"{size}\n")
    monkeypatch.setattr(caches, "SYSFS", str(tmp_path))
    caches.last_level_bytes.cache_clear()
    try:
        assert caches.last_level_bytes() == 32 << 20
        monkeypatch.setattr(caches, "SYSFS", str(tmp_path / "absent"))
        caches.last_level_bytes.cache_clear()
        assert caches.last_level_bytes() == caches.DEFAULT_LAST_LEVEL
    finally:
        caches.last_level_bytes.cache_clear()


@pytest.mark.parametrize(("text", "size"), [("32768K", 32 << 20), ("1M", 1 << 20), ("512", 512),
                                            ("2G", 2 << 30)])
def test_cache_sizes_parse(text, size):
    assert caches.parse_cache_size(text) == size


@pytest.mark.parametrize("text", ["", "K", "12Q", "big"])
def test_a_size_sysfs_would_not_write_is_a_value_error(text):
    with pytest.raises(ValueError):
        caches.parse_cache_size(text)
