"""The ws (and is) fold order, chosen from bandwidth, and the cycle floor the DMA
allows for it.

A ws GEMM block (``mb`` rows of A, all of K and N) is a set of folds (N tile j,
K panel i), each streaming the block's rows through one weight tile. What a fold
needs from the DMA: its weight tile (k x n operand bytes), the A panel's row
chunks the first time the panel is used (rows x k), and after a tile's last fold
its outputs (rows x n in the output dtype, plus epilogue operands). An is GEMM is
the same problem transposed (C^T = W^T A^T: held A tiles, streamed W columns; the
emitter maps it, ``tiling._IS``), so the names below say ws. With
``Geometry.free_dma`` (operands resident) transfers cost nothing.

Orders (the candidates; ``choose`` keeps the one with the lowest floor):
- ``n-outer``: for j: for i, two accumulators alternating per output tile. The
  first column pass needs all of A while it streams 1/nt of the work, so it is
  bandwidth-bound when A is large (f32 1000^3 on 128x128: 4 MB in 8 folds);
- ``k-first:p``: the first p panels K-outer over every N tile (one accumulator per
  N tile: partial sums wait in the accumulators), then N outer over the rest.
  Each of the first panels' A arrives while nt folds stream, and the rest of A is
  loaded in the DMA's spare time ("trickled") before the N-outer part needs it.
A narrower edge panel (K % R) can go first: less A before the first fold. The
prefetch distance d (weight tiles fetched d folds ahead, d + 1 buffers; 1-3 and
the distance that covers the latency behind short folds) and the chunk rows of
the first and last fold are chosen too. An order other than the old one
(``n-outer``, panels in order, d = 2) is taken only when its floor is lower by
more than ``MARGIN``.

The floor (``predict``): a fluid model of the very program the emitter writes.
DMA items run in program order, each ceil(bytes / bw) cycles, usable dma_latency
later, each after the last reader of the buffer it overwrites (weight buffer
f % (d + 1): fold f - d - 1's preload; an A buffer: the matmuls that last read
it). A preload takes R on the weight path once its tile has arrived and the
slot's previous matmuls have streamed; a chunk of T rows streams when its A rows,
its weights and (first fold of a tile) its accumulator rows are free, done
T + R + C - 2 later. Per finished chunk: its epilogue operands' loads, its vector
steps (the vector unit one chunk at a time) once they and the chunk are there,
then its store. The simulator reaches the floor exactly on every program tried
(tests/systolic/test_resident.py, test_fold_order.py).

Invariants: every order computes each (block, j, i) fold exactly once; a tile's
first fold overwrites its accumulator and its last fold is followed by its stores;
every A chunk is loaded before (in program order) the first matmul that reads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

#: a non-default order must beat the old one's floor by this fraction
MARGIN = 0.005
#: above this many folds the search is skipped (the old order, its floor only)
SEARCH_FOLDS = 4096
#: folds x candidates the search may model (compile time); beyond it, fewer candidates
SEARCH_WORK = 12_000
OLD_PREFETCH = 2


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def spans(total: int, step: int) -> list[tuple[int, int]]:
    return [(s, min(total, s + step)) for s in range(0, total, step)]


@dataclass(frozen=True)
class Geometry:
    """What the scheduler needs to know about one ws GEMM on one machine."""

    rows: int                                   # R
    cols: int                                   # C
    bw: int                                     # DMA bytes per cycle
    latency: int                                # DMA latency
    lanes: int                                  # vector lanes
    blocks: tuple[tuple[int, int, int], ...]    # (batch, m0, m1) row blocks
    chunk: int                                  # rows per matmul / store / A load
    k_ext: tuple[int, ...]                      # width of each K panel
    n_ext: tuple[int, ...]                      # width of each N tile
    elem: int                                   # operand bytes
    out_elem: int                               # output bytes
    ext_elems: tuple[tuple[bool, bool, int], ...] = ()  # epilogue operands: row/col invariant, bytes
    vec_steps: int = 0                          # vector instructions per output chunk
    resident: bool = True                       # every A panel has its own buffer
    max_accs: int = 2                           # accumulators [mb, C] that fit
    max_wbufs: int = OLD_PREFETCH + 1           # weight buffers [R, C] that fit
    edge_chunk: int = 0                         # rows per chunk in the first and last fold (0: chunk)
    free_dma: bool = False                      # operands resident: transfers cost nothing

    def chunks(self, block: int, fine: bool = False) -> list[tuple[int, int]]:
        """Row chunks (local to the block): one matmul / store / A load each."""
        _, m0, m1 = self.blocks[block]
        return spans(m1 - m0, self.edge_chunk if fine and self.edge_chunk else self.chunk)

    def a_bytes(self, i: int, rows: int) -> int:
        return rows * self.k_ext[i] * self.elem

    def w_bytes(self, i: int, j: int) -> int:
        return self.k_ext[i] * self.n_ext[j] * self.elem

    def ext_bytes(self, j: int, rows: int) -> int:
        """The epilogue operands' bytes for ``rows`` rows of output tile j."""
        n = self.n_ext[j]
        return sum((1 if ri else rows) * (1 if ci else n) * e for ri, ci, e in self.ext_elems)

    def out_bytes(self, j: int, rows: int) -> int:
        """What the DMA moves for ``rows`` finished rows of tile j: operands and stores."""
        return rows * self.n_ext[j] * self.out_elem + self.ext_bytes(j, rows)

    def dma(self, nbytes: int) -> int:
        return 0 if self.free_dma else cdiv(nbytes, self.bw)


