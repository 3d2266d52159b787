"""Tensor-core GEMM (sm_80+): ``mma.sync`` + ``ldmatrix`` + a multistage ``cp.async`` pipeline.

The block tile, warp tiles, stages and instruction come from ``mma_config`` (f16/bf16
``m16n8k16``, i8 ``m16n8k32``, tf32 ``m16n8k8``; 128x128 or 64x64 blocks of 4 warps).
Each warp owns a ``wtm x wtn`` sub-tile: ``mi`` (m16) x ``ni`` (n8) mma tiles, 4
accumulators each. Shared memory holds ``stages`` stages of ``[A tile | B tile]``,
XOR-swizzled (``mma_smem``), A as ``[m][k]`` and B as ``[n][k]`` or ``[k][n]``.

Fragments (PTX ISA "Matrix fragments for mma.m16n8k*", g = lane/4, t = lane%4). One
k step reads 32 bytes of each 64-byte shared row (k16 halves, k32 bytes, k8 floats):
``ldmatrix.x4`` lane l addresses row l%8 of matrix l/8 and receives row l/4, bytes
4(l%4)..4(l%4)+3 of each 8x16-byte matrix, which for A = (rows 0-7, bytes 0-15),
(rows 8-15, 0-15), (rows 0-7, 16-31), (rows 8-15, 16-31) are exactly a0..a3 of every
type (two halves, four s8 or one tf32 per register); B ``[n][k]`` the same way gives
{b0, b1} of two n8 tiles. B ``[k][n]``: 16-bit types use ``ldmatrix .trans``; tf32
reads its two words per n8 tile with ``ld.shared.b32`` (no 32-bit transpose exists).
tf32 fragments are rounded with ``cvt.rna.tf32.f32`` before each mma.

Pipeline (CUTLASS's multistage scheme), KT = ceil(K / bk) k tiles, S stages:
- prologue: tiles 0 .. S-2 are issued into stages 0 .. S-2, one commit group each
  (a group past KT is committed empty, so group g always holds tile g);
- iteration kt: ``cp.async.wait_group S-2`` (this thread's copies of tile kt have
  landed), ``bar.sync`` (everyone's have; everyone finished iteration kt-1, which read
  stage (kt-1) % S), issue tile kt+S-1 into that stage and commit, compute tile kt;
- after the loop only empty groups are pending; the epilogue's ``bar.sync`` orders
  the last reads of the stages before it reuses their memory.
Element-path loads (``mma_tiles``) are plain stores issued at the same point, so the
same barrier orders them. Any M, N, K is correct: tiles are zero filled outside.
"""

from __future__ import annotations

from dataclasses import dataclass

from ....dtypes import DType
from ..builder import KernelBuilder
from ..isa import float_literal
from .common import StridedLoop
from .elementwise import EmittedKernel
from .gemm_epilogue import emit_epilogue
from .matmul import ProductSpec, batch_coords, launch_grid, setup
from .mma_config import ROW_BYTES, MmaConfig
from .mma_epilogue import staged_epilogue, vector_epilogue_ok
from .mma_smem import SmemTile, emit_swizzle
from .mma_tiles import TileLoad, tile_loader

KSTEP_BYTES = 32  # one mma k step = half of a 64-byte shared row


@dataclass
class Warp:
    """This thread's place: lane, warp row/column, block tile origin (b32 registers)."""

    tid: str
    lane: str
    wm: str
    wn: str
    m0: str
    n0: str


