"""Flash attention on tensor cores (f16/bf16, sm_80+): both products are ``mma.sync.m16n8k16``.

A block of 4 warps owns ``BM = 64`` query rows, 16 per warp; each key tile holds
``bn`` keys (64, or 32 when a padded head dim exceeds 64, so shared memory stays
under 48 KiB). Per tile a warp computes its 16 x bn scores S = Q K^T (Q's
fragments stay in registers for the whole loop, K fragments by ``ldmatrix`` from
``Ks[key][d]``), updates the online softmax, converts the probabilities to
f16/bf16 *in registers* (the C fragment of two adjacent n8 tiles is exactly the A
fragment of one k16 step: FA2's trick, no shared memory round trip) and
accumulates O += P V (V fragments by ``ldmatrix.trans`` from ``Vs[key][e]``), all
with f32 accumulation.

Shared memory, in halves: stage s at ``s * STAGE`` holds K (bn rows, pitch
``dp + 8``) then V (bn rows, pitch ``ep + 8``); the +8 keeps the 8 rows of an
``ldmatrix`` phase in distinct banks. Q is staged once in stage 1's region (its
fragments are read into registers before the first refill of stage 1).

Pipeline: Q and key tile 0 are separate ``cp.async`` groups; the Q fragments are
read after ``wait_group 1``. Tile t+1 is copied into the other stage before tile
t is used (``wait_group 1``; the last tile waits for 0); a ``bar.sync`` follows
every wait and every use of a stage precedes a ``bar.sync`` before its refill.
Where an operand cannot be copied by 16-byte chunks (``flash_tiles``) its tiles
are plain loads and stores, and only the barriers order them.

Thread layout (PTX ISA mma fragments, g = lane / 4, t = lane % 4): a thread holds
score/output rows ``16 w + g`` and ``16 w + g + 8`` and columns ``8 n + 2 t + {0, 1}``;
the row max and sum combine over the 4 lanes of a quad (``shfl.bfly`` 1, 2).
"""

from __future__ import annotations

from ....dtypes import DType
from ..builder import KernelBuilder
from .flash import MAX_REGS, THREADS, AttentionSpec, Frame, pad16
from .flash_softmax import NEG_INF
from .gemm_epilogue import emit_epilogue
from .mma import c_element, c_fragment_cols, c_fragment_rows
from .mma_config import OPS
from .packed import PACKED

BM = 64


def geometry(d: int, e: int) -> tuple[int, int, int]:
    """(padded d, padded e, keys per tile)."""
    dp, ep = pad16(d), pad16(e)
    return dp, ep, 64 if max(dp, ep) <= 64 else 32