@dataclass(frozen=True)
class Fold:
    block: int
    j: int
    i: int
    acc: int        # accumulator index
    first: bool     # overwrite the accumulator (first K panel of this tile)
    last: bool      # epilogue and stores follow


@dataclass(frozen=True)
class Item:
    """One step of the program: ``lbl``/``pre``/``mm``/``out`` of fold ``f``, ``w``
    (weights of fold ``f``) or ``a`` (rows ``rows`` of A panel ``f`` in ``block``)."""

    kind: str
    f: int
    rows: tuple[int, int] = (0, 0)
    block: int = 0


@dataclass
class WsSchedule:
    geo: Geometry
    order: str
    panels: tuple[int, ...]
    prefetch: int
    accumulators: int
    folds: list[Fold]
    program: list[Item] = field(default_factory=list)
    floor: int = 0
    stream: int = 0          # cycles the array streams (the compute floor)
    dma: int = 0             # cycles the DMA is busy (the bandwidth floor)
    peak_demand: int = 0     # the most bytes per streamed cycle a fold asks of the DMA

    def fold_chunks(self, f: int) -> list[tuple[int, int]]:
        """The matmul / store chunks of fold ``f`` (fine in the first and last fold)."""
        return self.geo.chunks(self.folds[f].block, f in (0, len(self.folds) - 1))

    def fields(self) -> tuple[tuple[str, str], ...]:
        """The ``; schedule`` note of the listing."""
        g = self.geo
        return (("order", self.order), ("panels", _runs(self.panels)),
                ("prefetch", str(self.prefetch)), ("accumulators", str(self.accumulators)),
                ("chunk", f"{g.chunk}/{g.edge_chunk or g.chunk}"),
                ("peak_demand", f"{self.peak_demand}B/cycle"), ("dma_bw", f"{g.bw}B/cycle"),
                ("operands", "resident" if g.free_dma else "dram"),
                ("stream", str(self.stream)), ("dma", str(self.dma)), ("floor", str(self.floor)))


def _runs(xs: tuple[int, ...]) -> str:
    """``7,0-6`` for (7, 0, 1, ..., 6): consecutive runs as ranges."""
    parts: list[str] = []
    start = prev = None
    for x in [*xs, None]:
        if start is not None and x is not None and x == prev + 1:  # type: ignore[operator]
            prev = x
            continue
        if start is not None:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = x
    return ",".join(parts)


def _panel_orders(g: Geometry) -> list[tuple[int, ...]]:
    natural = tuple(range(len(g.k_ext)))
    if len(natural) > 1 and g.k_ext[-1] < g.k_ext[0]:
        return [natural, (natural[-1], *natural[:-1])]
    return [natural]