def mma_kernel(spec: ProductSpec, cfg: MmaConfig) -> EmittedKernel:
    kb = KernelBuilder(spec.name, max_threads=cfg.threads)
    params, cg, (cx, cy, _) = setup(kb, spec, cfg.bm, cfg.bn)
    smem = kb.shared_array("gemm_smem", "b8", cfg.smem_bytes, 128)
    m, n, k = params.sym(spec.m), params.sym(spec.n), params.sym(spec.k)
    tid = kb.special("%tid.x")
    lane, warp, wm, wn, m0, n0 = kb.regs("b32", 6)
    for s in (f"and.b32 {lane}, {tid}, 31", f"shr.u32 {warp}, {tid}, 5",
              f"div.u32 {wm}, {warp}, {cfg.warps_n}", f"rem.u32 {wn}, {warp}, {cfg.warps_n}",
              f"mul.lo.u32 {m0}, {cy}, {cfg.bm}", f"mul.lo.u32 {n0}, {cx}, {cfg.bn}"):
        kb.prologue.append(s + ";")
    w = Warp(tid, lane, wm, wn, m0, n0)
    zc = batch_coords(cg, spec)
    a_tile = SmemTile(cfg.bm, ROW_BYTES, 0)
    b_tile = SmemTile(cfg.bn if cfg.b_nk else cfg.bk, cfg.b_pitch, cfg.a_bytes)
    loads = [tile_loader(kb, params, spec.a, zc, spec.batch, a_tile, cfg.op.elem, False, m0, tid,
                         cfg.threads),
             tile_loader(kb, params, spec.b, zc, spec.batch, b_tile, cfg.op.elem, not cfg.b_nk, n0,
                         tid, cfg.threads)]
    base = kb.reg("b32")
    kb.emit(f"mov.u32 {base}, {smem}")
    frags = Fragments(kb, cfg, w, a_tile, b_tile)
    accs = zero_accumulators(kb, 4 * cfg.mi * cfg.ni, cfg.op.integer)
    _pipeline(kb, cfg, loads, base, k, lambda stage: frags.compute(stage, accs))
    if vector_epilogue_ok(spec):
        staged_epilogue(cg, spec, cfg, w, base, accs, m, n)
    else:
        rows, cols = _fragment_coords(kb, cfg, w)
        emit_epilogue(cg, spec.epilogue, spec.emap, spec.acc, rows, cols, m, n,
                      lambda i, j: accs[acc_index(cfg, *c_element(i, j))])
    return EmittedKernel(kb, params.args, launch_grid(spec, cfg.bm, cfg.bn), (cfg.threads, 1, 1),
                         _mma_kind(spec.kind))


def zero_accumulators(kb: KernelBuilder, n: int, integer: bool) -> list[str]:
    """``n`` accumulator registers set to 0: b32 for integer (s32) products, else f32."""
    acc_t = "b32" if integer else "f32"
    accs = kb.regs(acc_t, n)
    zero = "0" if integer else float_literal(0.0, DType.F32)
    for r in accs:
        kb.emit(f"mov.{acc_t} {r}, {zero}")
    return accs


def _mma_kind(kind: str) -> str:
    """``matmul`` -> ``matmul(mma)``; ``conv(igemm)`` -> ``conv(igemm,mma)``."""
    return kind[:-1] + ",mma)" if kind.endswith(")") else kind + "(mma)"


def acc_index(cfg: MmaConfig, mi: int, ni: int, c: int) -> int:
    """Accumulator ``c`` (C fragment element) of mma tile (mi, ni)."""
    return (mi * cfg.ni + ni) * 4 + c


def _xor(kb: KernelBuilder, reg: str, k: int) -> str:
    out = kb.reg("b32")
    kb.emit(f"xor.b32 {out}, {reg}, {k}")
    return out


def c_fragment_rows(kb: KernelBuilder, row0: str, m16: int) -> list[str]:
    """The rows of a thread's accumulators over ``m16`` mma tiles along M.

    PTX ISA C/D fragment (g = lane / 4, t = lane % 4): element c of an m16n8 tile is at
    row g + 8 (c >> 1), column 2t + (c & 1). With ``row0`` the first tile's row g, row
    i = 2 mi + h is ``row0 + 16 mi + 8 h``; with ``col0`` its column 2t, column
    j = 2 ni + q is ``col0 + 8 ni + q`` (``c_fragment_cols``). Accumulator (i, j) is
    element ``c_element(i, j)``. wgmma's accumulators are laid out the same way per
    warp (one m16 tile of N / 8 n8 tiles)."""
    return [_plus(kb, row0, 16 * (i >> 1) + 8 * (i & 1)) for i in range(2 * m16)]


