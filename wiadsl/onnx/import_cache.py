"""The imported-model cache (issue 21): a warm ``load_onnx`` of a model file or its
bytes skips reading the protobuf and the graph's translation.

Why: ONNX Runtime creates a ResNet-18 session and runs it in ~150 ms; the
translation (shape folding, weight layouts) is the same work for the same bytes
every time.

- Key: SHA-256 over the model's serialized bytes, the import's arguments (``dims``,
  the kernel name, the inline limit) and the compiler version, which digests the
  importer's own sources (cache/key.py). A model file's digest is memoized
  under its stat (``file_digest``), as the compiler version's digest of the sources is.
- Value: one checksummed entry (cache/store.py's format) at ``v1/onnx/<key>.wobj``:
  the ``ImportedModel``'s source, names, opset and boundary dtypes as JSON, then its
  weights' bytes, each at a multiple of ``ALIGN`` from a 64-byte aligned start.

Invariants:
- Only a successful import is written, and only one that comes back exactly:
  weights and boundary dtypes that NumPy names itself (not ml_dtypes' bfloat16),
  and no tensor in an external file (the model's bytes would not identify it).
- A missing, damaged or unreadable entry is a miss; a failed write only costs the
  next process the slow path. The cache's size bound (cache/limit.py) covers it.
- The weights come back as read-only views of the entry's bytes: they never
  change after the import (module.py's invariant), and nothing is copied.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..cache import store as cache_store
from ..cache.key import compiler_version, sha256
from ..cache.limit import enforce, touch
from .imported import ImportedModel

FORMAT = 1
ALIGN = 64


def model_key(digest: bytes, dims: Mapping[str, int] | None, kernel: str | None,
              inline_limit: int) -> str | None:
    """The key of importing the model whose bytes have SHA-256 ``digest``; None when
    the disk cache is off."""
    from ..cache.entries import disk_enabled

    if not disk_enabled():
        return None
    args = json.dumps({"format": FORMAT, "dims": sorted((dims or {}).items()), "kernel": kernel,
                       "inline": inline_limit, "version": compiler_version()}, sort_keys=True)
    return sha256(digest + args.encode())


#: a digest, or the function that waits for it (computed beside the caller's work)
Digest = bytes | Callable[[], bytes]


def file_digest(path: str) -> bytes:
    """SHA-256 of the file at ``path`` (``read_and_digest``)."""
    return digest_value(read_and_digest(path)[0])


def digest_value(digest: Digest) -> bytes:
    return digest() if callable(digest) else digest


def read_and_digest(path: str) -> tuple[Digest, bytes | None]:
    """SHA-256 of the file at ``path``, and its bytes when they had to be read (a cold
    load parses them next: the file is read once). A memo keyed by its absolute path,
    size, inode and modification and change times holds the digest, so a warm load
    reads none of a model's bytes (45 MB for ResNet-18: a read and a hash, ~55 ms);
    any write to the file changes its times, and so the memo's key. Read, the file
    is hashed on a thread (``digest_beside``): the digest is a function that waits
    for it. OSError as ``open`` raises it."""
    st = os.stat(path)
    ident = json.dumps([os.path.abspath(path), st.st_size, st.st_ino, st.st_mtime_ns, st.st_ctime_ns])
    memo = cache_store.root() / "onnx" / "files" / f"{sha256(ident)}.txt"
    try:
        known = bytes.fromhex(memo.read_text())
        if len(known) == 32:
            touch(memo)
            return known, None
    except (OSError, ValueError):
        pass
    with open(path, "rb") as f:
        data = f.read()
    return digest_beside(data, memo), data


def digest_beside(data: bytes, memo: Path | None = None) -> Callable[[], bytes]:
    """Start hashing ``data`` on a thread, and ``compiler_version()`` (the key's other
    slow part on an empty cache: ~30 ms of reading sources, memoized for the process)
    on another; the function returned waits for both and writes the digest to
    ``memo``. hashlib releases the GIL, so a large model's hash (~24 ms for 45 MB)
    overlaps the import that parses and translates the model meanwhile (~17 ms)."""
    digest: list[bytes] = []

    def hash_data() -> None:
        with contextlib.suppress(Exception):  # (``wait`` hashes again, to raise it)
            digest.append(cache_store.checksum(data))
    threads = [threading.Thread(target=hash_data, name="wia-digest", daemon=True),
               threading.Thread(target=compiler_version, name="wia-version", daemon=True)]
    for thread in threads:
        thread.start()

    def wait() -> bytes:
        for thread in threads:
            thread.join()
        if not digest:
            digest.append(cache_store.checksum(data))
        if memo is not None:
            try:
                cache_store.atomic_write(memo, digest[0].hex().encode(), durable=False)
            except OSError:
                pass  # the next load hashes the file again
        return digest[0]
    return wait


def stored(key: str) -> bool:
    """Whether an entry of ``key`` is on disk (unchecked: a damaged one is a miss later)."""
    return _path(key).is_file()


def _path(key: str) -> Path:
    return cache_store.root() / "onnx" / key[:2] / f"{key}{cache_store.ENTRY_SUFFIX}"


def load(key: str) -> ImportedModel | None:
    """The cached import of ``key``, or None (a miss)."""
    path = _path(key)
    try:
        entry = cache_store.read(key, path, view=True)
    except (OSError, cache_store.CorruptEntry):
        return None
    if entry is None:
        return None
    try:
        imported = _decode(entry.meta, entry.obj)
    except (KeyError, TypeError, ValueError):
        return None
    touch(path)
    return imported


def _decode(meta: dict[str, Any], blob: bytes | memoryview) -> ImportedModel:
    weights = {}
    for name, dtype, shape, offset in meta["weights"]:
        dt = np.dtype(dtype)
        array = np.frombuffer(blob, dt, int(np.prod(shape, dtype=np.int64)), offset)
        weights[name] = array.reshape(shape)
    return ImportedModel(
        source=meta["source"], kernel=meta["kernel"], opset=meta["opset"],
        inputs=tuple((a, b) for a, b in meta["inputs"]),
        outputs=tuple((a, b) for a, b in meta["outputs"]), weights=weights,
        boundary={name: np.dtype(d) for name, d in meta["boundary"].items()})


def _portable(dtype: np.dtype) -> bool:
    """A dtype that its ``.str`` names again exactly (NumPy's own, not a user type)."""
    return dtype.kind in "biufc" and np.dtype(dtype.str) == dtype


def store_in_background(key: str, imported: ImportedModel) -> threading.Thread:
    """``store`` on a thread of its own: writing a model's weights (tens of MB: hashed
    and written where they lie, ``cache_store.encode_parts``) need not delay its
    compile, which starts meanwhile (ResNet-18: ~140 ms of its cold first result when
    the weights were also copied). Not a daemon: the interpreter waits for it at exit,
    so the entry is complete for the next process."""
    thread = threading.Thread(target=store, args=(key, imported), name="wia-import-store")
    thread.start()
    return thread


def store(key: str, imported: ImportedModel) -> None:
    """Keep ``imported`` under ``key`` when it round-trips (the caller has checked that
    no tensor of its model lives in another file)."""
    if not all(_portable(d) for d in imported.boundary.values()):
        return
    chunks: list[cache_store.Buffer] = []
    table, at = [], 0
    for name, array in imported.weights.items():
        array = np.ascontiguousarray(array)
        if not _portable(array.dtype):
            return
        pad = -at % ALIGN
        chunks.append(b"\0" * pad)
        at += pad
        table.append([name, array.dtype.str, list(array.shape), at])
        chunks.append(array.reshape(-1).view(np.uint8).data)  # its bytes, not a copy
        at += array.nbytes
    meta = {"source": imported.source, "kernel": imported.kernel, "opset": imported.opset,
            "inputs": [list(p) for p in imported.inputs],
            "outputs": [list(p) for p in imported.outputs], "weights": table,
            "boundary": {name: d.str for name, d in imported.boundary.items()}}
    try:
        # no fsync (a model's weights: tens of MB): after a crash a torn entry fails
        # its checksum, a miss
        cache_store.write(key, meta, chunks, _path(key), align=ALIGN, durable=False)
    except OSError:
        return
    enforce(at)
