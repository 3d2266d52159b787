"""The on-disk half of the compile cache: one checksummed file per key.

Layout under ``cache_dir()`` (``$WIADSL_CACHE_DIR``, else ``$XDG_CACHE_HOME/wiadsl``,
else ``~/.cache/wiadsl``)::

    v1/objects/ab/ab12...ef.wobj     one compiled specialization per key
    v1/tune/<record>/<config>.json   autotuner measurements (wiadsl.tune)
    v1/machine/<cpu>.json            measured machine peaks (wiadsl.profile)

An entry file is ``MAGIC | sha256(payload) (32 bytes) | len(payload) (8 bytes,
little-endian) | payload`` with ``payload = len(meta) (4 bytes) | pack(meta) |
object code``. ``pack`` is ``marshal`` (built in: a warm start imports nothing to
read it; ``json`` cost ~2 ms of ~25) of JSON-like data (dicts with str keys, lists,
str, int, float, bool, None); ``unpack`` gives tuples back as lists, as JSON would.
An entry of another format (an older MAGIC) reads as absent and is rewritten.

Invariants:
- Writes are atomic: the file is written to a unique temporary name in the same
  folder, flushed, then ``os.replace``d onto its final name, so a reader sees the
  old file, the new file or none, never a partial one. Two processes writing one
  key both write complete, equivalent entries; the last rename wins.
- A read verifies magic, length and checksum before trusting any byte; a bad
  entry raises ``CorruptEntry`` (the caller warns, recompiles and replaces it).
"""

from __future__ import annotations

import marshal
import os
import struct
import sys
from collections.abc import Iterator, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from ..records import record

try:  # CPython's own SHA-256 (as random.py takes _sha512): the same digests, and no
    # OpenSSL to load, which ``import hashlib`` costs (~2 ms of a ~25 ms warm start).
    # Its module's name by version: a failed import searches every path (~0.1 ms).
    if sys.version_info >= (3, 12):
        from _sha2 import sha256 as new_sha256
    else:
        from _sha256 import sha256 as new_sha256
except ImportError:
    from hashlib import sha256 as new_sha256

#: what an entry's object may be given as, in parts (a NumPy array's memoryview too)
Buffer = bytes | bytearray | memoryview

MAGIC = b"WIAC\x02\n"
ENTRY_SUFFIX = ".wobj"
_HEAD = len(MAGIC) + 32 + 8


class CorruptEntry(Exception):
    """An entry whose bytes do not match their checksum (truncated or damaged)."""


#: the environment variables the cache folder is found from
_FOLDER_ENV = ("WIADSL_CACHE_DIR", "XDG_CACHE_HOME", "HOME")


def cache_dir() -> Path:
    """The cache root (``$WIADSL_CACHE_DIR`` wins; else the user's cache folder)."""
    return _folders(*map(os.environ.get, _FOLDER_ENV))[0]


def root() -> Path:
    return _folders(*map(os.environ.get, _FOLDER_ENV))[1]


@cache
def _folders(env: str | None, xdg: str | None, home: str | None) -> tuple[Path, Path]:
    """(cache_dir, root) for these environment values: made once (a warm start asks
    a dozen times, and each ``Path`` cost ~20 us)."""
    if env:
        folder = Path(env).expanduser()
    else:
        folder = (Path(xdg) if xdg else Path.home() / ".cache") / "wiadsl"
    return folder, folder / "v1"


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
    return checksum_parts([payload])


def checksum_parts(parts: Sequence[Buffer]) -> bytes:
    """SHA-256 digest of the concatenation of ``parts`` (not made: a model's weights
    are hashed where they lie). OpenSSL's for large data (it releases the GIL)."""
    size = sum(_nbytes(p) for p in parts)
    if size < LARGE_PAYLOAD:
        h = new_sha256()
    else:
        import hashlib

        h = hashlib.sha256()
    for part in parts:
        h.update(part)
    return h.digest()


def _nbytes(part: Buffer) -> int:
    return memoryview(part).nbytes


def _parts(data: bytes | Sequence[Buffer]) -> Sequence[Buffer]:
    """``data`` as buffers to concatenate (one buffer is one part)."""
    return [data] if isinstance(data, (bytes, bytearray, memoryview)) else data


def plain(value: Any, sort_keys: bool = False) -> Any:
    """``value`` as JSON would give it back (tuples as lists, a subclass of a number
    or a string as its base); TypeError for what JSON cannot hold. ``sort_keys``:
    every dict's items in key order."""
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise TypeError("dict keys must be strings")
        items = sorted(value.items()) if sort_keys else value.items()
        return {k: plain(v, sort_keys) for k, v in items}
    if isinstance(value, (list, tuple)):
        return [plain(v, sort_keys) for v in value]
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str.__str__(value)
    raise TypeError(f"a {type(value).__name__} cannot be stored")


def pack(data: Any) -> bytes:
    """JSON-like ``data`` as bytes (see the module docstring)."""
    return marshal.dumps(plain(data))


def unpack(raw: bytes | memoryview) -> Any:
    """What ``pack`` wrote; ValueError for bytes it did not write (trailing bytes
    are ignored)."""
    try:
        return marshal.loads(raw)
    except (EOFError, TypeError, ValueError) as exc:
        raise ValueError(f"not packed data: {exc}") from None


def encode(meta: dict[str, Any], obj: bytes, align: int = 1) -> bytes:
    """An entry file's bytes; ``align``: the object code starts at a file offset that
    is a multiple of it (the metadata is padded with zeros, which ``unpack`` ignores)."""
    return b"".join(encode_parts(meta, [obj], align))


def encode_parts(meta: dict[str, Any], obj: Sequence[Buffer], align: int = 1) -> list[Buffer]:
    """``encode``'s bytes as a list of buffers, the object being the concatenation of
    ``obj``'s, which are not copied: an imported model's weights (tens to hundreds of
    MB) go from its arrays to the file, where joining them took three copies."""
    meta_raw = pack(meta)
    meta_raw += bytes(-(_HEAD + 4 + len(meta_raw)) % align)
    payload = [struct.pack("<I", len(meta_raw)) + meta_raw, *obj]
    size = sum(_nbytes(p) for p in payload)
    return [MAGIC + checksum_parts(payload) + struct.pack("<Q", size), *payload]


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
        meta = unpack(payload[4:4 + meta_len])
    except ValueError as exc:  # a checksum collision is not expected; stay safe anyway
        raise CorruptEntry(f"bad metadata: {exc}") from None
    obj = payload[4 + meta_len:]
    return Entry(key, meta, obj if view else bytes(obj))


def atomic_write(path: Path, data: bytes | Sequence[Buffer], durable: bool = True) -> None:
    """Write ``data`` (bytes, or buffers one after the other) to ``path`` via a
    temporary file and a rename (see invariants); ``durable=False`` skips the fsync
    (small index files: after a crash one may be empty, which reads as damaged, a
    miss)."""
    import tempfile  # writes are a compile's: not on a warm start's path

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            for part in _parts(data):
                f.write(part)
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
    if data[:4] == MAGIC[:4] and not data.startswith(MAGIC):
        return None  # an older format: a miss, then rewritten
    return decode(key, data, view)


def write(key: str, meta: dict[str, Any], obj: bytes | Sequence[Buffer],
          path: Path | None = None, align: int = 1, durable: bool = True) -> Path:
    """Store an entry whose object is ``obj`` (bytes, or buffers to concatenate)."""
    path = path or entry_path(key)
    atomic_write(path, encode_parts(meta, _parts(obj), align), durable)
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