def c_fragment_cols(kb: KernelBuilder, col0: str, n8: int) -> list[str]:
    """The columns of a thread's accumulators over ``n8`` mma tiles along N (see
    ``c_fragment_rows``)."""
    return [_plus(kb, col0, 8 * (j >> 1) + (j & 1)) for j in range(2 * n8)]


def _plus(kb: KernelBuilder, reg: str, k: int) -> str:
    if not k:
        return reg
    out = kb.reg("b32")
    kb.emit(f"add.u32 {out}, {reg}, {k}")
    return out


def c_element(i: int, j: int) -> tuple[int, int, int]:
    """(mi, ni, c): the mma tile and C fragment element of accumulator (i, j) (row i of
    ``c_fragment_rows``, column j of ``c_fragment_cols``)."""
    return i >> 1, j >> 1, 2 * (i & 1) + (j & 1)


def _fragment_coords(kb: KernelBuilder, cfg: MmaConfig, w: Warp) -> tuple[list[str], list[str]]:
    """Global rows and columns of this thread's accumulators (``c_fragment_rows`` and
    ``c_fragment_cols`` from the warp tile's origin)."""
    g, t, rbase, cbase = kb.regs("b32", 4)
    kb.emit(f"shr.u32 {g}, {w.lane}, 2")
    kb.emit(f"and.b32 {t}, {w.lane}, 3")
    kb.emit(f"mad.lo.u32 {rbase}, {w.wm}, {cfg.wtm}, {w.m0}")
    kb.emit(f"add.u32 {rbase}, {rbase}, {g}")
    kb.emit(f"mad.lo.u32 {cbase}, {w.wn}, {cfg.wtn}, {w.n0}")
    kb.emit(f"mad.lo.u32 {cbase}, {t}, 2, {cbase}")
    return c_fragment_rows(kb, rbase, cfg.mi), c_fragment_cols(kb, cbase, cfg.ni)


def _pipeline(kb: KernelBuilder, cfg: MmaConfig, loads: list[TileLoad], base: str, k: str,
              compute) -> None:
    """The multistage k loop (module docstring): prologue, then wait/barrier/issue/compute."""
    stages, sb, bk = cfg.stages, cfg.stage_bytes, cfg.bk
    copies = any(ld.async_copy for ld in loads)
    wr, ld_k, end = kb.regs("b32", 3)
    kb.emit(f"mov.u32 {wr}, {base}")
    kb.emit(f"mov.u32 {ld_k}, 0")
    kb.emit(f"add.u32 {end}, {base}, {stages * sb}")

    def next_stage(stage: str) -> None:
        """Advance a stage address register to the next stage, wrapping after the last."""
        kb.emit(f"add.u32 {stage}, {stage}, {sb}")
        wrap = kb.reg("pred")
        kb.emit(f"setp.ge.u32 {wrap}, {stage}, {end}")
        kb.emit(f"@{wrap} mov.u32 {stage}, {base}")

    def issue() -> None:
        """Tile ``ld_k`` into stage ``wr`` (none past K; the group is committed anyway)."""
        past, skip = kb.reg("pred"), kb.new_label("no_tile")
        kb.emit(f"setp.ge.u32 {past}, {ld_k}, {k}")
        kb.bra(skip, past)
        for ld in loads:
            ld.emit(wr, ld_k)
        kb.label(skip)
        if copies:
            kb.emit("cp.async.commit_group")
        kb.emit(f"add.u32 {ld_k}, {ld_k}, {bk}")
        next_stage(wr)

    top, done = kb.new_label("prologue"), kb.new_label("prologue_end")
    p = kb.reg("pred")
    kb.label(top)
    kb.emit(f"setp.ge.u32 {p}, {ld_k}, {(stages - 1) * bk}")
    kb.bra(done, p)
    issue()
    kb.emit(f"bra.uni {top}")
    kb.label(done)
    rd = kb.reg("b32")
    kb.emit(f"mov.u32 {rd}, {base}")

    def ktile(_: str) -> None:
        if copies:
            kb.emit(f"cp.async.wait_group {stages - 2}")
        kb.emit("bar.sync 0")
        issue()
        compute(rd)
        next_stage(rd)

    StridedLoop(kb, "ktile").run("0", k, str(bk), ktile)


