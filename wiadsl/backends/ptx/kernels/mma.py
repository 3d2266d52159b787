"""Tensor-core GEMM for f16/bf16 operands (sm_80+): ``mma.sync.m16n8k16`` with f32 accumulation.

Block tile 64x64, k tile 32, 128 threads = 4 warps in a 2x2 grid; each warp owns
a 32x32 sub-tile = 2 (m16) x 4 (n8) mma tiles, 32 f32 accumulators per thread.

Shared memory (two stages, double-buffered): A as ``As[m][k]`` and B either as
``Bs[n][k]`` (when B's k stride is 1: transposed weights, conv filters) or
``Bs[k][n]``; rows are padded by 8 halves so the 8 row addresses of one
``ldmatrix`` phase fall in distinct banks. Fragments come from
``ldmatrix.x4`` (``.trans`` for ``Bs[k][n]``).

Fragment layouts (PTX ISA, "Matrix fragments for mma.m16n8k16", g = lane/4,
t = lane%4): A a_i at row g + 8*((i/2)%2), col 2t + i%2 + 8*(i/4); B b_i at
row (k) 2t + i%2 + 8*(i/2), col g; C c_i at row g + 8*(i/2), col 2t + i%2.
``ldmatrix.x4`` lane l addresses row l%8 of matrix l/8, and thread l receives
row l/4, columns 2(l%4), 2(l%4)+1 of each matrix — so for A the four matrices
are (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15).

Invariants:
- Tiles are loaded with ``cp.async.cg`` 16-byte chunks (``src-size`` 0 zero-fills
  rows outside the matrix) when the operand is a plain strided matrix whose
  contiguous extent, other stride and offset are static multiples of 8;
  otherwise element by element with predicated ``ld.global.b16`` (zero outside,
  im2col guards for conv). Either way any M, N, K is correct.
- Tile ``t+1`` is loaded into the other stage before tile ``t`` is consumed;
  ``cp.async.wait_group`` then ``bar.sync`` precede every use, and a ``bar.sync``
  after the use precedes the overwrite of that stage.
"""

from __future__ import annotations

from ....diagnostics import WiaError
from ....dtypes import DType
from ..builder import KernelBuilder
from ..isa import float_literal
from .elementwise import EmittedKernel
from .gemm_epilogue import emit_epilogue
from .matmul import ProductSpec, batch_coords, launch_grid, setup
from .mma_tiles import TileLoad, tile_loader

TM, TN, BK, THREADS = 64, 64, 32, 128
PITCH_K = BK + 8          # halves per row of a [mn][k] tile
PITCH_N = TN + 8          # halves per row of a [k][n] tile
MMA_TYPES = {DType.F16: "f16", DType.BF16: "bf16"}


def mma_eligible(spec: ProductSpec, sm: int) -> bool:
    """f16 x f16 or bf16 x bf16 with f32 accumulation, on sm_80 or newer."""
    return (sm >= 80 and spec.acc is DType.F32 and spec.a.dtype is spec.b.dtype
            and spec.a.dtype in MMA_TYPES)


