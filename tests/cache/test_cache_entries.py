"""Damaged entries warn and recompile; the memory layer; the on/off switch; the store."""

from __future__ import annotations

import numpy as np
import pytest

import wiadsl
from wiadsl.backends.llvm.keys import cached_object
from wiadsl.cache import entries as cache
from wiadsl.cache import store as cache_store
from wiadsl.cache.key import canonical
from wiadsl.cache.store import CorruptEntry

from .helpers import AXPY, axpy_call, kernel_entries


def only_entry():
    entries = kernel_entries()
    assert len(entries) == 1
    return entries[0]


def damage(path, how):
    data = path.read_bytes()
    if how == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif how == "flipped":  # one bit inside the object code
        i = len(data) - 100
        path.write_bytes(data[:i] + bytes([data[i] ^ 0x10]) + data[i + 1:])
    elif how == "empty":
        path.write_bytes(b"")
    else:  # garbage of the right length
        path.write_bytes(b"\xff" * len(data))


@pytest.mark.parametrize("how", ["truncated", "flipped", "empty", "garbage"])
def test_damaged_entry_warns_recompiles_and_is_replaced(how):
    axpy_call()
    path, entry = only_entry()
    assert entry is not None and cache.STATS.compiles == 1
    damage(path, how)
    cache.clear_memory()
    with pytest.warns(cache.WiaCacheWarning, match="damaged"):
        axpy_call()  # correct results from recompiled code
    assert cache.STATS.corrupt == 1 and cache.STATS.compiles == 2
    _, replaced = only_entry()
    assert replaced is not None and replaced.obj == entry.obj


def test_decode_rejects_every_truncation():
    raw = cache_store.encode({"a": 1}, b"object code")
    assert cache_store.decode("k", raw).obj == b"object code"
    for n in range(len(raw)):
        with pytest.raises(CorruptEntry):
            cache_store.decode("k", raw[:n])


def test_an_entry_in_parts_is_the_entry_of_their_concatenation(tmp_path):
    """A large object given in parts (an imported model's arrays, not joined) writes the
    bytes ``encode`` gives for the joined object, at small and large sizes (the two
    hash implementations), aligned alike."""
    import numpy as np

    for size in (10, 3 << 20):
        weights = np.arange(size // 4, dtype=np.float32)
        parts = [b"\0" * 3, weights.view(np.uint8).data, b"tail"]
        whole = b"".join(bytes(p) for p in parts)
        path = cache_store.write("k", {"a": 1}, parts, tmp_path / f"{size}.wobj", align=64)
        assert path.read_bytes() == cache_store.encode({"a": 1}, whole, align=64)
        assert cache_store.read("k", path).obj == whole


def test_packed_data_reads_back_as_json_would_give_it():
    data = {"a": (1, 2.5, "x", None, True), "b": {"c": [np.float64(0.5), np.int64(3).item()]}}
    raw = cache_store.pack(data)
    assert cache_store.unpack(raw + b"\0\0") == {"a": [1, 2.5, "x", None, True],
                                                  "b": {"c": [0.5, 3]}}
    assert type(cache_store.unpack(raw)["b"]["c"][0]) is float
    for bad in ({"x": object()}, {1: "int key"}, [np.int64(3)]):
        with pytest.raises(TypeError):
            cache_store.pack(bad)
    for garbage in (b"", b"\xff" * 8, raw[:-1]):
        with pytest.raises(ValueError):
            cache_store.unpack(garbage)


def test_canonical_text_is_one_per_value():
    assert canonical({"b": [1, (2, 3)], "a": None}) == canonical({"a": None, "b": [1, [2, 3]]})
    texts = [canonical(v) for v in (1, "1", True, 1.0, None, [1], {"1": 1})]
    assert len(set(texts)) == len(texts)
    for bad in (object(), {1: 2}, {"k": np.int64(1)}):
        with pytest.raises(TypeError):
            canonical(bad)


def test_an_entry_of_the_older_format_is_absent_not_damaged(tmp_path):
    path = tmp_path / "old.wobj"
    path.write_bytes(b"WIAC\x01\n" + cache_store.encode({"a": 1}, b"code")[len(cache_store.MAGIC):])
    assert cache_store.read("old", path) is None
    cache_store.write("new", {"a": 1}, b"code", path)
    assert cache_store.read("new", path).meta == {"a": 1}


def test_entry_with_other_components_is_not_trusted():
    axpy_call()
    path, entry = only_entry()
    meta = dict(entry.meta, components={**entry.meta["components"], "shapes": "[[1]]"})
    cache_store.write(entry.key, meta, entry.obj)
    cache.clear_memory()
    with pytest.warns(cache.WiaCacheWarning, match="components"):
        axpy_call()
    assert cache.STATS.compiles == 2


def test_in_process_hit_skips_disk_and_compile():
    axpy_call()
    fn = axpy_call(wiadsl.jit(AXPY, kernel="axpy", target="cpu"))  # a new KernelFunction
    assert fn.stats["cache"] == "memory"
    assert cache.STATS.compiles == 1 and cache.STATS.memory_hits == 1


def test_disk_hit_in_process_after_forgetting_memory():
    axpy_call()
    cache.clear_memory()
    fn = axpy_call()
    assert fn.stats["cache"] == "disk" and cache.STATS.disk_hits == 1


def test_cache_off_writes_nothing(monkeypatch, cache_dir):
    monkeypatch.setenv("WIADSL_CACHE", "0")
    axpy_call()
    assert not cache_dir.exists() and cache.STATS.compiles == 1


def test_unwritable_folder_warns_but_runs(monkeypatch, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("WIADSL_CACHE_DIR", str(blocker))
    with pytest.warns(cache.WiaCacheWarning, match="could not write"):
        axpy_call()
    assert cache.STATS.store_errors == 1


def test_verbose_log_has_stage_times(monkeypatch, capsys):
    monkeypatch.setenv("WIADSL_VERBOSE", "1")
    axpy_call()
    err = capsys.readouterr().err
    line = next(ln for ln in err.splitlines() if ln.startswith("JIT 컴파일: axpy"))
    for stage in ("key", "passes", "lower", "llvm-opt", "codegen", "store"):
        assert f"{stage} " in line
    assert " ms) [" in line


def test_cached_object_builds_once_then_hits():
    built = []

    def build():
        built.append(1)
        return b"\x7fELF helper code"
    assert cached_object("wia.lib.test", "spec-1", build) == b"\x7fELF helper code"
    cache.clear_memory()
    assert cached_object("wia.lib.test", "spec-1", build) == b"\x7fELF helper code"
    assert len(built) == 1 and cache.STATS.disk_hits == 1
    cached_object("wia.lib.test", "spec-2", build)
    assert len(built) == 2
