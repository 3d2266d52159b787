"""The CPU backend's compile cache keys (``cache.key.KeyParts``): a kernel
specialization's, and a shared helper's.

What the native code depends on beyond the IR and the options: the target (the
triple and the toolchain that generates the code: llvmlite and its LLVM) and the
host CPU with its features (``host.py``; ``WIADSL_ISA`` lowers them). Both are
part of every key here, so a cache shared by machines or by installs never hands
one of them another's code.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ...cache.entries import get_or_compile
from ...cache.key import KeyParts, canonical, function_digests, sha256
from ...cache.log import Stages
from .host import host, llvm_host

if TYPE_CHECKING:
    from ...ir.module import ModuleOp


def toolchain() -> str:
    """The code generator's versions: llvmlite's and its LLVM's (from the host
    record: a warm start keys on them without importing llvmlite)."""
    found = llvm_host()
    return f"llvmlite {found.llvmlite_version} LLVM {found.llvm_version}"


def target_text() -> str:
    """The key's ``target`` component: the backend, its triple and toolchain."""
    return f"cpu {host().triple} {toolchain()}"


def cpu_text() -> str:
    """The key's ``cpu`` component: the CPU code is built for, and its features."""
    h = host()
    return f"{h.cpu} {h.features}"


def cpu_key_parts(module: ModuleOp, kernel: str, shapes: Sequence[tuple[int, ...]],
                  dtypes: Sequence[np.dtype], level: int, pipeline: str, gemm: str) -> KeyParts:
    """The key of ``kernel`` of the (unoptimized) ``module`` on the CPU backend."""
    return KeyParts(
        kernel=kernel,
        functions=function_digests(module, kernel),
        shapes=canonical([list(s) for s in shapes]),
        dtypes=",".join(str(np.dtype(d)) for d in dtypes),
        target=target_text(),
        cpu=cpu_text(),
        flags=f"opt_level={level}",
        pipeline=pipeline,
        gemm=gemm,
    )


def cached_object(name: str, identity: dict[str, Any], build: Callable[[], bytes]) -> bytes:
    """Object code of a helper (say, a gemm driver shared by many kernels) whose code
    depends only on ``identity``, the target, the CPU and the compiler version:
    from memory, from disk, or ``build()`` (then stored). Same guarantees as
    ``get_or_compile``."""
    text = canonical(identity)
    parts = KeyParts(kernel=name, functions=((name, sha256(text)),), shapes="", dtypes="",
                     target=target_text(), cpu=cpu_text(), flags="helper",
                     pipeline="helper", gemm="")

    def compile_fn(stages: Stages) -> tuple[bytes, dict[str, Any]]:
        with stages.stage("build"):
            return build(), {"helper": text}
    obj, _ = get_or_compile(parts, compile_fn, lambda raw, meta: raw, exclusive=False)
    return obj


__all__ = ["cached_object", "cpu_key_parts", "cpu_text", "target_text", "toolchain"]