def mma_attention(spec: AttentionSpec):
    mma = OPS[spec.q.dtype].text  # m16n8k16, f32 accumulators
    dp, ep, bn = geometry(spec.d, spec.e)
    pd, pe = dp + 8, ep + 8
    kb = KernelBuilder(spec.name, max_threads=THREADS, max_regs=MAX_REGS)
    f = Frame(spec, kb, BM)
    q_copy, tiles = f.stage_tiles("b16", bn, (dp, pd), (dp, pd), (ep, pe))
    k_bytes = tiles.k_bytes
    lane, warp, g, t4 = kb.regs("b32", 4)
    for s in (f"and.b32 {lane}, {f.tid}, 31", f"shr.u32 {warp}, {f.tid}, 5",
              f"shr.u32 {g}, {lane}, 2", f"and.b32 {t4}, {lane}, 3"):
        kb.emit(s)
    qf = f.stage_q(q_copy, tiles, lambda stage1: _q_fragments(kb, stage1, lane, warp, dp, pd))

    row = kb.reg("b32")  # the C fragment's row g of the warp's 16 rows
    kb.emit(f"mad.lo.u32 {row}, {warp}, 16, {f.row0}")
    kb.emit(f"add.u32 {row}, {row}, {g}")
    rows = c_fragment_rows(kb, row, 1)
    limits = [f.limit(r) for r in rows]
    m, lsum = kb.regs("f32", 2), kb.regs("f32", 2)
    for h in range(2):
        kb.emit(f"mov.f32 {m[h]}, {NEG_INF}")
        kb.emit(f"mov.f32 {lsum[h]}, 0f00000000")
    o = [kb.regs("f32", 4) for _ in range(ep // 8)]
    for r in (x for tile in o for x in tile):
        kb.emit(f"mov.f32 {r}, 0f00000000")
    k_lane, v_lane = _lane_offsets(kb, lane, pd, pe)

    def tile(cur: str, j0: str) -> None:
        s = _scores(kb, mma, qf, cur, k_lane, dp, pd, bn)
        probs = _softmax(f, s, m, lsum, o, limits, j0, t4, bn)
        _accumulate(kb, mma, probs, o, cur, k_bytes, v_lane, pe, bn, ep)

    f.key_loop(tiles, tile)

    inv = []
    for h in range(2):
        total, r = f.quad(lsum[h], "add"), kb.reg("f32")
        kb.emit(f"div.rn.f32 {r}, 0f3F800000, {total}")  # the one division per row
        inv.append(r)
    col = kb.reg("b32")  # the C fragment's column 2t
    kb.emit(f"shl.b32 {col}, {t4}, 1")
    cols = c_fragment_cols(kb, col, ep // 8)

    def acc_at(i: int, j: int) -> str:
        _, ni, c = c_element(i, j)
        out = kb.reg("f32")
        kb.emit(f"mul.rn.f32 {out}, {o[ni][c]}, {inv[i]}")
        return out

    emit_epilogue(f.cg, spec.epilogue, spec.emap, DType.F32, rows, cols, f.t, str(spec.e), acc_at)
    return f.launch(f"attention(flash,mma,{bn})")


def _lane_offsets(kb: KernelBuilder, lane: str, pd: int, pe: int) -> tuple[str, str]:
    """This lane's ldmatrix row address offsets (bytes) in a K tile and a V tile.

    K (non-transposed, ``Ks[key][d]``): row (key) ``r8 + 8 jhi``, column ``8 jlo``, so
    matrices are (keys 0-7, d 0-7), (0-7, 8-15), (8-15, 0-7), (8-15, 8-15): registers
    0-1 are the B fragment of key tile 2p, 2-3 of 2p + 1. V (``.trans``, ``Vs[key][e]``):
    row (key) ``r8 + 8 jlo``, column ``8 jhi``: registers 0-1 are e tile 2p, 2-3 2p + 1."""
    r8, j, jlo, jhi = kb.regs("b32", 4)
    kb.emit(f"and.b32 {r8}, {lane}, 7")
    kb.emit(f"shr.u32 {j}, {lane}, 3")
    kb.emit(f"and.b32 {jlo}, {j}, 1")
    kb.emit(f"shr.u32 {jhi}, {j}, 1")
    k_off, v_off, row = kb.reg("b32"), kb.reg("b32"), kb.reg("b32")
    kb.emit(f"mad.lo.u32 {row}, {jhi}, 8, {r8}")
    kb.emit(f"mul.lo.u32 {k_off}, {row}, {pd * 2}")
    kb.emit(f"mad.lo.u32 {k_off}, {jlo}, 16, {k_off}")
    row2 = kb.reg("b32")
    kb.emit(f"mad.lo.u32 {row2}, {jlo}, 8, {r8}")
    kb.emit(f"mul.lo.u32 {v_off}, {row2}, {pe * 2}")
    kb.emit(f"mad.lo.u32 {v_off}, {jhi}, 16, {v_off}")
    return k_off, v_off


def _q_fragments(kb: KernelBuilder, qbase: str, lane: str, warp: str, dp: int,
                 pd: int) -> list[list[str]]:
    """A fragments of this warp's 16 Q rows, one ``ldmatrix.x4`` per k16 step: lane l
    addresses row ``16 w + l % 8 + 8 ((l / 8) % 2)``, column ``8 (l / 16)``."""
    r8, jlo, jhi, row, addr = kb.regs("b32", 5)
    kb.emit(f"and.b32 {r8}, {lane}, 7")
    kb.emit(f"bfe.u32 {jlo}, {lane}, 3, 1")
    kb.emit(f"shr.u32 {jhi}, {lane}, 4")
    kb.emit(f"mad.lo.u32 {row}, {jlo}, 8, {r8}")
    kb.emit(f"mad.lo.u32 {row}, {warp}, 16, {row}")
    kb.emit(f"mad.lo.u32 {addr}, {row}, {pd * 2}, {qbase}")
    kb.emit(f"mad.lo.u32 {addr}, {jhi}, 16, {addr}")
    frags = []
    for kt in range(dp // 16):
        regs = kb.regs("b32", 4)
        kb.emit(f"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{{', '.join(regs)}}}, [{addr}+{kt * 32}]")
        frags.append(regs)
    return frags


def _mma(kb: KernelBuilder, mma: str, d: list[str], a: list[str], b: list[str]) -> None:
    kb.emit(f"{mma} {{{', '.join(d)}}}, {{{', '.join(a)}}}, {{{', '.join(b)}}}, {{{', '.join(d)}}}")


def _scores(kb: KernelBuilder, mma: str, qf: list[list[str]], cur: str, k_lane: str, dp: int,
            pd: int, bn: int) -> list[list[str]]:
    """S = Q K^T for this warp's 16 rows and the tile's bn keys: bn / 8 C fragments."""
    s = [kb.regs("f32", 4) for _ in range(bn // 8)]
    for r in (x for tile in s for x in tile):
        kb.emit(f"mov.f32 {r}, 0f00000000")
    kaddr = kb.reg("b32")
    kb.emit(f"add.u32 {kaddr}, {cur}, {k_lane}")
    for kt in range(dp // 16):
        for pair in range(bn // 16):
            regs = kb.regs("b32", 4)
            off = pair * 16 * pd * 2 + kt * 32
            kb.emit(f"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{{', '.join(regs)}}}, [{kaddr}+{off}]")
            _mma(kb, mma, s[2 * pair], qf[kt], regs[0:2])
            _mma(kb, mma, s[2 * pair + 1], qf[kt], regs[2:4])
    return s


def _softmax(f: Frame, s: list[list[str]], m: list[str], lsum: list[str], o: list[list[str]],
             limits: list[str], j0: str, t4: str, bn: int) -> list[list[str]]:
    """Online softmax of one tile; returns the probabilities as A fragments (one per
    k16 step of keys), packed f16x2/bf16x2: C tiles 2k and 2k + 1 give A registers
    {c0 c1 of 2k, c2 c3 of 2k, c0 c1 of 2k+1, c2 c3 of 2k+1} (rows g, g+8; keys 2t, 2t+8)."""
    kb = f.kb
    first = kb.reg("b32")
    kb.emit(f"mad.lo.u32 {first}, {t4}, 2, {j0}")  # key of c0 in n tile 0
    probs: list[list[str]] = [[], []]
    for h in range(2):
        rem = f.remaining(limits[h], first, bn)
        xs = [f.mask(f.scaled(s[n][2 * h + q]), rem, 8 * n + q)
              for n in range(bn // 8) for q in range(2)]
        tile_max = f.quad(f.max_of(xs), "max")
        shift, alpha = f.rescale(m[h], tile_max)
        ps = [f.exp_shifted(x, shift) for x in xs]
        total = kb.reg("f32")
        kb.emit(f"mul.rn.f32 {total}, {lsum[h]}, {alpha}")
        for pv in ps:
            kb.emit(f"add.rn.f32 {total}, {total}, {pv}")
        kb.emit(f"mov.f32 {lsum[h]}, {total}")
        for tile in o:
            for q in range(2):
                kb.emit(f"mul.rn.f32 {tile[2 * h + q]}, {tile[2 * h + q]}, {alpha}")
        probs[h] = ps
    packed = PACKED[f.spec.q.dtype]
    frags = []
    for k in range(bn // 16):
        regs = []
        for n in (2 * k, 2 * k + 1):
            for h in range(2):
                r = kb.reg("b32")
                kb.emit(f"cvt.rn.{packed}.f32 {r}, {probs[h][2 * n + 1]}, {probs[h][2 * n]}")
                regs.append(r)
        frags.append(regs)
    return frags


def _accumulate(kb: KernelBuilder, mma: str, probs: list[list[str]], o: list[list[str]], cur: str,
                k_bytes: int, v_lane: str, pe: int, bn: int, ep: int) -> None:
    """O += P V over the tile's keys: per k16 step, ``ldmatrix.x4.trans`` gives the B
    fragments of two e tiles."""
    vaddr = kb.reg("b32")
    kb.emit(f"add.u32 {vaddr}, {cur}, {k_bytes}")
    kb.emit(f"add.u32 {vaddr}, {vaddr}, {v_lane}")
    for k in range(bn // 16):
        for pair in range(ep // 16):
            regs = kb.regs("b32", 4)
            off = k * 16 * pe * 2 + pair * 32
            kb.emit(f"ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {{{', '.join(regs)}}}, "
                    f"[{vaddr}+{off}]")
            _mma(kb, mma, o[2 * pair], probs[k], regs[0:2])
            _mma(kb, mma, o[2 * pair + 1], probs[k], regs[2:4])


__all__ = ["geometry", "mma_attention"]
