"""The compile cache key: what a compiled kernel depends on, part by part.

``KeyParts`` names each component of the key separately, so ``wiac cache why``
can say which one changed between two entries of a kernel:
- ``ir``: SHA-256 of the canonical text (``print_func``) of the kernel function;
- ``callee @f``: the same for every other function of the module (stdlib and
  user ``func``s the kernel calls, after lowering);
- ``shapes``, ``dtypes``: the input specialization;
- ``target``, ``cpu``: the backend, its triple and toolchain (for the CPU: the
  llvmlite and LLVM versions), and the host CPU name plus its features;
- ``flags``, ``pipeline``: backend options (``opt_level``) and the pass pipeline;
- ``gemm``: the matmul micro-kernel config (autotuned or default);
- ``version``: the compiler itself (``wiadsl.__version__`` and a digest of the
  compiler's sources).

A backend builds its keys (the CPU's: backends/llvm/keys.py); nothing here knows
a backend.

Invariants: the digest is SHA-256 of the components' ``canonical`` text (keys
sorted), so equal parts give equal keys in every process; any change of a
component gives a different key (no component is ever left out of ``components()``).
"""

from __future__ import annotations

import os
from functools import cache
from typing import TYPE_CHECKING

from ..records import field, record
from .store import new_sha256, plain

if TYPE_CHECKING:
    from ..ir.module import ModuleOp

#: Package folders whose sources do not change CPU code (not hashed; the cache
#: stores CPU kernels only).
_NOT_CODEGEN = ("tools", "profile", "tune", "testing", "fuzz", "backends/ptx", "backends/systolic")


def sha256(data: str | bytes) -> str:
    raw = data.encode() if isinstance(data, str) else data
    return new_sha256(raw).hexdigest()


def canonical(value: object) -> str:
    """The text keys are hashed from: one text per value in every process, for the
    JSON-like values ``store.plain`` takes (dict keys sorted, tuples as lists);
    TypeError for anything else. Not ``json.dumps``: importing ``json`` is ~2 ms of
    a ~25 ms warm start."""
    return repr(plain(value, sort_keys=True))


@cache
def compiler_version() -> str:
    """``wiadsl`` version + digest of its code-generating sources (a backend's own
    toolchain, say llvmlite and LLVM, is in its ``target`` component)."""
    from .. import __version__

    return f"wiadsl {__version__} src {_sources_digest()[:16]}"


def _source_files() -> list[tuple[str, str, str]]:
    """(relative name, path, stat text) of every source the generated code depends
    on, sorted by name. Plain ``os.scandir`` and strings: a warm start walks this
    tree (issue 21); ``pathlib`` took 2 ms of it, and each directory entry's own
    ``stat`` is half the cost of an ``os.stat`` of its path. The stat text is the
    file's size, inode and modification time: any edit changes it."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    found: list[tuple[str, str, str]] = []
    todo = [(root, "", (".py",))]
    grammar = os.path.join(os.path.dirname(root), "grammar")
    if os.path.isdir(grammar):
        todo.append((grammar, "grammar", (".lark",)))
    while todo:
        folder, rel_folder, suffixes = todo.pop()
        with os.scandir(folder) as entries:
            for entry in entries:
                rel = f"{rel_folder}/{entry.name}" if rel_folder else entry.name
                if entry.is_dir():
                    if entry.name != "__pycache__" and rel not in _NOT_CODEGEN and suffixes == (".py",):
                        todo.append((entry.path, rel, suffixes))
                elif entry.name.endswith(suffixes):
                    st = entry.stat()
                    found.append((rel, entry.path, f"{st.st_size}\0{st.st_ino}\0{st.st_mtime_ns}"))
    return sorted(found)


def _sources_digest() -> str:
    """SHA-256 over the sources' names and contents. A warm start (issue 21) reads the
    digest from a memo keyed by every file's name, size, inode and modification time,
    so it stats the files instead of reading them; any edit changes the stat key."""
    from . import store

    files = _source_files()
    # four NUL-ended fields a row (no file name holds a NUL): one text per tree
    stats = "".join(f"{rel}\0{stat}\0" for rel, _, stat in files)
    memo = store.root() / "version-memo" / f"{sha256(stats)}.txt"
    try:
        digest = memo.read_text()
        if len(digest) == 64:
            from .limit import touch

            touch(memo)
            return digest
    except OSError:
        pass
    h = new_sha256()
    for rel, path, _ in files:
        with open(path, "rb") as f:
            h.update(rel.encode() + b"\0" + f.read() + b"\0")
    digest = h.hexdigest()
    try:
        store.atomic_write(memo, digest.encode())
    except OSError:
        pass  # the next process hashes the files again
    return digest


@record(frozen=True)
class KeyParts:
    """Every input of one compiled specialization (see the module docstring)."""

    kernel: str
    functions: tuple[tuple[str, str], ...]  #: (function name, digest of its text), kernel first
    shapes: str
    dtypes: str
    target: str
    cpu: str
    flags: str
    pipeline: str
    gemm: str
    version: str = field(default_factory=lambda: compiler_version())  # late-bound: patchable

    def components(self) -> dict[str, str]:
        parts = {"kernel": self.kernel}
        for name, digest in self.functions:
            parts["ir" if name == self.kernel else f"callee @{name}"] = digest
        parts.update(shapes=self.shapes, dtypes=self.dtypes, target=self.target, cpu=self.cpu,
                     flags=self.flags, pipeline=self.pipeline, gemm=self.gemm,
                     version=self.version)
        return parts

    def digest(self) -> str:
        return sha256(canonical(self.components()))

    @staticmethod
    def from_components(parts: dict[str, str]) -> KeyParts:
        """The parts ``components()`` gave (the source-level cache stores those).
        Its ``version`` is today's: a stored key of another compiler never matches."""
        functions = [(parts["kernel"], parts["ir"])]
        functions += [(k[len("callee @"):], v) for k, v in parts.items() if k.startswith("callee @")]
        rebuilt = KeyParts(parts["kernel"], tuple(functions), parts["shapes"], parts["dtypes"],
                           parts["target"], parts["cpu"], parts["flags"], parts["pipeline"],
                           parts["gemm"])
        if rebuilt.components() != parts:
            raise ValueError("stored key parts of another compiler version or format")
        return rebuilt


def function_digests(module: ModuleOp, kernel: str) -> tuple[tuple[str, str], ...]:
    """(name, SHA-256 of canonical text) of every function, the kernel first."""
    from ..ir.printer import print_func

    funcs = sorted(module.funcs, key=lambda f: (f.name != kernel, f.name))
    return tuple((f.name, sha256(print_func(f))) for f in funcs)


def diff_components(old: dict[str, str], new: dict[str, str]) -> list[str]:
    """Names of the components that differ (added, removed or changed), in key order."""
    names = list(new) + [k for k in old if k not in new]
    return [k for k in names if old.get(k) != new.get(k)]
