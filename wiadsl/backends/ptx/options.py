"""Code-generation options of the PTX backend, scoped to one ``plan_kernel`` call.

``emit_ptx(..., fast_math=True)`` (``wiadsl.jit(..., target="cuda", fast_math=True)``)
plans a kernel inside ``using(CodegenOptions(fast_math=True))``; every ``KernelBuilder``
created meanwhile copies the options, so the kernel emitters (spread over several
modules) see them without a flag threaded through every spec.

Invariants:
- Outside ``using`` the options are the defaults (accurate math, no ``.ftz``).
- ``fast_math``: transcendentals are the raw ``ex2/lg2.approx.ftz`` forms (CUDA's
  ``__expf``/``__logf``: a few ulp near 0, subnormal inputs and results flushed to 0);
  without it they are accurate to ~1 ulp through the subnormal range up to the overflow
  thresholds and no instruction carries ``.ftz``.
- ``allow_tf32``: f32 x f32 matmuls may run on tensor cores in tf32 (inputs rounded to
  10 mantissa bits, ``cvt.rna.tf32.f32``; f32 accumulation); without it they stay on
  the exact FMA tiles.
- ``arch``: the target of the plan (``sm_80``...), for instructions only some targets
  have (packed ``f16x2``/``bf16x2`` arithmetic in ``kernels/packed``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from .isa import DEFAULT_ARCH


@dataclass(frozen=True)
class CodegenOptions:
    """Options that change the kernels of a plan (``allow_tf32`` may pick another GEMM)."""

    fast_math: bool = False
    allow_tf32: bool = False
    arch: str = DEFAULT_ARCH


_CURRENT: ContextVar[CodegenOptions | None] = ContextVar("ptx_codegen_options", default=None)


def current() -> CodegenOptions:
    """The options of the kernel being planned now (defaults outside ``using``)."""
    return _CURRENT.get() or CodegenOptions()


@contextmanager
def using(options: CodegenOptions) -> Iterator[None]:
    token = _CURRENT.set(options)
    try:
        yield
    finally:
        _CURRENT.reset(token)
