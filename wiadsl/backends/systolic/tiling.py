"""Tiled instruction streams for one GEMM (plus its epilogue) on a ws, is or os array.

``Gemm`` names the DRAM views of C[b] = A[b] @ W[b] (A: M x K, W: K x N); the
emitters return the local buffers they use and the instruction body.

ws (weight-stationary), per batch and block of ``mb`` rows: folds of N tile j
(<= C cols) x K panel i (<= R rows), in the order ``schedule.choose`` picks from
bandwidth; per fold the W tile is loaded (prefetched d folds ahead), preloaded
into slot f % 2, and the block's A rows stream through it chunk by chunk
(matmul.ws[.acc]); after a tile's last fold, the epilogue on the vector unit and
mvout per chunk. A panels stay resident in the scratchpad when they fit. is
(input-stationary) is the same emitter on C^T = W^T @ A^T: A tiles held, W
columns streaming, blocks over N. os (output-stationary): for each M tile (<= R)
x N tile (<= C) one matmul.os per K block, then epilogue and mvout; loads
pipelined ahead of the matmuls, W resident if it fits.

Invariants: every tile is within the array (K tile <= R and N tile <= C for ws,
K tile <= R and M tile <= C for is, M tile <= R and N tile <= C for os); partial
edge tiles are smaller tiles, never padding; the buffers fit the configured
scratchpad and accumulator (else WiaUsageError); a load never precedes (in program
order) the last instruction reading its buffer's previous contents. In
``scalesim`` timing the whole streamed extent goes per fold (T = M for ws, N for
is, K for os), as SCALE-Sim models it.
"""

from __future__ import annotations

from ...dtypes import DType
from .config import ArrayConfig
from .emitter import CHUNK_ROWS, PREFETCH, Emitter, Gemm, GemmEmitter, cdiv, spans
from .epilogue import Epilogue
from .isa import (
    Buffer,
    Instruction,
    Label,
    Local,
    MatmulIS,
    MatmulWS,
    Mvin,
    Preload,
    Remote,
    Schedule,
)
from .os_tiling import OsEmitter
from .schedule import Fold, Geometry, choose

__all__ = ["CHUNK_ROWS", "Gemm", "emit_gemm", "emit_vector"]


class _WS(GemmEmitter):
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
            resident = mb * cdiv(g.k, c.rows) * c.rows * self.elem
            if self.acc_bytes(mb) <= c.acc_capacity:
                if spad_fixed + resident <= c.spad_capacity:
                    return mb, True
                if spad_fixed + 2 * mb * c.rows * self.elem <= c.spad_capacity:
                    return mb, False
            mb = cdiv(mb, 2)
        self.check_fit((PREFETCH + 1) * c.rows * c.cols * self.elem + 2 * c.rows * self.elem + ext(1),
                       self.acc_bytes(1))
        return 1, False

    def geometry(self, mb: int, resident: bool) -> Geometry:
        """What the fold-order scheduler needs to know (schedule.Geometry)."""
        g, c = self.g, self.c
        chunk = mb if c.scalesim else min(mb, CHUNK_ROWS)
        a_room = mb * cdiv(g.k, c.rows) * c.rows * self.elem if resident else 2 * mb * c.rows * self.elem
        ext = sum(chunk * c.cols * e.dtype.bits // 8 for e in self.epi.externals)
        spare_acc = c.acc_capacity - self.ntemps * chunk * c.cols * 4
        # an operand constant along the output's rows is constant along the streamed
        # axis for ws, along the held one for is
        inv = [(e.col_invariant, e.row_invariant) if self.transposed else
               (e.row_invariant, e.col_invariant) for e in self.epi.externals]
        return Geometry(
            c.rows, c.cols, c.dma_bytes_per_cycle, 0 if c.free_dma else c.dma_latency, c.vec_lanes,
            tuple((b, m0, m1) for b in range(g.batches) for m0, m1 in spans(self.streamed(), mb)),
            chunk, tuple(k1 - k0 for k0, k1 in spans(g.k, c.rows)),
            tuple(n1 - n0 for n0, n1 in spans(self.held(), c.cols)), self.elem,
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


_EMITTERS: dict[str, type[GemmEmitter]] = {"ws": _WS, "os": OsEmitter, "is": _IS}


def emit_gemm(config: ArrayConfig, gemm: Gemm, epi: Epilogue) -> tuple[list[Buffer], list[Instruction]]:
    """Buffers and body computing ``out = epilogue(lhs @ rhs)`` on ``config``'s array."""
    em = _EMITTERS[config.dataflow](config, gemm, epi)
    em.emit()
    return em.buffers, em.body


def emit_vector(config: ArrayConfig, out: str, shape: tuple[int, int, int],
                epi: Epilogue) -> tuple[list[Buffer], list[Instruction]]:
    """Buffers and body computing ``out = epilogue()`` tile by tile on the vector unit
    (no array work: every source is an external operand or an earlier step)."""
    em = Emitter(config, Gemm(shape[0], shape[1], 1, shape[2], "", "", out, True, True,
                               DType.F32), epi)
    per_row = (1 + em.ntemps) * config.cols * 4
    rows = max(1, min(shape[1], CHUNK_ROWS, config.acc_capacity // per_row))
    em.check_fit(0, em.acc_bytes(rows) // 2)
    acc = em.buf("c0", "acc", rows, config.cols)
    temps, exts = em.epilogue_buffers(rows)
    for b in range(shape[0]):
        for r0, r1 in spans(shape[1], rows):
            for n0, n1 in spans(shape[2], config.cols):
                em.body.append(Label(f"b{b}_r{r0}_c{n0}"))
                em.finish_tile(acc, (r0, r1), (0, r1 - r0), (n0, n1), b, temps, exts)
    return em.buffers, em.body