def mma_kernel(spec: ProductSpec) -> EmittedKernel:
    if spec.a.dtype not in MMA_TYPES or spec.b.dtype is not spec.a.dtype:
        raise WiaError(f"mma.sync needs f16 or bf16 operands of one dtype, got "
                       f"{spec.a.dtype} and {spec.b.dtype}")
    ab = MMA_TYPES[spec.a.dtype]
    kb = KernelBuilder(spec.name, max_threads=THREADS)
    params, cg, (cx, cy, _) = setup(kb, spec, TM, TN)
    b_nk = spec.b.k[-1][1] == 1 or len(spec.b.k) > 1
    a_bytes, b_bytes = TM * PITCH_K * 2, (TN * PITCH_K if b_nk else BK * PITCH_N) * 2
    a_s = kb.shared_array("tile_a", "b16", 2 * a_bytes // 2, 16)
    b_s = kb.shared_array("tile_b", "b16", 2 * b_bytes // 2, 16)
    m, n, k = params.sym(spec.m), params.sym(spec.n), params.sym(spec.k)
    tid = kb.special("%tid.x")
    lane, warp, wm, wn, m0, n0 = kb.regs("b32", 6)
    for s in (f"and.b32 {lane}, {tid}, 31", f"shr.u32 {warp}, {tid}, 5",
              f"shr.u32 {wm}, {warp}, 1", f"and.b32 {wn}, {warp}, 1",
              f"shl.b32 {m0}, {cy}, 6", f"shl.b32 {n0}, {cx}, 6"):
        kb.prologue.append(s + ";")
    zc = batch_coords(cg, spec)
    loads = [tile_loader(kb, params, spec.a, zc, tid, m0, TM, False, PITCH_K, spec.batch),
             tile_loader(kb, params, spec.b, zc, tid, n0, TN, not b_nk,
                         PITCH_K if b_nk else PITCH_N, spec.batch)]
    a_lane, b_lane = _lane_offsets(kb, lane, wm, wn, b_nk)
    accs = kb.regs("f32", 32)
    for r in accs:
        kb.emit(f"mov.f32 {r}, {float_literal(0.0, DType.F32)}")
    stage, k0, knext = kb.regs("b32", 3)
    kb.emit(f"mov.u32 {stage}, 0")
    kb.emit(f"mov.u32 {k0}, 0")
    _load_stage(kb, loads, (a_s, b_s), (a_bytes, b_bytes), "0", k0)
    top, done = kb.new_label("ktile"), kb.new_label("ktile_end")
    kb.label(top)
    p = kb.reg("pred")
    kb.emit(f"setp.ge.u32 {p}, {k0}, {k}")
    kb.bra(done, p)
    kb.emit(f"add.u32 {knext}, {k0}, {BK}")
    more, other = kb.reg("pred"), kb.reg("b32")
    kb.emit(f"setp.lt.u32 {more}, {knext}, {k}")
    kb.emit(f"xor.b32 {other}, {stage}, 1")
    last, joined = kb.new_label("last"), kb.new_label("loaded")
    kb.bra(last, more, negate=True)
    _load_stage(kb, loads, (a_s, b_s), (a_bytes, b_bytes), other, knext)
    if any(ld.async_copy for ld in loads):
        kb.emit("cp.async.wait_group 1")
    kb.emit(f"bra.uni {joined}")
    kb.label(last)
    if any(ld.async_copy for ld in loads):
        kb.emit("cp.async.wait_group 0")
    kb.label(joined)
    kb.emit("bar.sync 0")
    _compute(kb, ab, accs, stage, (a_s, b_s), (a_bytes, b_bytes), a_lane, b_lane, b_nk)
    kb.emit("bar.sync 0")
    kb.emit(f"mov.u32 {stage}, {other}")
    kb.emit(f"mov.u32 {k0}, {knext}")
    kb.emit(f"bra.uni {top}")
    kb.label(done)
    g, t = kb.reg("b32"), kb.reg("b32")
    kb.emit(f"shr.u32 {g}, {lane}, 2")
    kb.emit(f"and.b32 {t}, {lane}, 3")
    rbase, cbase = kb.reg("b32"), kb.reg("b32")
    kb.emit(f"mad.lo.u32 {rbase}, {wm}, 32, {m0}")
    kb.emit(f"add.u32 {rbase}, {rbase}, {g}")
    kb.emit(f"mad.lo.u32 {cbase}, {wn}, 32, {n0}")
    kb.emit(f"mad.lo.u32 {cbase}, {t}, 2, {cbase}")
    rows, cols = kb.regs("b32", 4), kb.regs("b32", 8)
    for i in range(4):  # rows: mi*16 + 8h (i = 2*mi + h)
        kb.emit(f"add.u32 {rows[i]}, {rbase}, {16 * (i >> 1) + 8 * (i & 1)}")
    for j in range(8):  # cols: ni*8 + q (j = 2*ni + q)
        kb.emit(f"add.u32 {cols[j]}, {cbase}, {8 * (j >> 1) + (j & 1)}")
    emit_epilogue(cg, spec.epilogue, spec.emap, DType.F32, rows, cols, m, n,
                  lambda i, j: accs[_acc_index(i >> 1, j >> 1, 2 * (i & 1) + (j & 1))])
    return EmittedKernel(kb, params.args, launch_grid(spec, TM, TN), (THREADS, 1, 1), _mma_kind(spec.kind))


def _mma_kind(kind: str) -> str:
    """``matmul`` -> ``matmul(mma)``; ``conv(igemm)`` -> ``conv(igemm,mma)``."""
    return kind[:-1] + ",mma)" if kind.endswith(")") else kind + "(mma)"


def _acc_index(mi: int, ni: int, c: int) -> int:
    return (mi * 4 + ni) * 4 + c


def _lane_offsets(kb: KernelBuilder, lane: str, wm: str, wn: str, b_nk: bool) -> tuple[str, str]:
    """Byte offsets (within a stage) of this lane's ldmatrix row for A (mi=0, ks=0) and B."""
    r8, j, jlo, jhi = kb.regs("b32", 4)
    kb.emit(f"and.b32 {r8}, {lane}, 7")
    kb.emit(f"shr.u32 {j}, {lane}, 3")
    kb.emit(f"and.b32 {jlo}, {j}, 1")
    kb.emit(f"shr.u32 {jhi}, {j}, 1")
    row, a_off = kb.reg("b32"), kb.reg("b32")  # A: row r8 + 8*jlo + 32*wm, k 8*jhi
    kb.emit(f"mad.lo.u32 {row}, {jlo}, 8, {r8}")
    kb.emit(f"mad.lo.u32 {row}, {wm}, 32, {row}")
    kb.emit(f"mul.lo.u32 {a_off}, {row}, {PITCH_K * 2}")
    kb.emit(f"mad.lo.u32 {a_off}, {jhi}, 16, {a_off}")
    b_off, brow = kb.reg("b32"), kb.reg("b32")
    if b_nk:  # Bs[n][k]: n row r8 + 8*jhi + 32*wn, k 8*jlo (non-transposed ldmatrix)
        kb.emit(f"mad.lo.u32 {brow}, {jhi}, 8, {r8}")
        kb.emit(f"mad.lo.u32 {brow}, {wn}, 32, {brow}")
        kb.emit(f"mul.lo.u32 {b_off}, {brow}, {PITCH_K * 2}")
        kb.emit(f"mad.lo.u32 {b_off}, {jlo}, 16, {b_off}")
    else:  # Bs[k][n]: k row r8 + 8*jlo, n 8*jhi + 32*wn (ldmatrix .trans)
        kb.emit(f"mad.lo.u32 {brow}, {jlo}, 8, {r8}")
        kb.emit(f"mul.lo.u32 {b_off}, {brow}, {PITCH_N * 2}")
        kb.emit(f"mad.lo.u32 {b_off}, {jhi}, 16, {b_off}")
        kb.emit(f"mad.lo.u32 {b_off}, {wn}, 64, {b_off}")
    return a_off, b_off


def _load_stage(kb: KernelBuilder, loads: list[TileLoad], bases: tuple[str, str],
                sizes: tuple[int, int], stage: str, k0: str) -> None:
    for ld, base, size in zip(loads, bases, sizes, strict=True):
        addr = kb.reg("b32")
        kb.emit(f"mov.u32 {addr}, {base}")
        if stage != "0":
            kb.emit(f"mad.lo.u32 {addr}, {stage}, {size}, {addr}")
        ld.emit(addr, k0)
    if any(ld.async_copy for ld in loads):
        kb.emit("cp.async.commit_group")


def _compute(kb: KernelBuilder, ab: str, accs: list[str], stage: str, bases: tuple[str, str],
             sizes: tuple[int, int], a_lane: str, b_lane: str, b_nk: bool) -> None:
    """Two k16 steps of 8 mma each: fragments by ldmatrix.x4 from this stage's tiles."""
    pa, pb = kb.reg("b32"), kb.reg("b32")
    for ptr, base, size, lane_off in ((pa, bases[0], sizes[0], a_lane), (pb, bases[1], sizes[1], b_lane)):
        kb.emit(f"mov.u32 {ptr}, {base}")
        kb.emit(f"mad.lo.u32 {ptr}, {stage}, {size}, {ptr}")
        kb.emit(f"add.u32 {ptr}, {ptr}, {lane_off}")
    trans = "" if b_nk else ".trans"
    for ks in range(BK // 16):
        afr = []
        for mi in range(2):
            regs = kb.regs("b32", 4)
            off = mi * 16 * PITCH_K * 2 + ks * 32
            kb.emit(f"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{{', '.join(regs)}}}, [{pa}+{off}]")
            afr.append(regs)
        bfr = []
        for pair in range(2):
            regs = kb.regs("b32", 4)
            off = (pair * 16 * PITCH_K * 2 + ks * 32) if b_nk else (ks * 16 * PITCH_N * 2 + pair * 32)
            kb.emit(f"ldmatrix.sync.aligned.m8n8.x4{trans}.shared.b16 {{{', '.join(regs)}}}, [{pb}+{off}]")
            # Bs[n][k]: matrices (n0-7,k0-7) (n0-7,k8-15) (n8-15,k0-7) (n8-15,k8-15);
            # Bs[k][n] (.trans): (k0-7,n0-7) (k8-15,n0-7) (k0-7,n8-15) (k8-15,n8-15):
            # either way registers 0-1 are {b0b1, b2b3} of n-tile 2*pair, 2-3 of 2*pair+1
            bfr += [regs[0:2], regs[2:4]]
        for mi in range(2):
            for ni in range(4):
                d = accs[_acc_index(mi, ni, 0):_acc_index(mi, ni, 0) + 4]
                kb.emit(f"mma.sync.aligned.m16n8k16.row.col.f32.{ab}.{ab}.f32 "
                        f"{{{', '.join(d)}}}, {{{', '.join(afr[mi])}}}, "
                        f"{{{', '.join(bfr[ni])}}}, {{{', '.join(d)}}}")
