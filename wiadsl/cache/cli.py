"""``wiac cache info|clear|why KERNEL``: the compile cache as text for the CLI.

Each function returns the text to print (the CLI owns printing and exit codes):
- ``cache_info()``: the folder, entry count and size, entries per kernel,
  damaged entries, autotuner records and this process's counters;
- ``cache_clear()``: removes every entry, tuning record and machine probe under
  the cache folder (only files this cache writes) and says how much it freed;
- ``cache_why(kernel)``: which key components differ between the newest entry
  of ``kernel`` and the entry made before it ("why did it recompile?").

Invariant: these functions only read or delete under ``store.root()``;
they never compile anything.
"""

from __future__ import annotations

import shutil
import time
from collections import Counter
from typing import Any

from . import store
from .entries import STATS
from .key import diff_components
from .sources import INDEX_SUFFIX

#: Components shown with their old and new values (the others are digests).
_READABLE = ("shapes", "dtypes", "target", "cpu", "flags", "pipeline", "gemm", "version")


def _entries_of(kernel: str | None = None) -> list[dict[str, Any]]:
    metas = [e.meta | {"key": e.key} for _, e in store.iter_entries() if e is not None]
    return [m for m in metas if kernel is None or m.get("kernel") == kernel]


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def cache_info() -> str:
    root = store.root()
    files = [p for p in root.rglob("*") if p.is_file()] if root.is_dir() else []
    entries = list(store.iter_entries())
    good = [e for _, e in entries if e is not None]
    per_kernel = Counter(e.meta.get("kernel", "?") for e in good)
    tune = root / "tune"
    records = [d for d in tune.iterdir() if d.is_dir()] if tune.is_dir() else []
    lines = [f"cache folder: {store.cache_dir()}",
             f"entries: {len(good)} compiled kernels, {_size(sum(p.stat().st_size for p in files))} "
             f"on disk in {len(files)} files",
             f"damaged entries: {len(entries) - len(good)} (recompiled when next used)",
             f"size limit: {_limit_text()} (WIADSL_CACHE_MAX; least recently used evicted first)"]
    for name, count in sorted(per_kernel.items()):
        lines.append(f"  {name}: {count} specialization{'s' * (count != 1)}")
    sources = len(list((root / "sources").glob(f"*/*{INDEX_SUFFIX}")))
    specs = len(list((root / "specs").glob(f"*/*{INDEX_SUFFIX}")))
    lines.append(f"source index: {sources} sources, {specs} specializations "
                 "(a warm start finds these without compiling)")
    configs = sum(len(list(d.glob("*.json"))) for d in records)
    lines.append(f"autotuner records: {len(records)} (op, shape, dtype, CPU), {configs} measured configs")
    machine = root / "machine"
    probes = len(list(machine.glob("*.json"))) if machine.is_dir() else 0
    lines.append(f"machine probes: {probes}")
    lines.append("this process: " + ", ".join(f"{k}={v}" for k, v in STATS.as_dict().items()))
    return "\n".join(lines)


def cache_clear() -> str:
    root = store.root()
    if not root.is_dir():
        return f"cache folder {store.cache_dir()} is empty"
    files = [p for p in root.rglob("*") if p.is_file()]
    freed = sum(p.stat().st_size for p in files)
    shutil.rmtree(root, ignore_errors=True)
    return f"removed {len(files)} files ({_size(freed)}) from {store.cache_dir()}"


def _limit_text() -> str:
    from .limit import cache_limit

    limit = cache_limit()
    return _size(limit) if limit > 0 else "none"


def cache_prune(size: str | None = None) -> str:
    """Evict least recently used files down to ``size`` (else the configured limit)."""
    from .limit import cache_limit, parse_size, prune

    limit = parse_size(size, "wiac cache prune SIZE") if size is not None else cache_limit()
    if limit <= 0:
        return "no size limit (WIADSL_CACHE_MAX=0): nothing pruned"
    report = prune(limit, low_water=1.0)
    return (f"removed {report.removed} files ({_size(report.freed)}); "
            f"{_size(report.kept)} of compiled code kept, limit {_size(limit)}")


def cache_why(kernel: str) -> str:
    metas = sorted(_entries_of(kernel), key=lambda m: m.get("created", 0.0))
    if not metas:
        return f"no cache entries for kernel '{kernel}' in {store.cache_dir()}"
    new = metas[-1]
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(new.get("created", 0)))
    head = f"kernel '{kernel}': newest entry {new['key'][:12]} ({when})"
    if len(metas) == 1:
        return f"{head}\nonly one entry: it was the first compile of this kernel"
    old = metas[-2]
    changed = diff_components(old.get("components", {}), new.get("components", {}))
    lines = [head, f"previous entry {old['key'][:12]}; changed: {', '.join(changed) or 'nothing'}"]
    for name in changed:
        before = old.get("components", {}).get(name)
        after = new.get("components", {}).get(name)
        if name in _READABLE:
            lines.append(f"  {name}: {before} -> {after}")
        elif before is None or after is None:
            lines.append(f"  {name}: {'added' if before is None else 'removed'}")
        else:
            lines.append(f"  {name}: canonical IR changed ({before[:12]} -> {after[:12]})")
    return "\n".join(lines)