class Fragments:
    """Per-lane shared offsets (from a stage's start) of the fragments, computed once
    before the k loop, and the mma of one stage."""

    def __init__(self, kb: KernelBuilder, cfg: MmaConfig, w: Warp, a: SmemTile, b: SmemTile):
        self.kb, self.cfg, self.b = kb, cfg, b
        r8, j, jlo, jhi = kb.regs("b32", 4)
        kb.emit(f"and.b32 {r8}, {w.lane}, 7")
        kb.emit(f"shr.u32 {j}, {w.lane}, 3")
        kb.emit(f"and.b32 {jlo}, {j}, 1")
        kb.emit(f"shr.u32 {jhi}, {j}, 1")
        # A: row wm*wtm + r8 + 8*jlo, chunk jhi (+2 per k step); B [n][k]: row wn*wtn + r8
        # + 8*jhi, chunk jlo (x4 matrices: n 0-7 k lo, n 0-7 k hi, n 8-15 k lo, n 8-15 k hi)
        self.a = self._kstep_offsets(a, w.wm, cfg.wtm, r8, jlo, jhi)
        if cfg.b_nk:
            self.b_off = self._kstep_offsets(b, w.wn, cfg.wtn, r8, jhi, jlo)
        elif cfg.op.elem == 2:
            self.b_off = self._trans_offsets(b, w, r8, jlo, jhi)
        else:
            self.b_off = self._word_offsets(b, w)

    def _kstep_offsets(self, tile: SmemTile, wpos: str, wsize: int, r8: str, r8hi: str,
                       chunk: str) -> list[str]:
        """Lane offsets of k steps 0 and 1 in a [mn][k] tile (64-byte rows, x = (row>>1)&3)."""
        kb = self.kb
        row = kb.reg("b32")
        kb.emit(f"mad.lo.u32 {row}, {r8hi}, 8, {r8}")
        kb.emit(f"mad.lo.u32 {row}, {wpos}, {wsize}, {row}")
        x, c = emit_swizzle(kb, tile.pitch, r8), kb.reg("b32")
        kb.emit(f"xor.b32 {c}, {chunk}, {x}")
        # chunk + 2ks == chunk | 2ks, so (chunk + 2ks) ^ x == c ^ 2ks
        return [tile.slot(kb, row, _xor(kb, c, 2 * ks)) for ks in range(2)]

    def _trans_offsets(self, tile: SmemTile, w: Warp, r8: str, jlo: str, jhi: str) -> list[str]:
        """B [k][n], ldmatrix .trans: matrices (k 0-7, n 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15),
        (k 8-15, n 8-15) of n8-tile pair p: lane row r8 + 8*jlo, chunk wn*wtn/8 + 2p + jhi."""
        kb, cfg = self.kb, self.cfg
        row, c = kb.reg("b32"), kb.reg("b32")
        kb.emit(f"mad.lo.u32 {row}, {jlo}, 8, {r8}")
        kb.emit(f"mad.lo.u32 {c}, {w.wn}, {cfg.wtn // 8}, {jhi}")
        x = emit_swizzle(kb, tile.pitch, r8)
        kb.emit(f"xor.b32 {c}, {c}, {x}")
        # 2p < wtn/8 and below wn's chunk bits: + is ^
        return [tile.slot(kb, row, _xor(kb, c, 2 * p)) for p in range(cfg.ni // 2)]

    def _word_offsets(self, tile: SmemTile, w: Warp) -> list[str]:
        """tf32 B [k][n]: per h (k row t + 4h) the lane's base offset and its swizzled
        chunk bits (16 * ((g >> 2) ^ x(t + 4h))); n8 tile ni adds chunk 2ni (module mma_smem)."""
        kb, cfg = self.kb, self.cfg
        g, t, q, word = kb.regs("b32", 4)
        kb.emit(f"shr.u32 {g}, {w.lane}, 2")
        kb.emit(f"and.b32 {t}, {w.lane}, 3")
        kb.emit(f"shr.u32 {q}, {g}, 2")
        kb.emit(f"and.b32 {word}, {g}, 3")
        out = []
        for h in range(2):
            row, bofs, bits = kb.regs("b32", 3)
            kb.emit(f"add.u32 {row}, {t}, {4 * h}")
            x = emit_swizzle(kb, tile.pitch, row)
            kb.emit(f"xor.b32 {bits}, {q}, {x}")
            kb.emit(f"shl.b32 {bits}, {bits}, 4")
            kb.emit(f"mad.lo.u32 {bofs}, {row}, {tile.pitch}, {tile.base}")
            kb.emit(f"mad.lo.u32 {bofs}, {w.wn}, {cfg.wtn * 4}, {bofs}")
            kb.emit(f"mad.lo.u32 {bofs}, {word}, 4, {bofs}")
            out += [bofs, bits]
        return out

    def compute(self, stage: str, accs: list[str]) -> None:
        """Every mma of the stage at shared address ``stage``: 2 k steps of mi x ni."""
        kb, cfg = self.kb, self.cfg
        tf32 = cfg.op.ab == "tf32"
        for ks in range(ROW_BYTES // KSTEP_BYTES):
            pa = kb.reg("b32")
            kb.emit(f"add.u32 {pa}, {stage}, {self.a[ks]}")
            afr = []
            for mi in range(cfg.mi):
                regs = kb.regs("b32", 4)
                kb.emit(f"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{{', '.join(regs)}}}, "
                        f"[{pa}+{mi * 16 * ROW_BYTES}]")
                afr.append(regs)
            bfr = self._b_fragments(stage, ks)
            if tf32:
                for r in [r for regs in afr + bfr for r in regs]:
                    kb.emit(f"cvt.rna.tf32.f32 {r}, {r}")
            for mi in range(cfg.mi):
                for ni in range(cfg.ni):
                    d = accs[acc_index(cfg, mi, ni, 0):acc_index(cfg, mi, ni, 0) + 4]
                    kb.emit(f"{cfg.op.text} {{{', '.join(d)}}}, {{{', '.join(afr[mi])}}}, "
                            f"{{{', '.join(bfr[ni])}}}, {{{', '.join(d)}}}")

    def _b_fragments(self, stage: str, ks: int) -> list[list[str]]:
        """{b0, b1} of each n8 tile for k step ``ks``."""
        kb, cfg, out = self.kb, self.cfg, []
        if cfg.b_nk or cfg.op.elem == 2:
            trans = "" if cfg.b_nk else ".trans"
            for p in range(cfg.ni // 2):
                if cfg.b_nk:   # pair p is rows +16p; k step ks is in the lane offset
                    src, imm = self.b_off[ks], p * 16 * ROW_BYTES
                else:          # pair p is in the lane offset; k step ks is rows +16ks
                    src, imm = self.b_off[p], ks * 16 * self.b.pitch
                addr = kb.reg("b32")
                kb.emit(f"add.u32 {addr}, {stage}, {src}")
                regs = kb.regs("b32", 4)
                kb.emit(f"ldmatrix.sync.aligned.m8n8.x4{trans}.shared.b16 {{{', '.join(regs)}}}, "
                        f"[{addr}+{imm}]")
                out += [regs[0:2], regs[2:4]]
            return out
        # tf32 [k][n]: b_h = B[k = t + 4h + 8ks][n = 8ni + g], one word each
        frags: list[list[str]] = [[] for _ in range(cfg.ni)]
        for h in range(2):
            bofs, bits = self.b_off[2 * h], self.b_off[2 * h + 1]
            rowbase = kb.reg("b32")
            kb.emit(f"add.u32 {rowbase}, {stage}, {bofs}")
            for ni in range(cfg.ni):
                c = 2 * ni   # chunk 2ni + q: the bits below 8 XOR with x, the rest add
                addr, r = kb.reg("b32"), kb.reg("b32")
                kb.emit(f"xor.b32 {addr}, {bits}, {16 * (c & 7)}")
                kb.emit(f"add.u32 {addr}, {addr}, {rowbase}")
                kb.emit(f"ld.shared.b32 {r}, [{addr}+{16 * (c & ~7) + 8 * ks * self.b.pitch}]")
                frags[ni].append(r)
        return frags
