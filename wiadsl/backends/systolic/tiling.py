"""Tiled instruction streams for one GEMM (plus its epilogue) on a ws or os array.

``Gemm`` names the DRAM views of C[b] = A[b] @ W[b] (A: M x K, W: K x N); the
emitters return the local buffers they use and the instruction body.

ws (weight-stationary) loop nest, per batch and block of ``mb`` rows:
    for each N tile j (<= C cols):   accumulator slot j % 2
      for each K tile i (<= R rows): mvin W tile, preload w(f % 2), then stream
                                     the A tile chunk by chunk (matmul.ws[.acc])
      per chunk: epilogue on the vector unit, mvout
A tiles stay resident in the scratchpad across N tiles when they fit. os
(output-stationary): for each M tile (<= R) x N tile (<= C) one matmul.os per K
block, then epilogue and mvout; A panels double-buffered, W resident if it fits.

Invariants: every tile is within the array (K tile <= R and N tile <= C for ws;
M tile <= R and N tile <= C for os); partial edge tiles are smaller tiles, never
padding; the buffers fit the configured scratchpad and accumulator (else
WiaUsageError). In ``scalesim`` timing the whole M extent streams per fold
(T = M for ws, T = K for os), as SCALE-Sim models it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from ...diagnostics import WiaUsageError
from ...dtypes import DType
from .config import ArrayConfig
from .epilogue import Epilogue, emit_tile
from .isa import (
    Buffer,
    Instruction,
    Label,
    Local,
    MatmulIS,
    MatmulOS,
    MatmulWS,
    Mvin,
    Mvout,
    Preload,
    Remote,
    Schedule,
)
from .schedule import Geometry, Item, choose

#: rows per matmul/mvout instruction in overlap timing (lets stores start early)
CHUNK_ROWS = 256
#: ws: weight tiles are fetched this many folds ahead (scratchpad holds one more), so
#: the in-order DMA queue has them before a finished tile's stores
PREFETCH = 2


@dataclass(frozen=True)
class Gemm:
    batches: int
    m: int
    k: int
    n: int
    lhs: str          # view name, shape [B or 1, M, K]
    rhs: str          # view name, shape [B or 1, K, N]
    out: str          # view name, shape [B, M, N]
    lhs_batched: bool
    rhs_batched: bool
    operand_dtype: DType


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _spans(total: int, step: int) -> list[tuple[int, int]]:
    return [(s, min(total, s + step)) for s in range(0, total, step)]


class _Emitter:
    def __init__(self, config: ArrayConfig, g: Gemm, epi: Epilogue):
        self.c, self.g, self.epi = config, g, epi
        self.body: list[Instruction] = []
        self.buffers: list[Buffer] = []
        self.elem = g.operand_dtype.bits // 8
        _, self.ntemps = epi.storage()

    def buf(self, name: str, space: str, rows: int, cols: int, dtype: DType | None = None) -> str:
        self.buffers.append(Buffer(name, space, rows, cols, dtype))
        return name

    def epilogue_buffers(self, rows: int) -> tuple[list[str], list[str]]:
        cols = self.c.cols
        temps = [self.buf(f"t{i}", "acc", rows, cols) for i in range(self.ntemps)]
        exts = [self.buf(f"e{i}", "spad", 1 if e.row_invariant else rows,
                         1 if e.col_invariant else cols, e.dtype)
                for i, e in enumerate(self.epi.externals)]
        return temps, exts

    def acc_bytes(self, rows: int) -> int:
        return (2 + self.ntemps) * rows * self.c.cols * 4

    def finish_tile(self, acc: str, rows: tuple[int, int], lrows: tuple[int, int],
                    cols: tuple[int, int], b: int, temps: list[str], exts: list[str],
                    col0: int = 0) -> None:
        """Epilogue and mvout of acc[lrows, col0:col0 + w], which is out[b, rows, cols]."""
        lcols = (col0, col0 + cols[1] - cols[0])
        main = Local(acc, lrows, lcols)
        self.body += emit_tile(self.epi, main, temps, exts, b, rows, cols)
        self.body.append(Mvout(Remote(self.g.out, b, rows, cols),
                               Local(acc, lrows, lcols, self.epi.out_dtype)))

    def check_fit(self, spad: int, acc: int) -> None:
        if spad > self.c.spad_capacity or acc > self.c.acc_capacity:
            raise WiaUsageError(
                f"a {self.g.m}x{self.g.k}x{self.g.n} GEMM does not fit the memories of a "
                f"{self.c.rows}x{self.c.cols} array even in its smallest tiling (needs "
                f"{spad} scratchpad and {acc} accumulator bytes)")


class _GemmEmitter(_Emitter, ABC):
    """An emitter of one dataflow's GEMM loop nest (``_WS``, ``_OS``, ``_IS``)."""

    @abstractmethod
    def emit(self) -> None:
        """Fill ``body`` (and ``buffers``) with the GEMM's instruction stream."""


