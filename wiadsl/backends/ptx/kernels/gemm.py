"""The one place that picks the kernel of a GEMM (matmul, implicit-GEMM conv).

Order: the tensor-core ``mma.sync`` kernel where ``mma_config`` gives a configuration
(sm_80+: f16/bf16, i8, tf32 under ``allow_tf32``), else the FMA tiles. An
architecture-specific kernel (an sm_90a ``wgmma`` GEMM) goes in front of these, in
``product_kernel``, falling back to them where it does not apply.
"""

from __future__ import annotations

from .elementwise import EmittedKernel
from .matmul import ProductSpec, matmul_kernel
from .mma import mma_kernel
from .mma_config import mma_config


def product_kernel(spec: ProductSpec, sm: int) -> EmittedKernel:
    """The kernel that computes ``spec`` on an ``sm_<sm>`` GPU."""
    cfg = mma_config(spec, sm)
    if cfg is not None:
        return mma_kernel(spec, cfg)
    return matmul_kernel(spec)
