"""The one place that picks the kernel of a GEMM (matmul, implicit-GEMM conv).

Order: on sm_90 the Hopper ``wgmma`` + TMA kernel where ``wgmma_gemm.wgmma_plan``
applies (``product_kernels``); else the tensor-core ``mma.sync`` kernel where
``mma_config`` gives a configuration (sm_80+: f16/bf16, i8, tf32 under ``allow_tf32``),
else the FMA tiles (``product_kernel``).
"""

from __future__ import annotations

from dataclasses import replace

from .elementwise import EmittedKernel
from .matmul import ProductSpec, matmul_kernel
from .mma import mma_kernel
from .mma_config import mma_config
from .wgmma_gemm import wgmma_kernel, wgmma_plan


def product_kernels(spec: ProductSpec, sm: int) -> list[tuple[EmittedKernel, str | None]]:
    """The kernels that compute ``spec`` on an ``sm_<sm>`` GPU, each with the plan condition
    under which it launches (None: always): on sm_90 the Hopper kernel where ``wgmma_plan``
    applies -- with symbolic strides only where they suit TMA, and then the kernel
    ``product_kernel`` picks, renamed ``<name>_sm80``, everywhere else."""
    hopper = wgmma_plan(spec, sm)
    if hopper is None:
        return [(product_kernel(spec, sm), None)]
    first = (wgmma_kernel(spec, hopper.a, hopper.b, hopper.tn), hopper.when)
    if hopper.when is None:
        return [first]
    fallback = product_kernel(replace(spec, name=spec.name + "_sm80"), sm)
    return [first, (fallback, f"not ({hopper.when})")]


def product_kernel(spec: ProductSpec, sm: int) -> EmittedKernel:
    """The kernel that computes ``spec`` on an ``sm_<sm>`` GPU."""
    cfg = mma_config(spec, sm)
    if cfg is not None:
        return mma_kernel(spec, cfg)
    return matmul_kernel(spec)
