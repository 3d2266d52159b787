"""Flash attention on CUDA cores: f32 FMA (16-bit inputs are widened while loading).

A block of 128 threads owns ``BM = 32`` query rows; the 4 lanes of a quad share a
row. Lane c of a quad keeps the row's Q elements and output columns
``16 i + 4 c + u`` (u < 4) in registers, so a quad reads 16 consecutive floats of
a shared K or V row with four ``ld.shared.v4`` (no bank conflict; the 8 rows of a
warp read the same words, a broadcast). Per key, a lane's partial dot product is
summed over the quad with two ``shfl.bfly`` adds (commutative, so every lane gets
the same bits: the quad agrees on the max and on every probability).

Per tile of ``bn`` keys (32; 16 when ``dp + ep > 128``, 8 when ``dp + ep > 192``):
the scores of all the tile's keys, the online-softmax update, then O += p V. Lane c computes the exps of
the keys ``4 w + c`` only and the quad exchanges them with ``shfl.idx`` (a quarter
of the exps); the row sum is a per-lane partial, summed over the quad at the end.

Shared memory (f32): stage s holds K (bn x dp) then V (bn x ep); Q (32 rows, pitch
``dp + 4``) is staged in stage 1's region. Copies, groups and barriers follow the
tensor-core kernel (``flash_mma``): Q and tile 0 are separate ``cp.async`` groups
(16-byte chunks of 4 floats) when the loads allow, tile t+1 is copied during tile
t, every wait is followed by ``bar.sync`` and every use of a stage precedes the
``bar.sync`` before its refill.
"""

from __future__ import annotations

from ....dtypes import DType
from ..builder import KernelBuilder
from .flash import MAX_REGS, THREADS, AttentionSpec, Frame, pad16
from .flash_softmax import FULL_MASK, NEG_INF
from .gemm_epilogue import emit_epilogue

BM = 32


def geometry(d: int, e: int) -> tuple[int, int, int]:
    """(padded d, padded e, keys per tile)."""
    dp, ep = pad16(d), pad16(e)
    return dp, ep, 32 if dp + ep <= 128 else 16 if dp + ep <= 192 else 8


