"""The imported-model cache (wiadsl/onnx/import_cache.py, issue 21): a model file
imported before loads without the onnx package and without translating its graph,
and anything that could change the import (the bytes, ``dims``, external data, a
damaged entry) takes the full path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.onnx.helpers import assert_close, ort_run, require_onnx

require_onnx()

import onnx  # noqa: E402

from tests.onnx import models  # noqa: E402
from wiadsl.cache import store as cache_store  # noqa: E402
from wiadsl.onnx import import_cache  # noqa: E402
from wiadsl.onnx.importer import INLINE_LIMIT, import_onnx, load_onnx  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import json, sys, numpy as np, wiadsl
from wiadsl.cache.entries import STATS
feeds = dict(np.load(sys.argv[2]))
y = wiadsl.load_onnx(sys.argv[1])(**feeds)
print(json.dumps({"y": np.asarray(y).tolist(), "onnx": "onnx" in sys.modules,
                  "frontend": "wiadsl.frontend.parser" in sys.modules, "stats": STATS.as_dict()}))
"""


def _entries() -> list[Path]:
    return sorted((cache_store.root() / "onnx").rglob("*.wobj"))


@pytest.fixture
def saved(tmp_path):
    built = models.cnn(3, 12, 5)
    path = tmp_path / "cnn.onnx"
    onnx.save(built.model, path)
    feeds = built.make_inputs(2)
    np.savez(tmp_path / "feeds.npz", **feeds)
    return built, path, feeds