def _folds(g: Geometry, order: str, panels: tuple[int, ...]) -> list[Fold]:
    nt = len(g.n_ext)
    p = int(order.split(":")[1]) if order.startswith("k-first") else 0
    out: list[Fold] = []
    for blk in range(len(g.blocks)):
        seq = [(j, i) for i in panels[:p] for j in range(nt)]
        seq += [(j, i) for j in range(nt) for i in panels[p:]]
        seen: set[int] = set()
        last = {j: max(k for k, (jj, _) in enumerate(seq) if jj == j) for j in range(nt)}
        for k, (j, i) in enumerate(seq):
            acc = j if p else (len(out) // len(panels)) % 2
            out.append(Fold(blk, j, i, acc, j not in seen, k == last[j]))
            seen.add(j)
    return out


class _Program:
    """Builds the item list: mandatory loads, weight prefetch, A trickled into the
    DMA's spare time (fluid: each streamed row lets the DMA move ``bw`` bytes)."""

    def __init__(self, g: Geometry, folds: list[Fold], d: int):
        self.g, self.folds, self.d = g, folds, d
        self.items: list[Item] = []
        self.loaded: set[tuple[int, int, tuple[int, int]]] = set()
        self.whole: set[tuple[int, int]] = set()     # (block, panel) loaded in full
        first: dict[tuple[int, int], int] = {}
        #: the last fold reading each (block, panel): the next block may reload the
        #: panel's buffer after it
        self.last_use: dict[tuple[int, int], int] = {}
        for f, fd in enumerate(folds):
            first.setdefault((fd.block, fd.i), f)
            self.last_use[(fd.block, fd.i)] = f
        self.pending = [(blk, i, r) for (blk, i), _ in sorted(first.items(), key=lambda x: x[1])
                        for r in g.chunks(blk)]

    def load(self, blk: int, i: int, rows: tuple[int, int]) -> int:
        self.items.append(Item("a", i, rows, blk))
        self.loaded.add((blk, i, rows))
        return self.g.a_bytes(i, rows[1] - rows[0])

    def mandatory(self, f: int) -> int:
        g, fd = self.g, self.folds[f]
        if g.resident and (fd.block, fd.i) in self.whole:
            return 0
        need = 0
        for r in g.chunks(fd.block, fine=f == 0):
            if not g.resident or (fd.block, fd.i, r) not in self.loaded:
                need += self.load(fd.block, fd.i, r)
        self.whole.add((fd.block, fd.i))
        return need

    def trickle(self, slack: int, f: int) -> int:
        """Before fold ``f``'s matmuls, load pending A chunks while the DMA has ``slack``
        bytes to spare: of f's block, or of the next block into a panel buffer that
        f's block has finished reading (an earlier fold was its last reader)."""
        block = self.folds[f].block
        while self.pending and slack > 0:
            blk, i, r = self.pending[0]
            if blk != block and (blk != block + 1 or self.last_use.get((block, i), f) >= f):
                break
            if (blk, i) in self.whole or (blk, i, r) in self.loaded:
                self.pending.pop(0)
                continue
            cost = self.g.a_bytes(i, r[1] - r[0])
            if cost > slack:
                break
            self.pending.pop(0)
            slack -= self.load(blk, i, r)
        return slack

    def build(self) -> list[Item]:
        g, folds = self.g, self.folds
        # only fold 0's weights go first: the next tiles queue behind its A, which the
        # array needs sooner
        self.items = [Item("w", 0)] if folds else []
        fetched, slack = 1, 0
        for f, fd in enumerate(folds):
            self.items.append(Item("lbl", f))
            need = self.mandatory(f)
            self.items.append(Item("pre", f))
            while fetched <= min(f + self.d, len(folds) - 1):
                self.items.append(Item("w", fetched))
                need += g.w_bytes(folds[fetched].i, folds[fetched].j)
                fetched += 1
            _, m0, m1 = g.blocks[fd.block]
            if fd.last:
                need += g.out_bytes(fd.j, m1 - m0)
            slack += (m1 - m0) * g.bw - need
            if g.resident:
                slack = self.trickle(slack, f)
            self.items.append(Item("mm", f))
            if fd.last:
                self.items.append(Item("out", f))
        return self.items


def _latest(ranges: list[tuple[int, int, int]], r0: int, r1: int) -> int:
    """The latest time among (lo, hi, time) entries overlapping rows [r0, r1)."""
    return max((t for lo, hi, t in ranges if lo < r1 and r0 < hi), default=0)


def predict(s: WsSchedule) -> tuple[int, int]:
    """(cycles, DMA busy cycles) of ``s.program`` in the fluid model (module docstring)."""
    g, folds = s.geo, s.folds
    R, C = g.rows, g.cols
    nw = s.prefetch + 1
    dma = busy = wl = arr = end = cur = vec_free = 0
    w_ready: dict[int, int] = {}
    a_ready: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
    pre_done: dict[int, int] = {}
    streamed: dict[int, int] = {}
    done: dict[int, list[tuple[int, int, int]]] = {}
    acc_read: dict[int, list[tuple[int, int, int]]] = {}
    # (rows, read end) of the matmuls that last read each A buffer: panel i's own
    # (resident: a later block reloads it) or one of two alternating per fold
    a_read: dict[int, list[tuple[int, int, int]]] = {}
    for it in s.program:
        if it.kind == "lbl":
            cur = it.f
        elif it.kind == "w":
            # buffer f % nw: fold f - nw's preload must have read it (write after read)
            dma = max(dma, pre_done.get(it.f - nw, 0))
            cost = g.dma(g.w_bytes(folds[it.f].i, folds[it.f].j))
            dma, busy = dma + cost, busy + cost
            w_ready[it.f] = dma + g.latency
        elif it.kind == "a":
            dma = max(dma, _latest(a_read.get(it.f if g.resident else cur % 2, []), *it.rows))
            cost = g.dma(g.a_bytes(it.f, it.rows[1] - it.rows[0]))
            dma, busy = dma + cost, busy + cost
            a_ready.setdefault((it.block, it.f), []).append((*it.rows, dma + g.latency))
        elif it.kind == "pre":
            wl = max(wl, w_ready[it.f], streamed.get(it.f - 2, 0)) + R
            pre_done[it.f] = wl
        elif it.kind == "mm":
            fd = folds[it.f]
            done[it.f] = []
            for r0, r1 in s.fold_chunks(it.f):
                start = max(arr, pre_done[it.f], _latest(a_ready[(fd.block, fd.i)], r0, r1))
                if fd.first:
                    start = max(start, _latest(acc_read.get(fd.acc, []), r0, r1))
                arr = start + r1 - r0
                done[it.f].append((r0, r1, arr + R + C - 2))
                end = max(end, arr + R + C - 2)
            streamed[it.f] = arr
            a_read[fd.i if g.resident else it.f % 2] = [(r0, r1, t - R - C + 2)
                                                        for r0, r1, t in done[it.f]]
        elif it.kind == "out":
            fd = folds[it.f]
            reads = acc_read[fd.acc] = []
            for r0, r1, t in done[it.f]:
                # per chunk: the epilogue operands' loads (they need not wait for the
                # matmul), the vector steps once both are there, then the store
                ext = g.dma(g.ext_bytes(fd.j, r1 - r0))
                dma, busy = dma + ext, busy + ext
                ready = max(t, dma + g.latency if ext else 0)
                if g.vec_steps:     # the vector unit works one chunk at a time
                    ready = vec_free = (max(ready, vec_free)
                                        + g.vec_steps * cdiv((r1 - r0) * g.n_ext[fd.j], g.lanes))
                cost = g.dma((r1 - r0) * g.n_ext[fd.j] * g.out_elem)
                dma, busy = max(dma, ready) + cost, busy + cost
                reads.append((r0, r1, dma))
                end = max(end, dma + g.latency)
    return end, busy


def _peak_demand(s: WsSchedule) -> int:
    """Bytes per streamed cycle of the most demanding fold (its A, weights, stores)."""
    g, cur = s.geo, 0
    per: dict[int, int] = {}
    for it in s.program:
        if it.kind == "lbl":
            cur = it.f
        elif it.kind == "a":
            per[cur] = per.get(cur, 0) + g.a_bytes(it.f, it.rows[1] - it.rows[0])
        elif it.kind == "w":
            per[cur] = per.get(cur, 0) + g.w_bytes(s.folds[it.f].i, s.folds[it.f].j)
    worst = 0
    for f, nbytes in per.items():
        _, m0, m1 = g.blocks[s.folds[f].block]
        worst = max(worst, cdiv(nbytes, m1 - m0))
    return worst


def build(g: Geometry, order: str, panels: tuple[int, ...], d: int) -> WsSchedule:
    folds = _folds(g, order, panels)
    accs = len(g.n_ext) if order.startswith("k-first") else 2
    s = WsSchedule(g, order, panels, d, accs, folds)
    s.program = _Program(g, folds, d).build()
    s.floor, s.dma = predict(s)
    s.stream = sum(g.blocks[f.block][2] - g.blocks[f.block][1] for f in folds)
    s.peak_demand = _peak_demand(s)
    return s


def candidates(g: Geometry) -> list[tuple[str, tuple[int, ...], int]]:
    kt, nt = len(g.k_ext), len(g.n_ext)
    orders = ["n-outer"]
    if g.resident and nt > 1 and g.max_accs >= nt:
        orders += [f"k-first:{p}" for p in sorted({1, 2, 3, kt}) if p <= kt]
    prefetch = [d for d in sorted({1, 2, 3, _latency_prefetch(g)}) if d + 1 <= g.max_wbufs]
    return [(o, p, d) for o in orders for p in _panel_orders(g) for d in prefetch]


def _latency_prefetch(g: Geometry) -> int:
    """The prefetch distance that hides a weight tile's transfer and latency behind the
    folds before it (short folds: each streams max(R, rows) cycles at least), capped by
    the weight buffers and the fold count."""
    shortest = max(g.rows, min(m1 - m0 for _, m0, m1 in g.blocks))
    need = cdiv(g.latency + g.dma(g.w_bytes(0, 0)), shortest) + 1
    folds = len(g.blocks) * len(g.k_ext) * len(g.n_ext)
    return max(1, min(need, g.max_wbufs - 1, folds - 1))


def edge_chunks(g: Geometry) -> list[int]:
    """Rows per chunk in the first and last fold: smaller ones start the first fold
    and finish the last stores sooner, at more instructions."""
    return sorted({g.chunk, max(1, g.chunk // 4), max(1, g.chunk // 16)}, reverse=True)


def _busy(s: WsSchedule) -> bool:
    """Whether the array already streams nearly all the time: only the first weight
    load, one fill and drain and the last store's latency on top of streaming."""
    g = s.geo
    overhead = 2 * (g.rows + g.cols) + 2 * g.latency + g.dma(g.w_bytes(0, 0))
    return s.floor <= 1.01 * s.stream + overhead


def _search_space(g: Geometry, nfolds: int) -> list[tuple[Geometry, str, tuple[int, ...], int]]:
    """(geometry, order, panels, prefetch) to model, cut to SEARCH_WORK fold models."""
    full = [(ge, *c) for e in edge_chunks(g) for ge in [replace(g, edge_chunk=e)]
            for c in candidates(ge)]
    if nfolds * len(full) <= SEARCH_WORK:
        return full
    few = [c for c in full if c[3] == OLD_PREFETCH and c[1] in ("n-outer", "k-first:1", "k-first:2")
           and c[0].edge_chunk in edge_chunks(g)[:2]]
    return few if nfolds * len(few) <= SEARCH_WORK else []


def choose(g: Geometry, search: bool = True) -> WsSchedule:
    """The candidate with the lowest floor; the old order unless another beats it by
    more than MARGIN (or without ``search``: compatibility timing, huge fold counts,
    many folds the old order already keeps busy)."""
    nfolds = len(g.blocks) * len(g.k_ext) * len(g.n_ext)
    old = build(g, "n-outer", tuple(range(len(g.k_ext))), OLD_PREFETCH)
    # a small search is cheap and may still shave the start and the tail
    if not search or nfolds > SEARCH_FOLDS or (nfolds > 256 and _busy(old)):
        return old
    best = old
    for geo, order, panels, d in _search_space(g, nfolds):
        s = build(geo, order, panels, d)
        if s.floor < best.floor * (1 - MARGIN) or (s.floor < best.floor and best is not old):
            best = s
    return best
