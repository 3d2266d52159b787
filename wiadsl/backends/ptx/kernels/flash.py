"""Fused (flash) attention: what the two flash kernels share, and the choice between them.

``O[z] = epilogue(softmax(mask(scale(Q[z] @ K[z]^T))) @ V[z])`` for every batch index
z, in one kernel that never stores the T x S scores (FlashAttention-2): a block
owns a tile of query rows and walks the key/value tiles, keeping per row the
running max ``m`` and sum ``l`` of ``exp(x - m)``; when the max grows by a tile,
the sum and the output accumulators are rescaled by ``exp(m_old - m_new)``, and
the output is divided by ``l`` once at the end.

| kernel | when | module |
| --- | --- | --- |
| tensor cores | f16/bf16 Q, K, V on sm_80+ | ``flash_mma`` (``mma.sync.m16n8k16``, P in registers) |
| FMA | f32 (exact f32 arithmetic, no tf32), or 16-bit on older targets | ``flash_fma`` |

Head dims ``d`` (of Q and K) and ``e`` (of V) are compile-time constants in
``1..MAX_HEAD``; both kernels pad them to a multiple of 16 with zeros.

Numerics (both kernels): scores ``acc * f`` in f32, with ``f = scale`` ("mul") or
``f = 1 / scale`` rounded once ("div": one ulp from dividing each score); masked
scores are -inf, so ``exp`` gives exactly 0; ``exp`` is the emitter's accurate one
(``ex2.approx`` only under fast math); a row whose every key is masked gets
``0 / 0``, NaN, as NumPy's softmax of an all -inf row.

Invariants:
- The causal mask keeps key j for query i iff ``j <= i + causal``; key tiles past
  the last row's limit are never loaded (``key_end``), so a block of early queries
  does a fraction of the work.
- Row and key coordinates are u32; the mask limits are computed in s64 and clamped
  to the tile before the per-element s32 compare, so no extent or offset wraps.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from ....diagnostics import WiaError
from ....dtypes import DType
from ..builder import KernelBuilder
from ..codegen import ExprCodegen, IndexGroup, KernelParams
from ..expr import LoopSpec, ScalarArg
from ..isa import float_literal
from ..symbolic import Sym, call, product
from .common import TileGrid
from .elementwise import EmittedKernel
from .flash_softmax import NEG_INF, OnlineSoftmax
from .flash_tiles import THREADS, TileCopy, tile_copy
from .gemm_epilogue import EpilogueMap
from .operands import GemmOperand, OperandLoader

R = TypeVar("R")
MAX_HEAD = 128
#: ``.maxnreg`` of both kernels: 3 blocks of 128 threads fit an SM's 64K registers. Left
#: to itself under ``.maxntid``, ptxas picked 96-128 registers and spilled (f32 d = 16,
#: e = 128; f16 d = e = 64 with static T, S), though 130-165 suffice.
MAX_REGS = 168


@dataclass(frozen=True)
class AttentionSpec:
    """One fused attention over batch ``batch``: Q [T, d], K [S, d], V [S, e] per entry.

    ``q`` has rows T and depth d, ``k`` rows S and depth d (K, not K^T), ``v`` rows S
    and depth e. ``scale``: ("div" | "mul", a host scalar or a literal), or None.
    ``epilogue`` is the output's loop spec over (*batch, T, e): its ``Acc`` is the
    normalized attention output (f32)."""

    name: str
    batch: tuple[Sym, ...]
    t: Sym
    s: Sym
    d: int
    e: int
    q: GemmOperand
    k: GemmOperand
    v: GemmOperand
    scale: tuple[str, ScalarArg | float] | None
    causal: Sym | None
    epilogue: LoopSpec
    emap: EpilogueMap


def flash_supported(dtype: DType, d: Sym, e: Sym) -> bool:
    """Whether a flash kernel takes these inputs (else the planner keeps 3 kernels)."""
    return dtype in (DType.F16, DType.BF16, DType.F32) and \
        all(isinstance(x, int) and 1 <= x <= MAX_HEAD for x in (d, e))


def flash_kernel(spec: AttentionSpec, sm: int) -> EmittedKernel:
    """The tensor-core kernel for 16-bit inputs on sm_80+, else the FMA kernel."""
    from .flash_fma import fma_attention
    from .flash_mma import mma_attention

    if not flash_supported(spec.q.dtype, spec.d, spec.e):
        raise WiaError(f"no flash-attention kernel for {spec.q.dtype} with head dims "
                       f"{spec.d}, {spec.e}")
    if spec.q.dtype in (DType.F16, DType.BF16) and sm >= 80:
        return mma_attention(spec)
    return fma_attention(spec)


def pad16(n: int) -> int:
    return (n + 15) // 16 * 16


@dataclass
class TilePair:
    """The K and V copies of one key tile: stage s at ``base + s * stage_bytes`` holds
    K, then V at ``k_bytes``; one ``cp.async`` group per tile when either is async."""

    kb: KernelBuilder
    k: TileCopy
    v: TileCopy
    base: str
    keys: int
    k_bytes: int
    stage_bytes: int

    @property
    def use_async(self) -> bool:
        return self.k.use_async or self.v.use_async

    def load(self, stage: str, key0: str) -> None:
        """K and V rows ``key0 ..`` into the stage at address ``stage``."""
        self.k.emit(stage, key0)
        vbase = self.kb.reg("b32")
        self.kb.emit(f"add.u32 {vbase}, {stage}, {self.k_bytes}")
        self.v.emit(vbase, key0)
        if self.use_async:
            self.kb.emit("cp.async.commit_group")


class Frame(OnlineSoftmax):
    """The parts of a flash kernel that do not depend on how it multiplies.

    Sets up parameters, the epilogue's codegen, the block indices (x: query tile,
    z: batch entry), the operand loaders, ``row0`` (the block's first query row),
    the scale factor and the key range; ``limit(row)`` gives a row's last kept key."""

    def __init__(self, spec: AttentionSpec, kb: KernelBuilder, rows: int):
        self.spec, self.kb, self.rows = spec, kb, rows
        self.params = params = KernelParams(kb)
        epi = spec.epilogue
        self.cg = cg = ExprCodegen(kb, params, epi.inputs, epi.scalars, epi.domain)
        cg.outputs_args = [t for _, t in epi.outputs]
        for _, t in epi.outputs:
            params.buffer(t.buffer)
        self.grid = TileGrid(call("cdiv", spec.t, rows), 1, product(list(spec.batch)))
        bx, _, bz = self.grid.block_ids(kb, params)
        cg.set_group(0, IndexGroup(spec.emap.batch_axes, spec.emap.batch_dims, bz))
        coords = [cg.coord(a) for a in spec.emap.batch_axes]
        self.loaders = [OperandLoader(kb, params, op, coords, spec.batch)
                        for op in (spec.q, spec.k, spec.v)]
        self.t = params.sym(spec.t)
        self.s = params.sym(spec.s)
        self.tid = kb.special("%tid.x")
        self.row0 = kb.reg("b32")
        kb.emit(f"mul.lo.u32 {self.row0}, {bx}, {rows}")
        self.factor = self._factor()
        self.key_end = self._key_end()

    def stage_tiles(self, store_type: str, keys: int, q: tuple[int, int], k: tuple[int, int],
                    v: tuple[int, int]) -> tuple[TileCopy, TilePair]:
        """The shared memory of the key loop, one array: two stages of ``keys`` K rows then
        ``keys`` V rows, (columns, pitch) ``k`` and ``v`` elements of ``store_type`` ("f32" or
        raw "b16"); the Q tile, ``rows`` x (columns, pitch) ``q``, is staged in stage 1's
        region (``stage_q``), which is made large enough for it. Returns (the Q copy, the
        K and V copies)."""
        kb, elem = self.kb, 2 if store_type == "b16" else 4
        k_bytes, v_bytes, q_bytes = keys * k[1] * elem, keys * v[1] * elem, self.rows * q[1] * elem
        stage_bytes = k_bytes + v_bytes
        smem = kb.shared_array("flash_smem", store_type,
                               (stage_bytes + max(stage_bytes, q_bytes)) // elem)
        base = kb.reg("b32")
        kb.emit(f"mov.u32 {base}, {smem}")
        lq, lk, lv = self.loaders
        q_copy, k_copy, v_copy = (
            tile_copy(kb, ld, self.tid, rows, cols, pitch, store_type, self.cg.load)
            for ld, rows, (cols, pitch) in ((lq, self.rows, q), (lk, keys, k), (lv, keys, v)))
        return q_copy, TilePair(kb, k_copy, v_copy, base, keys, k_bytes, stage_bytes)

    def launch(self, kind: str) -> EmittedKernel:
        return EmittedKernel(self.kb, self.params.args, self.grid.launch(), (THREADS, 1, 1), kind)

    def _factor(self) -> str | None:
        """The f32 register scores are multiplied by (None: no scale)."""
        if self.spec.scale is None:
            return None
        how, value = self.spec.scale
        kb, out = self.kb, self.kb.reg("f32")
        if isinstance(value, ScalarArg):  # of the scores' dtype: an f32 parameter
            reg = self.params.scalar(str(value.value), value.dtype)
        else:
            reg = float_literal(float(value), DType.F32)
        if how == "div":
            kb.emit(f"div.rn.f32 {out}, 0f3F800000, {reg}")
        else:
            kb.emit(f"mov.f32 {out}, {reg}")
        return out

    def _causal(self) -> str | None:
        """The mask offset ``c`` as an s64 register (None: no mask)."""
        if self.spec.causal is None:
            return None
        return self.params.sym(self.spec.causal, "s64")

    def _key_end(self) -> str:
        """One past the last key any row of this block keeps: S, or with the mask
        ``clamp(row0 + rows + c, 0, S)`` (a block of early queries stops early)."""
        kb, c = self.kb, self._causal()
        if c is None:
            return self.s
        wide, out = kb.reg("b64"), kb.reg("b32")
        kb.emit(f"cvt.u64.u32 {wide}, {self.row0}")
        kb.emit(f"add.s64 {wide}, {wide}, {self.rows}")
        kb.emit(f"add.s64 {wide}, {wide}, {c}")
        kb.emit(f"min.s64 {wide}, {wide}, {self.u64(self.s)}")
        kb.emit(f"max.s64 {wide}, {wide}, 0")
        kb.emit(f"cvt.u32.u64 {out}, {wide}")
        return out

    def limit(self, row: str) -> str:
        """The last key query ``row`` keeps, ``min(S - 1, row + c)``, as an s64 register
        (-1 or less: none; S = 0 gives -1)."""
        kb, c = self.kb, self._causal()
        out, s64 = kb.reg("b64"), kb.reg("b64")
        kb.emit(f"sub.s64 {s64}, {self.u64(self.s)}, 1")
        if c is None:
            return s64
        kb.emit(f"cvt.u64.u32 {out}, {row}")
        kb.emit(f"add.s64 {out}, {out}, {c}")
        kb.emit(f"min.s64 {out}, {out}, {s64}")
        return out

    def u64(self, x: str) -> str:
        """A u32 register or immediate as a 64-bit operand."""
        if not x.startswith("%"):
            return x
        out = self.kb.reg("b64")
        self.kb.emit(f"cvt.u64.u32 {out}, {x}")
        return out

    def remaining(self, limit: str, first_key: str, span: int) -> str:
        """``clamp(limit - first_key, -1, span)`` as s32: the tile position of the last
        kept key seen from ``first_key`` (a key at offset o is kept iff o <= it)."""
        kb, wide, out = self.kb, self.kb.reg("b64"), self.kb.reg("b32")
        kb.emit(f"cvt.u64.u32 {wide}, {first_key}")
        kb.emit(f"sub.s64 {wide}, {limit}, {wide}")
        kb.emit(f"min.s64 {wide}, {wide}, {span}")
        kb.emit(f"max.s64 {wide}, {wide}, -1")
        kb.emit(f"cvt.u32.u64 {out}, {wide}")
        return out

    # ------------------------------------------------------------ the key loop
    def stage_q(self, q: TileCopy, tiles: TilePair, read: Callable[[str], R]) -> R:
        """Copy the block's Q rows into stage 1's region and key tile 0 into stage 0 (two
        groups when async), then ``read(stage 1 address)`` Q into registers between two
        barriers: the first makes Q visible, the second ends every read of it before the
        key loop refills stage 1."""
        kb = self.kb
        stage1, zero = kb.reg("b32"), kb.reg("b32")
        kb.emit(f"add.u32 {stage1}, {tiles.base}, {tiles.stage_bytes}")
        q.emit(stage1, self.row0)
        if q.use_async:
            kb.emit("cp.async.commit_group")
        kb.emit(f"mov.u32 {zero}, 0")
        tiles.load(tiles.base, zero)
        if q.use_async:
            kb.emit(f"cp.async.wait_group {1 if tiles.use_async else 0}")
        kb.emit("bar.sync 0")
        out = read(stage1)
        kb.emit("bar.sync 0")
        return out

    def key_loop(self, tiles: TilePair, body: Callable[[str, str], None]) -> None:
        """``body(stage address, first key)`` for every key tile below ``key_end``, with
        tile 0 already copied into stage 0 (``TilePair.load``): the next tile is copied
        into the other stage first; ``cp.async.wait_group`` 1 (0 for the last tile) then
        ``bar.sync`` make this tile's chunks visible (plain copies were made visible by
        the previous iteration's closing barrier); the closing ``bar.sync`` ends every
        read of this stage before the next iteration refills it."""
        kb = self.kb
        stage, j0, jn, cur, other, nxt = kb.regs("b32", 6)
        kb.emit(f"mov.u32 {stage}, 0")
        kb.emit(f"mov.u32 {j0}, 0")
        top, done = kb.new_label("key_tile"), kb.new_label("key_tile_end")
        kb.label(top)
        p, more = kb.reg("pred"), kb.reg("pred")
        kb.emit(f"setp.ge.u32 {p}, {j0}, {self.key_end}")
        kb.bra(done, p)
        kb.emit(f"add.u32 {jn}, {j0}, {tiles.keys}")
        kb.emit(f"setp.lt.u32 {more}, {jn}, {self.key_end}")
        kb.emit(f"xor.b32 {other}, {stage}, 1")
        last, loaded = kb.new_label("last_tile"), kb.new_label("tile_loaded")
        kb.bra(last, more, negate=True)
        kb.emit(f"mad.lo.u32 {nxt}, {other}, {tiles.stage_bytes}, {tiles.base}")
        tiles.load(nxt, jn)
        if tiles.use_async:
            kb.emit("cp.async.wait_group 1")
        kb.emit(f"bra.uni {loaded}")
        kb.label(last)
        if tiles.use_async:
            kb.emit("cp.async.wait_group 0")
        kb.label(loaded)
        if tiles.use_async:
            kb.emit("bar.sync 0")
        kb.emit(f"mad.lo.u32 {cur}, {stage}, {tiles.stage_bytes}, {tiles.base}")
        body(cur, j0)
        kb.emit("bar.sync 0")  # every warp is done with this stage before it is refilled
        kb.emit(f"mov.u32 {stage}, {other}")
        kb.emit(f"mov.u32 {j0}, {jn}")
        kb.emit(f"bra.uni {top}")
        kb.label(done)


__all__ = ["AttentionSpec", "Frame", "MAX_HEAD", "NEG_INF", "TilePair", "flash_kernel",
           "flash_supported", "pad16"]
