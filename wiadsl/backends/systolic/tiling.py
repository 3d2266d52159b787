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
from .schedule import Fold, Geometry, choose

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

    def epilogue_buffers(self, rows: int, cols: int = 0) -> tuple[list[str], list[str]]:
        """Temporaries and external operand buffers for output tiles up to rows x cols
        (cols: the array's width unless given)."""
        cols = cols or self.c.cols
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
    """ws: folds of (row block, N tile j, K panel i) in the order ``schedule.choose``
    picks; the W tile is held in a weight slot, the block's A rows stream through it.

    ``_IS`` is this emitter on the transposed product C^T = W^T @ A^T: the held tile
    is an A tile (M tile <= C x K panel, held transposed), the streamed operand is W's
    columns and the blocks split N; the scheduler's geometry is the same with M and N
    swapped (``held`` and ``streamed`` below), so is gets the same fold orders."""

    transposed = False

    def streamed(self) -> int:
        """The extent that streams through the array (ws: M rows; is: N columns)."""
        return self.g.n if self.transposed else self.g.m

    def held(self) -> int:
        """The extent of the held tiles beside K (ws: N, tiles <= C; is: M, tiles <= C)."""
        return self.g.m if self.transposed else self.g.n

    def plan(self) -> tuple[int, bool]:
        """Streamed extent per block and whether its K panels stay resident."""
        g, c = self.g, self.c
        mb = self.streamed()

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
        # an operand constant along the output's rows is constant along the streamed
        # axis for ws, along the held one for is
        inv = [(e.col_invariant, e.row_invariant) if self.transposed else
               (e.row_invariant, e.col_invariant) for e in self.epi.externals]
        return Geometry(
            c.rows, c.cols, c.dma_bytes_per_cycle, 0 if c.free_dma else c.dma_latency, c.vec_lanes,
            tuple((b, m0, m1) for b in range(g.batches) for m0, m1 in _spans(self.streamed(), mb)),
            chunk, tuple(k1 - k0 for k0, k1 in _spans(g.k, c.rows)),
            tuple(n1 - n0 for n0, n1 in _spans(self.held(), c.cols)), self.elem,
            self.epi.out_dtype.bits // 8,
            tuple((*v, e.dtype.bits // 8) for v, e in zip(inv, self.epi.externals)),
            len(self.epi.steps), resident, spare_acc // (mb * c.cols * 4),
            (c.spad_capacity - a_room - ext) // (c.rows * c.cols * self.elem),
            free_dma=c.free_dma)

    def emit(self) -> None:
        c = self.c
        mb, resident = self.plan()
        s = choose(self.geometry(mb, resident), search=not c.scalesim)
        geo = s.geo
        if not c.scalesim:
            self.body.append(Schedule(s.fields()))
        streamed = self.stream_buffers(len(geo.k_ext) if resident else 2, mb)
        nw = s.prefetch + 1
        held = self.held_buffers(nw)
        accs = self.acc_buffers(s.accumulators, mb)
        chunk = max(geo.chunk, geo.edge_chunk)
        temps, exts = self.epilogue_buffers(*((c.cols, chunk) if self.transposed else (chunk, c.cols)))
        cur = 0
        for it in s.program:
            fd = s.folds[it.f] if it.kind != "a" else s.folds[cur]
            b, m0, _ = geo.blocks[fd.block]
            chunks = s.fold_chunks(it.f) if it.kind in ("mm", "out") else []
            if it.kind == "w":
                self.body.append(self.load_held(held[it.f % nw], b, fd.i, fd.j))
            elif it.kind == "lbl":
                cur = it.f
                self.body.append(Label(f"b{b}_{'n' if self.transposed else 'm'}{m0}_"
                                       f"{'m' if self.transposed else 'n'}{fd.j}_k{fd.i}"))
            elif it.kind == "a":
                blk_b, blk_m0, _ = geo.blocks[it.block]
                self.body.append(self.load_streamed(streamed[it.f] if resident else streamed[cur % 2],
                                                    blk_b, blk_m0, it.f, it.rows))
            elif it.kind == "pre":
                self.body.append(Preload(it.f % 2, self.held_tile(held[it.f % nw], fd.i, fd.j)))
            elif it.kind == "mm":
                src = streamed[fd.i] if resident else streamed[it.f % 2]
                for rows in chunks:
                    self.body.append(self.matmul(accs[fd.acc], src, it.f % 2, fd, rows))
            else:
                for rows in chunks:
                    self.finish(accs[fd.acc], b, m0, fd.j, rows, temps, exts)

    def panel(self, i: int) -> tuple[int, int]:
        return i * self.c.rows, min(self.g.k, (i + 1) * self.c.rows)

    def tile(self, j: int) -> tuple[int, int]:
        return j * self.c.cols, min(self.held(), (j + 1) * self.c.cols)

    # ------------------------------------------------ the dataflow's own operands
    def stream_buffers(self, n: int, mb: int) -> list[str]:
        return [self.buf(f"a{i}", "spad", mb, self.c.rows, self.g.operand_dtype) for i in range(n)]

    def held_buffers(self, n: int) -> list[str]:
        return [self.buf(f"w{i}buf", "spad", self.c.rows, self.c.cols, self.g.operand_dtype)
                for i in range(n)]

    def acc_buffers(self, n: int, mb: int) -> list[str]:
        return [self.buf(f"c{i}", "acc", mb, self.c.cols) for i in range(n)]

    def held_tile(self, buf: str, i: int, j: int) -> Local:
        (k0, k1), (n0, n1) = self.panel(i), self.tile(j)
        return Local(buf, (0, k1 - k0), (0, n1 - n0))

    def load_held(self, buf: str, b: int, i: int, j: int) -> Mvin:
        """The W tile of panel i, N tile j into ``buf``."""
        g = self.g
        return Mvin(self.held_tile(buf, i, j),
                    Remote(g.rhs, b if g.rhs_batched else 0, self.panel(i), self.tile(j)))

    def load_streamed(self, buf: str, b: int, m0: int, i: int, rows: tuple[int, int]) -> Mvin:
        """Rows ``rows`` (local to the block at m0) of A panel i into ``buf``."""
        (r0, r1), (k0, k1) = rows, self.panel(i)
        return Mvin(Local(buf, (r0, r1), (0, k1 - k0)),
                    Remote(self.g.lhs, b if self.g.lhs_batched else 0, (m0 + r0, m0 + r1), (k0, k1)))

    def matmul(self, acc: str, src: str, slot: int, fd: Fold, rows: tuple[int, int]) -> Instruction:
        (k0, k1), (n0, n1) = self.panel(fd.i), self.tile(fd.j)
        return MatmulWS(Local(acc, rows, (0, n1 - n0)), Local(src, rows, (0, k1 - k0)), slot,
                        not fd.first)

    def finish(self, acc: str, b: int, m0: int, j: int, rows: tuple[int, int], temps: list[str],
               exts: list[str]) -> None:
        (r0, r1), (n0, n1) = rows, self.tile(j)
        self.finish_tile(acc, (m0 + r0, m0 + r1), rows, (n0, n1), b, temps, exts)


@dataclass(frozen=True)
class _Step:
    """One os matmul: tile ``t`` (batch b, rows m, cols n) over K range k."""

    t: int
    b: int
    mi: int
    m: tuple[int, int]
    j: int
    n: tuple[int, int]
    k: tuple[int, int]
    first: bool     # overwrites the accumulator
    last: bool      # the tile's epilogue and stores follow


class _OS(_GemmEmitter):
    """os: per M tile (<= R) x N tile (<= C), one matmul.os per K block (the whole K
    when it fits), then the epilogue and mvout.

    In overlap timing the tiles are software-pipelined: the loads of the next
    ``ahead`` steps go before each matmul (never before the matmul that last read
    their buffer: rotating buffers stay correct), each tile's stores follow its
    matmul, and enough accumulators rotate that a tile need not wait for an earlier
    tile's stores; the very first tile's K splits at R so the array starts once a
    sliver of its operands has arrived. ``ahead`` and the accumulator count come from
    the step's length, its fill/drain and its DMA costs (``pipeline``)."""

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

    def steps(self, kb: int) -> list[_Step]:
        g, c = self.g, self.c
        # the first tile's K split at R: its first matmul needs R columns of A and R
        # rows of W, not all K (a second block of >= R keeps the port time the same)
        split = not c.scalesim and kb == g.k and g.k >= 2 * c.rows
        out: list[_Step] = []
        t = 0
        for b in range(g.batches):
            for mi, m in enumerate(_spans(g.m, c.rows)):
                for j, n in enumerate(_spans(g.n, c.cols)):
                    ks = [(0, c.rows), (c.rows, g.k)] if split and t == 0 else _spans(g.k, kb)
                    out += [_Step(t, b, mi, m, j, n, k, x == 0, x == len(ks) - 1)
                            for x, k in enumerate(ks)]
                    t += 1
        return out

    def pipeline(self, kb: int, resident: bool, ntiles: int, nsteps: int) -> tuple[int, int, int]:
        """(steps of loads ahead, accumulators, A panel buffers) for overlap timing.

        A load placed behind a tile's stores in the in-order DMA waits until that tile
        has drained (T + R + C - 2 after its start), stored and, with its own transfer,
        latency: it must sit enough steps (of max(T, R) cycles each) ahead. A tile's
        accumulator is reused once its stores have read it."""
        g, c = self.g, self.c
        if c.scalesim:
            return 1, 2, 2
        free = c.free_dma
        lat = 0 if free else c.dma_latency

        def dma(nbytes: int) -> int:
            return 0 if free else _cdiv(nbytes, c.dma_bytes_per_cycle)

        hold = max(kb, c.rows)
        drain = kb + c.rows + c.cols - 2 + len(self.epi.steps) * _cdiv(c.rows * c.cols, c.vec_lanes)
        store = dma(c.rows * c.cols * self.epi.out_dtype.bits // 8) + sum(
            dma(c.rows * c.cols * e.dtype.bits // 8) for e in self.epi.externals)
        load = dma(c.rows * kb * self.elem) + dma(kb * c.cols * self.elem)
        ahead = max(1, min(nsteps - 1, _cdiv(drain + store + load + lat, hold)))
        steps_per_tile = _cdiv(g.k, kb)
        naccs = max(2, min(ntiles, 1 + _cdiv(drain + store, hold * steps_per_tile)))
        nt = _cdiv(g.n, c.cols)
        ext = sum(c.rows * c.cols * e.dtype.bits // 8 for e in self.epi.externals)
        while True:
            panels = 2 if kb != g.k else max(2, 1 + _cdiv(ahead, nt))
            rot = ahead + 1 if kb != g.k else panels
            w = nt * g.k * c.cols if resident else (ahead + 1) * kb * c.cols
            spad = (rot * c.rows * kb + w) * self.elem + ext
            if spad <= c.spad_capacity or ahead == 1:
                break
            ahead -= 1
        while naccs > 2 and (naccs + self.ntemps) * c.rows * c.cols * 4 > c.acc_capacity:
            naccs -= 1
        return ahead, naccs, rot

    def emit(self) -> None:
        g, c = self.g, self.c
        kb, resident = self.plan()
        steps = self.steps(kb)
        ntiles = steps[-1].t + 1
        ahead, naccs, na = self.pipeline(kb, resident, ntiles, len(steps))
        whole = kb == g.k       # A panels (and resident W tiles) hold all of K
        nt = _cdiv(g.n, c.cols)
        nw = nt if resident else (ahead + 1 if not whole else 2 if c.scalesim else ahead + 1)
        a_names = [self.buf(f"a{i}", "spad", c.rows, kb, g.operand_dtype) for i in range(na)]
        w_names = [self.buf(f"w{i}buf", "spad", kb, c.cols, g.operand_dtype) for i in range(nw)]
        acc_names = [self.buf(f"c{i}", "acc", c.rows, c.cols) for i in range(naccs)]
        temps, exts = self.epilogue_buffers(c.rows)
        loads: list[list[Mvin]] = []
        gates: list[int] = []               # the step whose matmul last read a load's buffer
        mms: list[MatmulOS] = []
        last_read: dict[str, int] = {}
        panel = -1
        for u, st in enumerate(steps):
            if st.first and st.j == 0:
                panel += 1
            (m0, m1), (n0, n1), (k0, k1) = st.m, st.n, st.k
            ka = (k0, k1) if whole else (0, k1 - k0)
            a = a_names[panel % na] if whole else a_names[u % na]
            w = w_names[st.j] if resident else w_names[u % nw]
            mine: list[Mvin] = []
            if not whole or st.j == 0:
                mine.append(Mvin(Local(a, (0, m1 - m0), ka),
                                 Remote(g.lhs, st.b if g.lhs_batched else 0, (m0, m1), (k0, k1))))
            if not resident or (st.mi == 0 and (st.b == 0 or g.rhs_batched)):
                mine.append(Mvin(Local(w, ka, (0, n1 - n0)),
                                 Remote(g.rhs, st.b if g.rhs_batched else 0, (k0, k1), (n0, n1))))
            loads.append(mine)
            gates.append(max((last_read.get(x.dst.buffer, -1) for x in mine), default=-1))
            mms.append(MatmulOS(Local(acc_names[st.t % naccs], (0, m1 - m0), (0, n1 - n0)),
                                Local(a, (0, m1 - m0), ka), Local(w, ka, (0, n1 - n0)),
                                not st.first))
            last_read[a] = last_read[w] = u
        issued = 0
        for s, st in enumerate(steps):
            # loads in order, up to ``ahead`` steps early, each after its buffer's last reader
            while issued < len(steps) and issued <= s + ahead and gates[issued] < s:
                self.body += loads[issued]
                issued += 1
            if st.first:
                self.body.append(Label(f"b{st.b}_m{st.mi}_n{st.j}"))
            self.body.append(mms[s])
            if st.last:
                self.finish_tile(acc_names[st.t % naccs], st.m, (0, st.m[1] - st.m[0]), st.n,
                                 st.b, temps, exts)


class _IS(_WS):
    """is: ws on C^T = W^T @ A^T (``_WS``). Per block of N columns, M tile j (<= C) and
    K panel i (<= R): the A tile is preloaded (held transposed: K on the array rows, M
    on its columns) and the W panel's columns stream through it, in the fold order
    ``schedule.choose`` picks from bandwidth; W panels stay resident across M tiles
    when they fit (the resident "streamed panels" of the ws view)."""

    transposed = True

    def stream_buffers(self, n: int, mb: int) -> list[str]:
        return [self.buf(f"w{i}buf", "spad", self.c.rows, mb, self.g.operand_dtype)
                for i in range(n)]

    def held_buffers(self, n: int) -> list[str]:
        return [self.buf(f"a{i}", "spad", self.c.cols, self.c.rows, self.g.operand_dtype)
                for i in range(n)]

    def acc_buffers(self, n: int, mb: int) -> list[str]:
        return [self.buf(f"c{i}", "acc", self.c.cols, mb) for i in range(n)]

    def held_tile(self, buf: str, i: int, j: int) -> Local:
        (k0, k1), (m0, m1) = self.panel(i), self.tile(j)
        return Local(buf, (0, m1 - m0), (0, k1 - k0))

    def load_held(self, buf: str, b: int, i: int, j: int) -> Mvin:
        """The A tile of M tile j, K panel i into ``buf``."""
        g = self.g
        return Mvin(self.held_tile(buf, i, j),
                    Remote(g.lhs, b if g.lhs_batched else 0, self.tile(j), self.panel(i)))

    def load_streamed(self, buf: str, b: int, n0: int, i: int, cols: tuple[int, int]) -> Mvin:
        """Columns ``cols`` (local to the block at n0) of W panel i into ``buf``."""
        (c0, c1), (k0, k1) = cols, self.panel(i)
        return Mvin(Local(buf, (0, k1 - k0), (c0, c1)),
                    Remote(self.g.rhs, b if self.g.rhs_batched else 0, (k0, k1), (n0 + c0, n0 + c1)))

    def matmul(self, acc: str, src: str, slot: int, fd: Fold, cols: tuple[int, int]) -> Instruction:
        (k0, k1), (m0, m1) = self.panel(fd.i), self.tile(fd.j)
        return MatmulIS(Local(acc, (0, m1 - m0), cols), Local(src, (0, k1 - k0), cols), slot,
                        not fd.first)

    def finish(self, acc: str, b: int, n0: int, j: int, cols: tuple[int, int], temps: list[str],
               exts: list[str]) -> None:
        (c0, c1), (m0, m1) = cols, self.tile(j)
        self.finish_tile(acc, (m0, m1), (0, m1 - m0), (n0 + c0, n0 + c1), b, temps, exts, col0=c0)


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
