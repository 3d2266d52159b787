"""The gemm search space (the seed's ``MatmulConfig``, for a CPU) and its pruning.

Axes: MR (rows of the micro-kernel), NV (vectors per row), vector width, KC, MC
and the k-loop unroll. ``prune`` drops configs that cannot run well or at all:
- register pressure: MR x NV accumulators + NV B vectors + 1 broadcast must fit
  the vector registers (16 with AVX2, 32 with AVX-512), or the k loop spills;
- L1: the packed KC x NR panel of B may be at most twice a 32 KiB L1 (it streams
  from L2 in order; the default's is 64 KiB with AVX-512: gemm_config.KC);
- L2: the MC x KC block of A must fit in 512 KiB;
- MC a multiple of MR; blocks no larger than the problem needs (a KC or MC
  beyond the problem's K or M only duplicates a smaller config).

Invariant: every config ``prune`` keeps passes ``GemmConfig.check`` on this host,
and the default config is always kept (it is the baseline).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from ..backends.llvm.gemm import GemmConfig, default_config
from ..backends.llvm.host import host

MR = (1, 2, 3, 4, 6, 8, 12)
NV = (1, 2, 3, 4)
KC = (64, 128, 256, 512)
MC = (24, 48, 96, 192)
UNROLL = (1, 2, 4)
L1_BYTES, L2_BYTES = 32 << 10, 512 << 10


@dataclass(frozen=True)
class GemmShape:
    """One gemm the kernel runs: C[m, n] = A[m, k] B[k, n], ``count`` times."""

    m: int
    n: int
    k: int
    count: int = 1
    itemsize: int = 4


def vector_registers(host_bits: int) -> int:
    return 32 if host_bits >= 512 else 16


def generate(host_bits: int | None = None) -> list[GemmConfig]:
    bits = host_bits or host().vector_bits
    widths = [w for w in (128, 256, 512) if w <= bits]
    return [GemmConfig(mr, nv, w, kc, mc, u)
            for mr, nv, w, kc, mc, u in itertools.product(MR, NV, widths, KC, MC, UNROLL)]


def valid(c: GemmConfig, shapes: list[GemmShape], host_bits: int) -> bool:
    size = max((s.itemsize for s in shapes), default=4)
    lanes = c.vector_bits // (8 * size)
    if c.mr * c.nv + c.nv + 1 > vector_registers(host_bits):
        return False
    if c.kc * c.nv * lanes * size > 2 * L1_BYTES or c.mc * c.kc * size > L2_BYTES:
        return False
    if c.mc % c.mr:
        return False
    if shapes:
        max_k = max(s.k for s in shapes)
        max_m = max(s.m for s in shapes)
        if c.kc > 2 * max(max_k, KC[0]) or c.mc > 2 * max(max_m, MC[0]):
            return False
    try:
        c.check(host_bits)
    except ValueError:
        return False
    return True


def prune(configs: list[GemmConfig], shapes: list[GemmShape],
          host_bits: int | None = None) -> list[GemmConfig]:
    bits = host_bits or host().vector_bits
    kept = [c for c in configs if valid(c, shapes, bits)]
    base = default_config()
    return kept if base in kept else [base, *kept]
