"""The on-disk half of the compile cache: one checksummed file per key.

Layout under ``cache_dir()`` (``$WIADSL_CACHE_DIR``, else ``$XDG_CACHE_HOME/wiadsl``,
else ``~/.cache/wiadsl``)::

    v1/objects/ab/ab12...ef.wobj     one compiled specialization per key
    v1/tune/<record>/<config>.json   autotuner measurements (wiadsl.tune)
    v1/machine/<cpu>.json            measured machine peaks (wiadsl.profile)

An entry file is ``MAGIC | sha256(payload) (32 bytes) | len(payload) (8 bytes,
little-endian) | payload`` with ``payload = len(meta) (4 bytes) | meta JSON |
object code``.

Invariants:
- Writes are atomic: the file is written to a unique temporary name in the same
  folder, flushed, then ``os.replace``d onto its final name, so a reader sees the
  old file, the new file or none, never a partial one. Two processes writing one
  key both write complete, equivalent entries; the last rename wins.
- A read verifies magic, length and checksum before trusting any byte; a bad
  entry raises ``CorruptEntry`` (the caller warns, recompiles and replaces it).
"""

from __future__ import annotations

import json
import os
import struct
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..records import record

try:  # CPython's own SHA-256 (as random.py takes _sha512): the same digests, and no
    # OpenSSL to load, which ``import hashlib`` costs (~2 ms of a ~25 ms warm start)
    from _sha2 import sha256 as new_sha256  # 3.12+
except ImportError:
    try:
        from _sha256 import sha256 as new_sha256
    except ImportError:
        from hashlib import sha256 as new_sha256

MAGIC = b"WIAC\x01\n"
ENTRY_SUFFIX = ".wobj"
_HEAD = len(MAGIC) + 32 + 8


class CorruptEntry(Exception):
    """An entry whose bytes do not match their checksum (truncated or damaged)."""


def cache_dir() -> Path:
    """The cache root (``$WIADSL_CACHE_DIR`` wins; else the user's cache folder)."""
    env = os.environ.get("WIADSL_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "wiadsl"


def root() -> Path:
    return cache_dir() / "v1"


def entry_path(key: str) -> Path:
    return root() / "objects" / key[:2] / f"{key}{ENTRY_SUFFIX}"


@record(frozen=True)
class Entry:
    """A verified entry: its key, metadata (JSON-able) and object code."""

    key: str
    meta: dict[str, Any]
    obj: bytes | memoryview


#: payloads at least this large are checksummed by OpenSSL (hashlib): 5x faster than
#: CPython's own SHA-256 (23 against 125 ms on 45 MB), worth its import (~2 ms)
LARGE_PAYLOAD = 1 << 20


def checksum(payload: bytes | memoryview) -> bytes:
    """SHA-256 digest of ``payload`` (the same bytes whichever implementation)."""
    if len(payload) < LARGE_PAYLOAD:
        return new_sha256(payload).digest()
    import hashlib

    return hashlib.sha256(payload).digest()


def encode(meta: dict[str, Any], obj: bytes, align: int = 1) -> bytes:
    """An entry file's bytes; ``align``: the object code starts at a file offset that
    is a multiple of it (the metadata is padded with spaces, which JSON ignores)."""
    meta_raw = json.dumps(meta, sort_keys=True).encode()
    meta_raw += b" " * (-(_HEAD + 4 + len(meta_raw)) % align)
    payload = struct.pack("<I", len(meta_raw)) + meta_raw + obj
    return MAGIC + checksum(payload) + struct.pack("<Q", len(payload)) + payload


def decode(key: str, data: bytes, view: bool = False) -> Entry:
    """The entry in ``data``; CorruptEntry when any check fails. ``view``: its object
    part is a memoryview of ``data`` (no copy of a large entry)."""
    if len(data) < _HEAD or not data.startswith(MAGIC):
        raise CorruptEntry(f"bad header ({len(data)} bytes)")
    digest = data[len(MAGIC):len(MAGIC) + 32]
    (size,) = struct.unpack("<Q", data[len(MAGIC) + 32:_HEAD])
    payload = memoryview(data)[_HEAD:]
    if len(payload) != size:
        raise CorruptEntry(f"truncated: {len(payload)} of {size} payload bytes")
    if checksum(payload) != digest:
        raise CorruptEntry("checksum mismatch")
    (meta_len,) = struct.unpack("<I", payload[:4])
    try:
        meta = json.loads(bytes(payload[4:4 + meta_len]))
    except ValueError as exc:  # a checksum collision is not expected; stay safe anyway
        raise CorruptEntry(f"bad metadata: {exc}") from None
    obj = payload[4 + meta_len:]
    return Entry(key, meta, obj if view else bytes(obj))


def atomic_write(path: Path, data: bytes, durable: bool = True) -> None:
    """Write ``data`` to ``path`` via a temporary file and a rename (see invariants);
    ``durable=False`` skips the fsync (small index files: after a crash one may be
    empty, which reads as damaged, a miss)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            if durable:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with _quiet():
            os.unlink(tmp)
        raise


def read(key: str, path: Path | None = None, view: bool = False) -> Entry | None:
    """The verified entry for ``key`` (at ``path``, else its object path); None when
    absent; CorruptEntry when damaged."""
    try:
        data = (path or entry_path(key)).read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return None
    return decode(key, data, view)


def write(key: str, meta: dict[str, Any], obj: bytes, path: Path | None = None,
          align: int = 1, durable: bool = True) -> Path:
    path = path or entry_path(key)
    atomic_write(path, encode(meta, obj, align), durable)
    return path


def remove(key: str) -> None:
    with _quiet():
        entry_path(key).unlink()


def iter_entries() -> Iterator[tuple[Path, Entry | None]]:
    """Every entry file, decoded (None for a damaged one), in no particular order."""
    objects = root() / "objects"
    if not objects.is_dir():
        return
    for path in objects.glob(f"*/*{ENTRY_SUFFIX}"):
        try:
            yield path, decode(path.stem, path.read_bytes())
        except (OSError, CorruptEntry):
            yield path, None


class _quiet:
    """Ignore OSError (cleanup that may race with another process)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type | None, *_: object) -> bool:
        return kind is not None and issubclass(kind, OSError)