def fma_attention(spec: AttentionSpec):
    dp, ep, bn = geometry(spec.d, spec.e)
    pq = dp + 4
    kb = KernelBuilder(spec.name, max_threads=THREADS, max_regs=MAX_REGS)
    f = Frame(spec, kb, BM)
    q_copy, tiles = f.stage_tiles("f32", bn, (dp, pq), (dp, dp), (ep, ep))
    k_bytes = tiles.k_bytes
    r, c, lane, quad0, col4 = kb.regs("b32", 5)
    kb.emit(f"shr.u32 {r}, {f.tid}, 2")
    kb.emit(f"and.b32 {c}, {f.tid}, 3")
    kb.emit(f"and.b32 {lane}, {f.tid}, 31")
    kb.emit(f"and.b32 {quad0}, {lane}, 28")
    kb.emit(f"shl.b32 {col4}, {c}, 2")  # this lane's first column of each 16: 4 c
    q = f.stage_q(q_copy, tiles, lambda stage1: _q_registers(kb, stage1, r, col4, pq, dp))

    row = kb.reg("b32")
    kb.emit(f"add.u32 {row}, {f.row0}, {r}")
    limit = f.limit(row)
    m, lsum = kb.reg("f32"), kb.reg("f32")
    kb.emit(f"mov.f32 {m}, {NEG_INF}")
    kb.emit(f"mov.f32 {lsum}, 0f00000000")
    o = kb.regs("f32", ep // 4)
    for x in o:
        kb.emit(f"mov.f32 {x}, 0f00000000")
    lane_col = kb.reg("b32")  # byte offset of this lane's columns in a K or V row
    kb.emit(f"shl.b32 {lane_col}, {col4}, 2")
    is_lane, sources = _quad_lanes(kb, c, quad0)

    def tile(stage: str, j0: str) -> None:
        cur = kb.reg("b32")
        kb.emit(f"add.u32 {cur}, {stage}, {lane_col}")
        rem = f.remaining(limit, j0, bn)
        xs = [f.mask(f.scaled(_dot(f, q, cur, kk * dp * 4, dp)), rem, kk) for kk in range(bn)]
        shift, alpha = f.rescale(m, f.max_of(xs))
        probs, mine = _exps(f, xs, shift, is_lane, sources)
        part = kb.reg("f32")
        kb.emit(f"mul.rn.f32 {part}, {lsum}, {alpha}")
        kb.emit(f"add.rn.f32 {lsum}, {part}, {mine}")
        for x in o:
            kb.emit(f"mul.rn.f32 {x}, {x}, {alpha}")
        for kk in range(bn):
            for i in range(ep // 16):
                regs = kb.regs("f32", 4)
                off = k_bytes + (kk * ep + 16 * i) * 4
                kb.emit(f"ld.shared.v4.f32 {{{', '.join(regs)}}}, [{cur}+{off}]")
                for u in range(4):
                    kb.emit(f"fma.rn.f32 {o[4 * i + u]}, {probs[kk]}, {regs[u]}, {o[4 * i + u]}")

    f.key_loop(tiles, tile)

    total, inv = f.quad(lsum, "add"), kb.reg("f32")
    kb.emit(f"div.rn.f32 {inv}, 0f3F800000, {total}")  # the one division per row
    cols = []
    for i in range(ep // 16):
        for u in range(4):
            col = kb.reg("b32")
            kb.emit(f"add.u32 {col}, {col4}, {16 * i + u}")
            cols.append(col)

    def acc_at(_: int, j: int) -> str:
        out = kb.reg("f32")
        kb.emit(f"mul.rn.f32 {out}, {o[j]}, {inv}")
        return out

    emit_epilogue(f.cg, spec.epilogue, spec.emap, DType.F32, [row], cols, f.t, str(spec.e), acc_at)
    return f.launch(f"attention(flash,fma,{bn})")


def _q_registers(kb: KernelBuilder, stage1: str, r: str, col4: str, pq: int,
                 dp: int) -> list[str]:
    """This lane's Q elements of row r: columns ``16 i + 4 c + u``, by ``ld.shared.v4``."""
    addr = kb.reg("b32")
    kb.emit(f"mad.lo.u32 {addr}, {r}, {pq}, {col4}")
    kb.emit(f"mad.lo.u32 {addr}, {addr}, 4, {stage1}")
    q: list[str] = []
    for i in range(dp // 16):
        regs = kb.regs("f32", 4)
        kb.emit(f"ld.shared.v4.f32 {{{', '.join(regs)}}}, [{addr}+{64 * i}]")
        q += regs
    return q


def _dot(f: Frame, q: list[str], cur: str, row_bytes: int, dp: int) -> str:
    """The score of this lane's row and the key whose K row starts ``row_bytes`` into the
    stage: the lane's dp/4 products, then the quad's sum."""
    kb = f.kb
    acc = kb.reg("f32")
    for i in range(dp // 16):
        regs = kb.regs("f32", 4)
        kb.emit(f"ld.shared.v4.f32 {{{', '.join(regs)}}}, [{cur}+{row_bytes + 64 * i}]")
        for u in range(4):
            if i == 0 and u == 0:
                kb.emit(f"mul.rn.f32 {acc}, {q[0]}, {regs[0]}")
            else:
                kb.emit(f"fma.rn.f32 {acc}, {q[4 * i + u]}, {regs[u]}, {acc}")
    return f.quad(acc, "add")


def _quad_lanes(kb: KernelBuilder, c: str, quad0: str) -> tuple[list[str], list[str]]:
    """(predicates ``c == 1, 2, 3``; the lane ids of the quad's 4 lanes)."""
    preds, lanes = kb.regs("pred", 3), kb.regs("b32", 4)
    for cc in range(4):
        if cc:
            kb.emit(f"setp.eq.u32 {preds[cc - 1]}, {c}, {cc}")
        kb.emit(f"or.b32 {lanes[cc]}, {quad0}, {cc}")
    return preds, lanes


def _exps(f: Frame, xs: list[str], shift: str, is_lane: list[str],
          sources: list[str]) -> tuple[list[str], str]:
    """(``exp(x - shift)`` of every key of the tile, in every lane of the quad; this lane's
    partial sum of them). Lane c computes keys ``4 w + c`` (its x picked by ``c``), then
    each value is read from its lane with ``shfl.idx``."""
    kb = f.kb
    own, part = [], kb.reg("f32")
    kb.emit(f"mov.f32 {part}, 0f00000000")
    for w in range(len(xs) // 4):
        x = kb.reg("f32")
        kb.emit(f"mov.f32 {x}, {xs[4 * w]}")
        for cc in (1, 2, 3):
            kb.emit(f"selp.f32 {x}, {xs[4 * w + cc]}, {x}, {is_lane[cc - 1]}")
        e = f.exp_shifted(x, shift)
        kb.emit(f"add.rn.f32 {part}, {part}, {e}")
        own.append(e)
    probs = []
    for e in own:
        for src in sources:
            out = kb.reg("f32")
            kb.emit(f"shfl.sync.idx.b32 {out}, {e}, {src}, 31, {FULL_MASK}")
            probs.append(out)
    return probs, part
