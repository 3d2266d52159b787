"""Autotuner measurements kept in the cache folder, one file per config.

A record is one (op, shape, dtype, CPU): the kernel's canonical IR (the op and
everything it calls), its input shapes and dtypes, and the host CPU. Its folder
``v1/tune/<record id>/`` holds one JSON file per measured config
(``<config label>.json``: the config, median ms, op kind, when). Adding a config
writes a new file and never rewrites the others, so earlier measurements are
kept; two tuners writing at once cannot lose each other's files (atomic writes).

Invariants: ``best(record)`` is the config with the lowest measured median among
the files that parse and hold a config valid on this host; a damaged file is
ignored (never crashes a compile).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..backends.llvm.gemm_config import GemmConfig
from ..backends.llvm.host import host
from ..cache import store as cache_store
from ..cache.key import canonical, function_digests, sha256
from ..records import record

if TYPE_CHECKING:  # a warm start (issue 21) looks records up without the IR's modules
    from ..ir.module import ModuleOp

#: Ops that lower to ``loop.gemm`` (the tunable micro-kernel).
GEMM_OPS = {"tensor.matmul": "matmul", "tensor.fused_matmul": "matmul",
            "tensor.conv2d": "conv2d", "tensor.fused_conv2d": "conv2d"}


@record(frozen=True)
class Measurement:
    config: GemmConfig
    ms: float
    op: str
    when: float


def gemm_ops(module: ModuleOp) -> list[str]:
    """The kinds ('matmul', 'conv2d') of every gemm-lowered op, in walk order."""
    return [GEMM_OPS[op.name] for f in module.funcs for op in f.walk() if op.name in GEMM_OPS]


def record_id(module: ModuleOp, kernel: str, shapes: Sequence[tuple[int, ...]],
              dtypes: Sequence[np.dtype]) -> str:
    h = host()
    return sha256(canonical({"ir": function_digests(module, kernel),
                             "shapes": [list(s) for s in shapes],
                             "dtypes": [str(np.dtype(d)) for d in dtypes],
                             "cpu": f"{h.cpu} {h.features}"}))[:32]


def record_dir(rid: str) -> Path:
    return cache_store.root() / "tune" / rid


def records_fingerprint() -> str:
    """A digest of every measurement file's name, size and time: the source-level
    cache (cache/sources.py) keys a specialization's gemm config on it, so a
    new measurement makes the next process look the config up again."""
    folder = cache_store.root() / "tune"
    if not folder.is_dir():
        return "none"
    rows = []
    for path in sorted(folder.glob("*/*.json")):
        try:
            st = path.stat()
        except OSError:
            continue
        rows.append(f"{path.parent.name}/{path.name} {st.st_size} {st.st_mtime_ns}")
    return sha256("\n".join(rows))


def save(rid: str, config: GemmConfig, ms: float, op: str, kernel: str) -> None:
    import json  # measurements stay readable text; a warm start never writes one

    data = {"config": config.as_dict(), "ms": ms, "op": op, "kernel": kernel, "when": time.time()}
    cache_store.atomic_write(record_dir(rid) / f"{config.label()}.json",
                             json.dumps(data, sort_keys=True).encode())


def measurements(rid: str) -> list[Measurement]:
    """Every readable measurement of the record (a damaged file is skipped)."""
    folder = record_dir(rid)
    out: list[Measurement] = []
    if not folder.is_dir():
        return out
    import json  # only where the autotuner has measured this kernel

    bits = host().vector_bits
    for path in sorted(folder.glob("*.json")):
        try:
            data = json.loads(path.read_bytes())
            config = GemmConfig(**{k: int(v) for k, v in data["config"].items()})
            config.check(bits)
            out.append(Measurement(config, float(data["ms"]), str(data["op"]), float(data["when"])))
        except (OSError, ValueError, TypeError, KeyError):
            continue
    return out


def best(rid: str) -> Measurement | None:
    found = measurements(rid)
    return min(found, key=lambda m: m.ms) if found else None


def tuned_config(module: ModuleOp, kernel: str, shapes: Sequence[tuple[int, ...]],
                 dtypes: Sequence[np.dtype]) -> GemmConfig | None:
    """The best measured config of this specialization, or None (untuned, no gemm,
    or the disk cache is off)."""
    from ..cache.entries import disk_enabled

    if not disk_enabled() or not gemm_ops(module):
        return None
    found = best(record_id(module, kernel, shapes, dtypes))
    return found.config if found else None
