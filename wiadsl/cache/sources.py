"""The source-level compile cache (issue 21): a warm process skips the compiler.

The per-specialization key (``key.KeyParts``) is taken from the lowered IR,
so finding it means parsing, checking and lowering the source. This layer keys
on what that IR is a function of, readable without the compiler:

- ``source_key(text, filename, target, options, host, imports)``: SHA-256 of the source text, its
  file name, the text of every file its ``import``s may resolve to (found by a
  regex and the loader's search order, transitively), the target and its options,
  the compiler version, and the host CPU and its features.
- Under it, ``sources/<key>.idx`` holds the kernels' signatures (written after a
  successful compile), so ``jit`` builds its ``Module`` without parsing; and one
  ``specs/<key>.idx`` per (kernel, shapes, dtypes, tuning state) holds the
  ``KeyParts`` components and the gemm config of that specialization, so the
  first call finds the object code without lowering. Both are entries of the
  store's format (checksummed, ``store.pack``ed data, no object code).

Invariants:
- Only what a successful compile produced is written; a hit reproduces exactly
  what the slow path computes for the same inputs (every input is in the key).
  The import regex may find more names than the parser would (``import`` in a
  comment): extra files only make the key stricter.
- Any damaged, unreadable or mismatched file is a miss (the slow path runs and
  rewrites it); writes are atomic (``store.atomic_write``) and a failed
  write only costs the next process the slow path.
- Nothing here imports the frontend, the passes or the code generators.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..dtypes import DTYPE_NAMES
from ..resources import stdlib_dir
from ..signature import KernelSignature, ParamSpec
from . import store
from .key import canonical, sha256
from .limit import enforce, touch

_IMPORT = r"\bimport\s+([A-Za-z_]\w*)\s*;"
FORMAT = 2
INDEX_SUFFIX = ".idx"


def _is_file(filename: str) -> bool:
    return not (filename.startswith("<") and filename.endswith(">"))


def import_closure(text: str, filename: str) -> dict[str, str]:
    """Path -> text of every file an ``import`` of ``text`` (transitively) may load,
    and a ``missing:`` entry for each candidate path that does not exist (a file
    that appears later changes what the loader picks, so it changes the key).
    ``os.path`` and one ``stat`` per candidate: a warm start computes this."""
    found: dict[str, str] = {}
    todo = [(text, filename)]
    while todo:
        body, importer = todo.pop()
        names = re.findall(_IMPORT, body) if "import" in body else []  # most import nothing
        for name in dict.fromkeys(names):
            folders = [os.path.dirname(os.path.realpath(importer))] if _is_file(importer) else []
            for folder in [*folders, str(stdlib_dir())]:
                # the name the loader gives the file (spans of runtime errors use it)
                path = os.path.join(folder, f"{name}.wia")
                try:
                    key, regular = path, stat.S_ISREG(os.stat(path).st_mode)
                except OSError:
                    key, regular = f"missing:{path}", False
                if key in found:
                    break
                if not regular:
                    found[key] = ""
                    continue
                with open(path, encoding="utf-8") as f:
                    found[key] = f.read()
                todo.append((found[key], key))
                break  # the first existing candidate is the one the loader takes
    return found


def source_key(text: str, filename: str, target: str, options: dict[str, Any],
               host: str, imports: dict[str, str]) -> str | None:
    """The key of compiling ``text`` for ``target``, given its ``import_closure``;
    None when an option has no stable text form (an object: the slow path, uncached
    at this level)."""
    from .key import compiler_version

    try:
        opts = canonical(options)
    except TypeError:
        return None
    return sha256(canonical({"format": FORMAT, "text": text, "filename": filename,
                             "imports": imports, "target": target, "options": opts,
                             "version": compiler_version(), "host": host}))


def _path(kind: str, key: str) -> Path:
    return store.root() / kind / key[:2] / f"{key}{INDEX_SUFFIX}"


def _read(kind: str, key: str) -> Any:
    path = _path(kind, key)
    try:
        entry = store.read(key, path)
    except (OSError, store.CorruptEntry):
        return None
    if entry is None:
        return None
    touch(path)  # used: the last to be evicted (limit.py)
    return entry.meta


def _write(kind: str, key: str, data: Any) -> None:
    raw = store.encode(data, b"")
    try:
        # an index file: losing one costs a recompile, so no fsync
        store.atomic_write(_path(kind, key), raw, durable=False)
    except OSError:
        return  # only the next process's start gets slower
    enforce(len(raw))


def _param(p: ParamSpec) -> list[Any]:
    return [p.name, p.is_output, None if p.dtype is None else str(p.dtype),
            None if p.dims is None else list(p.dims)]


def _unparam(row: list[Any]) -> ParamSpec:
    name, is_output, dtype, dims = row
    return ParamSpec(str(name), bool(is_output), None if dtype is None else DTYPE_NAMES[dtype],
                     None if dims is None else tuple(d if isinstance(d, str) else int(d)
                                                     for d in dims))


def store_signatures(key: str, signatures: Sequence[KernelSignature]) -> None:
    _write("sources", key, {"kernels": [[s.name, [_param(p) for p in s.params]]
                                        for s in signatures]})


def load_signatures(key: str) -> list[KernelSignature] | None:
    data = _read("sources", key)
    try:
        return [KernelSignature(str(name), tuple(_unparam(p) for p in params))
                for name, params in data["kernels"]]
    except (TypeError, KeyError, ValueError):
        return None


def spec_key(source: str, kernel: str, shapes: Sequence[tuple[int, ...]],
             dtypes: Sequence[Any], tuning: str) -> str:
    """The key of one specialization of ``kernel`` under the source key ``source``;
    ``tuning``: a fingerprint of the autotuner's records (they pick the gemm config)."""
    return sha256(canonical([source, kernel, [list(s) for s in shapes],
                             [str(d) for d in dtypes], tuning]))


def store_spec(key: str, data: dict[str, Any]) -> None:
    _write("specs", key, data)


def load_spec(key: str) -> dict[str, Any] | None:
    data = _read("specs", key)
    return data if isinstance(data, dict) else None


__all__ = ["INDEX_SUFFIX", "import_closure", "load_signatures", "load_spec", "source_key", "spec_key",
           "store_signatures", "store_spec"]
