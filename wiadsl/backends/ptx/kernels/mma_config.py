"""Which tensor-core (``mma.sync``, sm_80+) GEMM a product gets: the instruction and the tiles.

``mma_config(spec, sm)`` is the one decision: None keeps the product on the FMA tiles
(``matmul.py``), otherwise it names the ``mma.sync`` shape and the block tile:

| operands (accumulator) | instruction | k per mma | element bytes |
| --- | --- | --- | --- |
| f16 x f16, bf16 x bf16 (f32) | ``m16n8k16.row.col.f32.{t}.{t}.f32`` | 16 | 2 |
| i8 x i8 (i32) | ``m16n8k32.row.col.s32.s8.s8.s32`` (exact, wraps like ``mad.lo``) | 32 | 1 |
| f32 x f32 (f32), only with ``allow_tf32`` | ``m16n8k8.row.col.f32.tf32.tf32.f32`` | 8 | 4 |

Invariants:
- Every shared-memory row of a ``[mn][k]`` tile is 64 bytes, so the k tile is
  ``64 / element bytes`` (32 halves, 64 bytes, 16 floats) and one stage of a
  ``bm x bn`` block tile is ``(bm + bn) * 64`` bytes whatever the dtype.
- ``BIG`` (128x128, 4 warps of 64x64, 3 stages = 48 KiB, the static shared limit) is
  used unless the grid it gives is known to leave SMs idle (fewer tiles than an A100
  (108) / H100 (132) has SMs: static M, N and batch); then ``SMALL`` (64x64, 4 warps
  of 32x32, 4 stages = 32 KiB). Symbolic shapes get ``BIG``; an implicit-GEMM conv
  (an operand with several row or k coordinates, window guards) ``SMALL``: its
  per-element im2col index math, hoisted out of the k loop by ptxas, would spill
  beside 128 accumulators (20 bytes at 128x128 on sm_80).
- ``b_nk``: B is kept ``[n][k]`` in shared memory when its k stride is 1 (transposed
  weights, conv filters) and always for i8 (``ldmatrix .trans`` moves 16-bit elements,
  so 8-bit B has no ``[k][n]`` fragment path); otherwise ``[k][n]``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ....dtypes import DType
from ..isa import SM_COUNT
from ..options import current
from ..symbolic import Sym
from .matmul import ProductSpec

#: bytes of one shared-memory row of a [mn][k] tile (four 16-byte chunks)
ROW_BYTES = 64


@dataclass(frozen=True)
class MmaOp:
    """One ``mma.sync`` instruction: operand type, accumulator type, k, element bytes."""

    ab: str
    acc: str
    k: int
    elem: int

    @property
    def text(self) -> str:
        return f"mma.sync.aligned.m16n8k{self.k}.row.col.{self.acc}.{self.ab}.{self.ab}.{self.acc}"

    @property
    def integer(self) -> bool:
        return self.acc == "s32"


@dataclass(frozen=True)
class MmaConfig:
    """A block tile ``bm x bn`` of ``warps_m x warps_n`` warps, ``stages`` cp.async stages."""

    op: MmaOp
    bm: int
    bn: int
    warps_m: int
    warps_n: int
    stages: int
    b_nk: bool

    @property
    def bk(self) -> int:
        return ROW_BYTES // self.op.elem

    @property
    def threads(self) -> int:
        return 32 * self.warps_m * self.warps_n

    @property
    def wtm(self) -> int:
        return self.bm // self.warps_m

    @property
    def wtn(self) -> int:
        return self.bn // self.warps_n

    @property
    def mi(self) -> int:
        """m16 tiles per warp."""
        return self.wtm // 16

    @property
    def ni(self) -> int:
        """n8 tiles per warp."""
        return self.wtn // 8

    @property
    def a_bytes(self) -> int:
        return self.bm * ROW_BYTES

    @property
    def b_pitch(self) -> int:
        """Bytes per shared row of B: 64 for [n][k], bn elements for [k][n]."""
        return ROW_BYTES if self.b_nk else self.bn * self.op.elem

    @property
    def stage_bytes(self) -> int:
        return self.a_bytes + self.bn * ROW_BYTES

    @property
    def smem_bytes(self) -> int:
        return self.stages * self.stage_bytes


OPS = {DType.F16: MmaOp("f16", "f32", 16, 2), DType.BF16: MmaOp("bf16", "f32", 16, 2),
       DType.I8: MmaOp("s8", "s32", 32, 1), DType.F32: MmaOp("tf32", "f32", 8, 4)}
#: (bm, bn, warps_m, warps_n, stages)
BIG = (128, 128, 2, 2, 3)
SMALL = (64, 64, 2, 2, 4)


def mma_op(spec: ProductSpec, sm: int, allow_tf32: bool) -> MmaOp | None:
    """The instruction for ``spec``'s operand and accumulator types, if there is one."""
    a, b = spec.a.dtype, spec.b.dtype
    if sm < 80 or a is not b:
        return None
    if a in (DType.F16, DType.BF16) and spec.acc is DType.F32:
        return OPS[a]
    if a is DType.I8 and spec.acc is DType.I32:
        return OPS[a]
    if a is DType.F32 and spec.acc is DType.F32 and allow_tf32:
        return OPS[a]
    return None


def mma_config(spec: ProductSpec, sm: int, allow_tf32: bool | None = None) -> MmaConfig | None:
    """The tensor-core GEMM for ``spec`` on ``sm`` (None: the FMA tiles). ``allow_tf32``
    defaults to the codegen option of the kernel being planned (``options.current``)."""
    tf32 = current().allow_tf32 if allow_tf32 is None else allow_tf32
    op = mma_op(spec, sm, tf32)
    if op is None:
        return None
    b_nk = op.integer or spec.b.k[-1][1] == 1 or len(spec.b.k) > 1
    im2col = not (spec.a.simple() and spec.b.simple())
    bm, bn, wm, wn, stages = SMALL if im2col or not _fills(spec, sm) else BIG
    return MmaConfig(op, bm, bn, wm, wn, stages, b_nk)


def _fills(spec: ProductSpec, sm: int) -> bool:
    """Whether BIG tiles give at least one block per SM (unknown sizes: assume so)."""
    dims: list[Sym] = [spec.m, spec.n, *spec.batch]
    if not all(isinstance(d, int) for d in dims):
        return True
    tiles = -(-spec.m // BIG[0]) * -(-spec.n // BIG[1])  # type: ignore[operator]
    for d in spec.batch:
        tiles *= d  # type: ignore[operator]
    return tiles >= SM_COUNT[90 if sm >= 90 else 80]