class _WS(_GemmEmitter):
    def plan(self) -> tuple[int, bool]:
        """Rows per block and whether A tiles stay resident."""
        g, c = self.g, self.c
        mb = g.m

        def ext(rows: int) -> int:
            return sum(rows * c.cols * e.dtype.bits // 8 for e in self.epi.externals)

        while mb > 1:
            spad_fixed = (PREFETCH + 1) * c.rows * c.cols * self.elem + ext(min(mb, CHUNK_ROWS))
            resident = mb * _cdiv(g.k, c.rows) * c.rows * self.elem
            if self.acc_bytes(mb) <= c.acc_capacity:
                if spad_fixed + resident <= c.spad_capacity:
                    return mb, True
                if spad_fixed + 2 * mb * c.rows * self.elem <= c.spad_capacity:
                    return mb, False
            mb = _cdiv(mb, 2)
        self.check_fit((PREFETCH + 1) * c.rows * c.cols * self.elem + 2 * c.rows * self.elem + ext(1),
                       self.acc_bytes(1))
        return 1, False

    def geometry(self, mb: int, resident: bool) -> Geometry:
        """What the fold-order scheduler needs to know (schedule.Geometry)."""
        g, c = self.g, self.c
        chunk = mb if c.scalesim else min(mb, CHUNK_ROWS)
        a_room = mb * _cdiv(g.k, c.rows) * c.rows * self.elem if resident else 2 * mb * c.rows * self.elem
        ext = sum(chunk * c.cols * e.dtype.bits // 8 for e in self.epi.externals)
        spare_acc = c.acc_capacity - self.ntemps * chunk * c.cols * 4
        return Geometry(
            c.rows, c.cols, c.dma_bytes_per_cycle, c.dma_latency, c.vec_lanes,
            tuple((b, m0, m1) for b in range(g.batches) for m0, m1 in _spans(g.m, mb)), chunk,
            tuple(k1 - k0 for k0, k1 in _spans(g.k, c.rows)),
            tuple(n1 - n0 for n0, n1 in _spans(g.n, c.cols)), self.elem,
            self.epi.out_dtype.bits // 8,
            tuple((e.row_invariant, e.col_invariant, e.dtype.bits // 8) for e in self.epi.externals),
            len(self.epi.steps), resident, spare_acc // (mb * c.cols * 4),
            (c.spad_capacity - a_room - ext) // (c.rows * c.cols * self.elem))

    def emit(self) -> None:
        g, c = self.g, self.c
        mb, resident = self.plan()
        geo = self.geometry(mb, resident)
        s = choose(geo, search=not c.scalesim)
        geo = s.geo
        if not c.scalesim:
            self.body.append(Schedule(s.fields()))
        kt = len(geo.k_ext)
        a_names = [self.buf(f"a{i}", "spad", mb, c.rows, g.operand_dtype)
                   for i in range(kt if resident else 2)]
        nw = s.prefetch + 1
        w_names = [self.buf(f"w{i}buf", "spad", c.rows, c.cols, g.operand_dtype)
                   for i in range(nw)]
        acc_names = [self.buf(f"c{i}", "acc", mb, c.cols) for i in range(s.accumulators)]
        temps, exts = self.epilogue_buffers(max(geo.chunk, geo.edge_chunk))
        cur = 0
        for it in s.program:
            fd = s.folds[it.f] if it.kind != "a" else s.folds[cur]
            b, m0, _ = geo.blocks[fd.block]
            (k0, k1), (n0, n1) = self.panel(fd.i), self.tile(fd.j)
            chunks = s.fold_chunks(it.f) if it.kind in ("mm", "out") else []
            if it.kind == "w":
                self.body.append(Mvin(Local(w_names[it.f % nw], (0, k1 - k0), (0, n1 - n0)),
                                      Remote(g.rhs, b if g.rhs_batched else 0, (k0, k1), (n0, n1))))
            elif it.kind == "lbl":
                cur = it.f
                self.body.append(Label(f"b{b}_m{m0}_n{fd.j}_k{fd.i}"))
            elif it.kind == "a":
                self.load_a(a_names[it.f] if resident else a_names[cur % 2], geo, it)
            elif it.kind == "pre":
                self.body.append(Preload(it.f % 2, Local(w_names[it.f % nw], (0, k1 - k0),
                                                         (0, n1 - n0))))
            elif it.kind == "mm":
                a = a_names[fd.i] if resident else a_names[it.f % 2]
                for r0, r1 in chunks:
                    self.body.append(MatmulWS(Local(acc_names[fd.acc], (r0, r1), (0, n1 - n0)),
                                              Local(a, (r0, r1), (0, k1 - k0)), it.f % 2,
                                              not fd.first))
            else:
                for r0, r1 in chunks:
                    self.finish_tile(acc_names[fd.acc], (m0 + r0, m0 + r1), (r0, r1), (n0, n1), b,
                                     temps, exts)

    def panel(self, i: int) -> tuple[int, int]:
        return i * self.c.rows, min(self.g.k, (i + 1) * self.c.rows)

    def tile(self, j: int) -> tuple[int, int]:
        return j * self.c.cols, min(self.g.n, (j + 1) * self.c.cols)

    def load_a(self, buf: str, geo: Geometry, it: Item) -> None:
        """Rows ``it.rows`` of A panel ``it.f`` of block ``it.block`` into ``buf``."""
        b, m0, _ = geo.blocks[it.block]
        r0, r1 = it.rows
        k0, k1 = self.panel(it.f)
        self.body.append(Mvin(Local(buf, (r0, r1), (0, k1 - k0)),
                              Remote(self.g.lhs, b if self.g.lhs_batched else 0,
                                     (m0 + r0, m0 + r1), (k0, k1))))


class _OS(_GemmEmitter):
    def plan(self) -> tuple[int, bool]:
        """K block length and whether W stays resident."""
        g, c = self.g, self.c
        ext = sum(c.rows * c.cols * e.dtype.bits // 8 for e in self.epi.externals)
        self.check_fit(2 * c.rows * self.elem + 2 * c.cols * self.elem + ext,
                       self.acc_bytes(c.rows))
        kb = g.k
        while kb > 1 and (2 * c.rows * kb + 2 * kb * c.cols) * self.elem + ext > c.spad_capacity:
            kb = _cdiv(kb, 2)
        whole_w = _cdiv(g.n, c.cols) * g.k * c.cols * self.elem
        resident = kb == g.k and 2 * c.rows * kb * self.elem + whole_w + ext <= c.spad_capacity
        return kb, resident

    def emit(self) -> None:
        g, c = self.g, self.c
        kb, resident = self.plan()
        nt = _cdiv(g.n, c.cols)
        a_names = [self.buf(f"a{i}", "spad", c.rows, kb, g.operand_dtype) for i in (0, 1)]
        w_names = [self.buf(f"w{i}buf", "spad", kb, c.cols, g.operand_dtype)
                   for i in range(nt if resident else 2)]
        acc_names = [self.buf(f"c{i}", "acc", c.rows, c.cols) for i in (0, 1)]
        temps, exts = self.epilogue_buffers(c.rows)
        tiles: list[tuple[list[Instruction], list[Instruction], list[Instruction]]] = []
        tile = loads = panel = 0
        for b in range(g.batches):
            for mi, (m0, m1) in enumerate(_spans(g.m, c.rows)):
                panel += 1
                for j, (n0, n1) in enumerate(_spans(g.n, c.cols)):
                    acc = acc_names[tile % 2]
                    first: list[Instruction] = []
                    rest: list[Instruction] = [Label(f"b{b}_m{mi}_n{j}")]
                    for kk, (k0, k1) in enumerate(_spans(g.k, kb)):
                        step = first if kk == 0 else rest
                        a = a_names[panel % 2] if kb == g.k else a_names[loads % 2]
                        if kb != g.k or j == 0:
                            step.append(Mvin(Local(a, (0, m1 - m0), (0, k1 - k0)),
                                             Remote(g.lhs, b if g.lhs_batched else 0,
                                                    (m0, m1), (k0, k1))))
                        w = w_names[j] if resident else w_names[loads % 2]
                        if not resident or (mi == 0 and (b == 0 or g.rhs_batched)):
                            step.append(Mvin(Local(w, (0, k1 - k0), (0, n1 - n0)),
                                             Remote(g.rhs, b if g.rhs_batched else 0,
                                                    (k0, k1), (n0, n1))))
                        loads += 1
                        rest.append(MatmulOS(Local(acc, (0, m1 - m0), (0, n1 - n0)),
                                             Local(a, (0, m1 - m0), (0, k1 - k0)),
                                             Local(w, (0, k1 - k0), (0, n1 - n0)), kk > 0))
                    tile += 1
                    body, self.body = self.body, []
                    self.finish_tile(acc, (m0, m1), (0, m1 - m0), (n0, n1), b, temps, exts)
                    tiles.append((first, rest, self.body))
                    self.body = body
        # the next tile's first operands go before this tile's stores: the in-order
        # DMA would otherwise hold them until this tile has drained
        for t, (first, rest, finish) in enumerate(tiles):
            self.body += (first if t == 0 else []) + rest
            if t + 1 < len(tiles):
                self.body += tiles[t + 1][0]
            self.body += finish


class _IS(_GemmEmitter):
    """is: per block of ``nb`` output columns, M tile (<= C) and K tile (<= R): preload
    the A tile (prefetched like ws weights), stream the weight panel's columns; W
    panels stay resident across M tiles when they fit."""

    def plan(self) -> tuple[int, bool]:
        """Columns per block and whether the W panels stay resident."""
        g, c = self.g, self.c
        kt = _cdiv(g.k, c.rows)
        ext = sum(c.cols * c.cols * e.dtype.bits // 8 for e in self.epi.externals)
        spad_fixed = (PREFETCH + 1) * c.cols * c.rows * self.elem + ext
        nb = g.n
        while nb > 1:
            acc = (2 * nb + self.ntemps * c.cols) * c.cols * 4
            if acc <= c.acc_capacity:
                if spad_fixed + kt * c.rows * nb * self.elem <= c.spad_capacity:
                    return nb, True
                if spad_fixed + 2 * c.rows * nb * self.elem <= c.spad_capacity:
                    return nb, False
            nb = _cdiv(nb, 2)
        self.check_fit(spad_fixed + 2 * c.rows * self.elem, (2 + self.ntemps) * c.cols * 4)
        return 1, False

    def emit(self) -> None:
        g, c = self.g, self.c
        nb, resident = self.plan()
        chunk = nb if c.scalesim else min(nb, CHUNK_ROWS)
        kt = _cdiv(g.k, c.rows)
        w_names = [self.buf(f"w{i}buf", "spad", c.rows, nb, g.operand_dtype)
                   for i in range(kt if resident else 2)]
        nw = PREFETCH + 1
        a_names = [self.buf(f"a{i}", "spad", c.cols, c.rows, g.operand_dtype) for i in range(nw)]
        acc_names = [self.buf(f"c{i}", "acc", c.cols, nb) for i in (0, 1)]
        temps, exts = self.epilogue_buffers(c.cols)
        folds = [(b, n, m, i) for b in range(g.batches) for n in _spans(g.n, nb)
                 for m in _spans(g.m, c.cols) for i in range(kt)]
        for f in range(min(PREFETCH, len(folds))):
            self.load_input(folds[f], a_names[f])
        for f, (b, (n0, n1), (m0, m1), i) in enumerate(folds):
            k0, k1 = i * c.rows, min(g.k, (i + 1) * c.rows)
            acc = acc_names[(f // kt) % 2]
            self.body.append(Label(f"b{b}_n{n0}_m{m0}_k{i}"))
            w = w_names[i] if resident else w_names[f % 2]
            if not resident or m0 == 0:
                for c0, c1 in _spans(n1 - n0, chunk):
                    self.body.append(Mvin(Local(w, (0, k1 - k0), (c0, c1)),
                                          Remote(g.rhs, b if g.rhs_batched else 0,
                                                 (k0, k1), (n0 + c0, n0 + c1))))
            self.body.append(Preload(f % 2, Local(a_names[f % nw], (0, m1 - m0), (0, k1 - k0))))
            if f + PREFETCH < len(folds):
                self.load_input(folds[f + PREFETCH], a_names[(f + PREFETCH) % nw])
            for c0, c1 in _spans(n1 - n0, chunk):
                self.body.append(MatmulIS(Local(acc, (0, m1 - m0), (c0, c1)),
                                          Local(w, (0, k1 - k0), (c0, c1)), f % 2, i > 0))
            if i == kt - 1:
                for c0, c1 in _spans(n1 - n0, c.cols):
                    self.finish_tile(acc, (m0, m1), (0, m1 - m0), (n0 + c0, n0 + c1), b,
                                     temps, exts, col0=c0)

    def load_input(self, fold: tuple[int, tuple[int, int], tuple[int, int], int], buf: str) -> None:
        g, c = self.g, self.c
        b, _, (m0, m1), i = fold
        k0, k1 = i * c.rows, min(g.k, (i + 1) * c.rows)
        self.body.append(Mvin(Local(buf, (0, m1 - m0), (0, k1 - k0)),
                              Remote(g.lhs, b if g.lhs_batched else 0, (m0, m1), (k0, k1))))


_EMITTERS: dict[str, type[_GemmEmitter]] = {"ws": _WS, "os": _OS, "is": _IS}


def emit_gemm(config: ArrayConfig, gemm: Gemm, epi: Epilogue) -> tuple[list[Buffer], list[Instruction]]:
    """Buffers and body computing ``out = epilogue(lhs @ rhs)`` on ``config``'s array."""
    em = _EMITTERS[config.dataflow](config, gemm, epi)
    em.emit()
    return em.buffers, em.body


def emit_vector(config: ArrayConfig, out: str, shape: tuple[int, int, int],
                epi: Epilogue) -> tuple[list[Buffer], list[Instruction]]:
    """Buffers and body computing ``out = epilogue()`` tile by tile on the vector unit
    (no array work: every source is an external operand or an earlier step)."""
    em = _Emitter(config, Gemm(shape[0], shape[1], 1, shape[2], "", "", out, True, True,
                               DType.F32), epi)
    per_row = (1 + em.ntemps) * config.cols * 4
    rows = max(1, min(shape[1], CHUNK_ROWS, config.acc_capacity // per_row))
    em.check_fit(0, em.acc_bytes(rows) // 2)
    acc = em.buf("c0", "acc", rows, config.cols)
    temps, exts = em.epilogue_buffers(rows)
    for b in range(shape[0]):
        for r0, r1 in _spans(shape[1], rows):
            for n0, n1 in _spans(shape[2], config.cols):
                em.body.append(Label(f"b{b}_r{r0}_c{n0}"))
                em.finish_tile(acc, (r0, r1), (0, r1 - r0), (n0, n1), b, temps, exts)
    return em.buffers, em.body