def _child(cache: Path, model: Path, feeds: Path) -> dict:
    env = dict(os.environ, WIADSL_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", CHILD, str(model), str(feeds)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_warm_process_needs_neither_onnx_nor_the_frontend(fresh_cache, saved, tmp_path):
    """Neither process imports the onnx package (onnx/proto.py reads the file); the
    cold one compiles, the warm one finds the import and the code in the cache."""
    built, path, feeds = saved
    cold = _child(fresh_cache, path, tmp_path / "feeds.npz")
    warm = _child(fresh_cache, path, tmp_path / "feeds.npz")
    want = ort_run(built.model, feeds)[0]
    for run in (cold, warm):
        assert_close(np.array(run["y"], np.float32), want)
        assert not run["onnx"], run
    assert cold["frontend"] and cold["stats"]["compiles"] >= 1
    assert not warm["frontend"], warm
    assert warm["stats"]["compiles"] == 0


def test_the_cached_import_is_the_import(fresh_cache, saved):
    _, path, _ = saved
    first = import_onnx(path)
    assert len(_entries()) == 1
    again = import_onnx(path)
    assert (again.source, again.kernel, again.opset, again.inputs, again.outputs) == \
        (first.source, first.kernel, first.opset, first.inputs, first.outputs)
    assert list(again.weights) == list(first.weights)
    for name, w in first.weights.items():
        got = again.weights[name]
        assert got.dtype == w.dtype and got.shape == w.shape and not got.flags.writeable
        np.testing.assert_array_equal(got, w)
        assert got.ctypes.data % got.dtype.alignment == 0


def test_other_bytes_or_dims_are_other_entries(fresh_cache, saved, tmp_path):
    built, path, feeds = saved
    import_onnx(path)
    import_onnx(path, dims={"N": 2})
    assert len(_entries()) == 2
    other = models.cnn(3, 12, 5, seed=9)  # the same graph with other weights
    onnx.save(other.model, path)
    assert_close(load_onnx(path, target="cpu")(**feeds), ort_run(other.model, feeds)[0])
    assert len(_entries()) == 3


def test_a_damaged_entry_is_a_miss(fresh_cache, saved):
    built, path, feeds = saved
    import_onnx(path)
    (entry,) = _entries()
    data = bytearray(entry.read_bytes())
    data[-3] ^= 0xFF  # a weight byte: the checksum no longer matches
    entry.write_bytes(bytes(data))
    key = import_cache.model_key(import_cache.file_digest(str(path)), None, None, 16)
    assert key is not None and import_cache.load(key) is None
    # the full path runs, is right, and writes a good entry again
    assert_close(load_onnx(path, target="cpu")(**feeds), ort_run(built.model, feeds)[0])
    assert import_cache.load(key) is not None


def test_what_cannot_round_trip_is_not_kept(fresh_cache, saved, tmp_path, monkeypatch):
    built, path, feeds = saved
    import_onnx(built.model)  # a ModelProto: no bytes to key it by
    external = tmp_path / "external.onnx"
    moved = onnx.ModelProto()
    moved.CopyFrom(built.model)  # saving with external data changes the proto it saves
    onnx.save_model(moved, external, save_as_external_data=True,
                    all_tensors_to_one_file=True, location="weights.bin", size_threshold=0)
    assert_close(load_onnx(external, target="cpu")(**feeds), ort_run(built.model, feeds)[0])
    assert _entries() == []
    monkeypatch.setenv("WIADSL_CACHE", "0")
    import_onnx(path)
    assert _entries() == []
    assert import_cache.model_key(import_cache.file_digest(str(path)), None, None, 16) is None


def test_a_model_file_is_hashed_once_until_it_changes(fresh_cache, saved, monkeypatch):
    _, path, _ = saved
    digest = import_cache.file_digest(str(path))
    assert digest == import_cache.cache_store.checksum(path.read_bytes())

    def no_hashing(data):
        raise AssertionError("the model's bytes were hashed again")
    monkeypatch.setattr(import_cache.cache_store, "checksum", no_hashing)
    assert import_cache.file_digest(str(path)) == digest  # from the memo: no read, no hash
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # a write would do this
    with pytest.raises(AssertionError, match="hashed again"):
        import_cache.file_digest(str(path))


def test_load_onnx_writes_its_entry_beside_the_compile(fresh_cache, saved, monkeypatch):
    """``load_onnx`` stores the import on a thread of its own (the compile does not wait
    for tens of MB of weights to be written); the entry is the same as a direct store's."""
    import threading

    _, path, _ = saved
    threads: list[threading.Thread] = []
    started = import_cache.store_in_background

    def recording(key, imported):
        threads.append(started(key, imported))
        return threads[-1]
    monkeypatch.setattr(import_cache, "store_in_background", recording)
    load_onnx(path, target="interp")
    assert len(threads) == 1 and threads[0].name == "wia-import-store"
    threads[0].join(60)
    assert len(_entries()) == 1
    cached = import_cache.load(import_cache.model_key(import_cache.file_digest(str(path)),
                                                      None, None, INLINE_LIMIT))
    assert cached is not None and cached.source == import_onnx(path).source


def test_a_cold_load_reads_the_model_file_once(fresh_cache, saved, monkeypatch):
    """The bytes hashed for the key are the bytes parsed: one read of the file."""
    _, path, feeds = saved
    reads = []
    real_open = open

    def counting_open(file, *args, **kwargs):
        if os.fspath(file) == str(path):
            reads.append(file)
        return real_open(file, *args, **kwargs)
    monkeypatch.setattr("builtins.open", counting_open)
    import_onnx(path)
    assert len(reads) == 1


def test_the_same_bytes_from_another_file_keep_their_entry(fresh_cache, saved, tmp_path, monkeypatch):
    """A file the cache never saw is hashed while it is translated; bytes imported
    before (another path) then find their entry, which is not written again."""
    built, path, feeds = saved
    import_onnx(path)
    (entry,) = _entries()
    written = entry.stat().st_mtime_ns
    copy = tmp_path / "copy.onnx"
    copy.write_bytes(path.read_bytes())
    stores = []
    monkeypatch.setattr(import_cache, "store", lambda *a: stores.append(a))
    imported = import_onnx(copy)
    assert stores == [] and _entries() == [entry] and entry.stat().st_mtime_ns == written
    assert imported.source == import_onnx(path).source
    # a model given as bytes takes the same way
    assert import_onnx(copy.read_bytes()).source == imported.source and stores == []
