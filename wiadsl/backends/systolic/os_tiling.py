"""The output-stationary GEMM emitter (docs/systolic.md, "Tiling", "os pipelining")."""

from __future__ import annotations

from dataclasses import dataclass

from .emitter import GemmEmitter, cdiv, spans
from .isa import Label, Local, MatmulOS, Mvin, Remote


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


class OsEmitter(GemmEmitter):
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
            kb = cdiv(kb, 2)
        whole_w = cdiv(g.n, c.cols) * g.k * c.cols * self.elem
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
            for mi, m in enumerate(spans(g.m, c.rows)):
                for j, n in enumerate(spans(g.n, c.cols)):
                    ks = [(0, c.rows), (c.rows, g.k)] if split and t == 0 else spans(g.k, kb)
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
            return 0 if free else cdiv(nbytes, c.dma_bytes_per_cycle)

        hold = max(kb, c.rows)
        drain = kb + c.rows + c.cols - 2 + len(self.epi.steps) * cdiv(c.rows * c.cols, c.vec_lanes)
        store = dma(c.rows * c.cols * self.epi.out_dtype.bits // 8) + sum(
            dma(c.rows * c.cols * e.dtype.bits // 8) for e in self.epi.externals)
        load = dma(c.rows * kb * self.elem) + dma(kb * c.cols * self.elem)
        ahead = max(1, min(nsteps - 1, cdiv(drain + store + load + lat, hold)))
        steps_per_tile = cdiv(g.k, kb)
        naccs = max(2, min(ntiles, 1 + cdiv(drain + store, hold * steps_per_tile)))
        nt = cdiv(g.n, c.cols)
        ext = sum(c.rows * c.cols * e.dtype.bits // 8 for e in self.epi.externals)
        while True:
            panels = 2 if kb != g.k else max(2, 1 + cdiv(ahead, nt))
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
        nt = cdiv(g.n, c.cols)
        nw = nt if resident else ahead + 1
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
