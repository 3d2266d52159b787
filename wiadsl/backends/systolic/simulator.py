"""The simulator: runs an assembled section on NumPy data and counts its cycles.

Functional model: scratchpad buffers hold their dtype's NumPy storage,
accumulators 32-bit words (``vector.read_words``); int8 operands multiply
exactly and accumulate in wrapping int32, float operands (f16, bf16, f32) in f32.
Timing comes from ``timing.Timeline``; the figures land in ``SectionStats``.

Invariant: the outputs equal the reference interpreter's for int types and agree
within float rounding (different summation order) for float types.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...diagnostics import WiaRuntimeError
from ...ir.numerics import to_dtype
from .check import check_section
from .config import ArrayConfig
from .isa import (
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
    Section,
    Vec,
    VecReduce,
)
from .timing import Timeline
from .vector import REDUCE_COMBINE, read_words, reduce_dtypes, reduce_rows, vec_fn, write_words
from .views import view_kind


@dataclass
class SectionStats:
    """What one section run cost. ``macs``: useful multiply-adds; ``mapped_macs``:
    PE-cycles offered while streaming (T x R x C per matmul)."""

    cycles: int = 0
    macs: int = 0
    mapped_macs: int = 0
    stream_cycles: int = 0
    weight_load_cycles: int = 0
    dma_cycles: int = 0
    vec_cycles: int = 0
    dram_bytes: int = 0
    instructions: int = 0
    stalls: dict[str, int] = field(default_factory=dict)
    #: the scheduler's notes (``; schedule`` lines) of the section, in order
    schedules: list[dict[str, str]] = field(default_factory=list)


class _Machine:
    def __init__(self, section: Section, config: ArrayConfig, inputs: dict[str, np.ndarray]):
        self.s, self.config = section, config
        self.drams: dict[str, np.ndarray] = {}
        for d in section.drams:
            if d.direction == "in":
                value = np.asarray(inputs[d.name])
                if value.shape != tuple(d.shape):
                    raise WiaRuntimeError(f"section {section.name}: input {d.name} has shape "
                                          f"{value.shape}, the listing says {list(d.shape)}")
                self.drams[d.name] = to_dtype(value, d.dtype)
            else:
                self.drams[d.name] = np.zeros(d.shape, dtype=d.dtype.numpy)
        self.dram_decl = {d.name: d for d in section.drams}
        self.views = {v.name: v for v in section.views}
        self.local: dict[str, np.ndarray] = {
            b.name: np.zeros((b.rows, b.cols), np.uint32 if b.space == "acc" else b.dtype.numpy)  # type: ignore[union-attr]
            for b in section.buffers}
        self.spaces = {b.name: b for b in section.buffers}
        self.weights: list[np.ndarray | None] = [None, None]
        self.cache: dict[str, Any] = {}
        acc = frozenset(b.name for b in section.buffers if b.space == "acc")
        self.timeline = Timeline(config, acc)
        self.stats = SectionStats()

    # -------------------------------------------------------------- helpers
    def tile(self, x: Local) -> np.ndarray:
        return self.local[x.buffer][x.rows[0]:x.rows[1], x.cols[0]:x.cols[1]]

    def values(self, x: Local) -> np.ndarray:
        b = self.spaces[x.buffer]
        if b.space == "acc":
            return read_words(self.tile(x), x.dtype)  # type: ignore[arg-type]
        return to_dtype(self.tile(x), x.dtype or b.dtype)  # type: ignore[arg-type]

    def remote_bytes(self, r: Remote) -> int:
        view = self.views[r.view]
        return view_kind(view).nbytes(view, self.dram_decl[view.base], r)

    def dma_cost(self, nbytes: int) -> tuple[int, int]:
        self.stats.dram_bytes += nbytes
        if self.config.free_dma:  # compatibility timing, or operands resident on chip
            return 0, 0
        return -(-nbytes // self.config.dma_bytes_per_cycle), self.config.dma_latency

    @staticmethod
    def ref(x: Local) -> tuple[str, tuple[int, int], tuple[int, int]]:
        return (x.buffer, x.rows, x.cols)

    def product(self, a: np.ndarray, w: np.ndarray, dst: Local, accumulate: bool) -> None:
        """dst (+)= a @ w with the array's arithmetic (int8 -> int32, float -> f32)."""
        words = self.tile(dst)
        if a.dtype.kind in "iu":
            # int8 products summed in float64 are exact below 2**53 (K < 2**39): BLAS speed
            p: np.ndarray = (a.astype(np.float64) @ w.astype(np.float64)).astype(np.int64)
            if accumulate:
                p = p + words.view(np.int32)
            words[...] = p.astype(np.int32).view(np.uint32)
        else:
            with np.errstate(over="ignore", invalid="ignore"):  # IEEE inf/nan, as the array's
                p = a.astype(np.float32) @ w.astype(np.float32)
                if accumulate:
                    p = words.view(np.float32) + p
            words[...] = p.astype(np.float32).view(np.uint32)
        m, k = a.shape
        self.stats.macs += m * k * w.shape[1]

    # -------------------------------------------------------------- instructions
    def mvin(self, i: Mvin) -> None:
        view = self.views[i.src.view]
        self.tile(i.dst)[...] = view_kind(view).read(view, self.drams[view.base], i.src, self.cache)
        busy, latency = self.dma_cost(self.remote_bytes(i.src))
        self.stats.dma_cycles += busy
        self.timeline.schedule("dma", busy, latency, [], [self.ref(i.dst)])

    def mvout(self, i: Mvout) -> None:
        view = self.views[i.dst.view]
        data = to_dtype(self.values(i.src), self.dram_decl[view.base].dtype)
        view_kind(view).write(view, self.drams[view.base], i.dst, data)
        busy, latency = self.dma_cost(self.remote_bytes(i.dst))
        self.stats.dma_cycles += busy
        self.timeline.schedule("dma", busy, latency, [self.ref(i.src)], [])

    def preload(self, i: Preload) -> None:
        self.weights[i.slot] = self.tile(i.src).copy()
        rows = self.config.rows
        self.stats.weight_load_cycles += rows
        tl = self.timeline
        _, done = tl.schedule("wload", rows, 0, [self.ref(i.src)], [],
                              {"weights": tl.slot_free[i.slot]})
        tl.slot_ready[i.slot] = done

    def matmulws(self, i: MatmulWS) -> None:
        a = self.tile(i.src)
        self._stationary(i, a, self.weights[i.slot], "weights", a.shape[0])

    def matmulis(self, i: MatmulIS) -> None:
        # the weight columns stream one per cycle: T = the tile's width
        w = self.tile(i.src)
        self._stationary(i, self.weights[i.slot], w, "input tile", w.shape[1])

    def _stationary(self, i: MatmulWS | MatmulIS, a: np.ndarray | None, w: np.ndarray | None,
                    held: str, rows: int) -> None:
        """``dst (+)= a @ w`` with one operand held in slot ``i.slot``, ``rows`` streamed."""
        kept = w if isinstance(i, MatmulWS) else a
        if a is None or w is None or a.shape[1] != w.shape[0] \
                or i.dst.shape != (a.shape[0], w.shape[1]):
            raise WiaRuntimeError(f"section {self.s.name}: {i.text().strip()} does not match the "
                                  f"{held} in w{i.slot} ({None if kept is None else kept.shape})")
        if (a.dtype.kind in "iu") != (w.dtype.kind in "iu"):
            raise WiaRuntimeError(f"section {self.s.name}: int and float operands mixed")
        self.product(a, w, i.dst, i.accumulate)
        self._stream(rows, rows, [self.ref(i.src)], i.dst,
                     {"weights": self.timeline.slot_ready[i.slot]})
        tl = self.timeline
        tl.slot_free[i.slot] = max(tl.slot_free[i.slot], tl.free["array"])

    def schedule(self, i: Schedule) -> None:
        self.stats.schedules.append(dict(i.fields))

    def matmulos(self, i: MatmulOS) -> None:
        self.product(self.tile(i.lhs), self.tile(i.rhs), i.dst, i.accumulate)
        t = i.lhs.shape[1]
        hold = t if self.config.scalesim else max(t, self.config.rows)
        self._stream(t, hold, [self.ref(i.lhs), self.ref(i.rhs)], i.dst, {})

    def _stream(self, t: int, hold: int, reads: list, dst: Local, extra: dict[str, int]) -> None:
        r, c = self.config.rows, self.config.cols
        self.stats.stream_cycles += t
        self.stats.mapped_macs += t * r * c
        self.timeline.schedule("array", hold, t - hold + r + c - 2, reads, [self.ref(dst)], extra)

    def vec(self, i: Vec) -> None:
        dtypes = [x.dtype or self.spaces[x.buffer].dtype for x in i.srcs]
        fn = vec_fn(i.fn, dtypes, i.dst.dtype)  # type: ignore[arg-type]
        args = [np.broadcast_to(self.values(x), i.dst.shape) for x in i.srcs]
        with np.errstate(all="ignore"):
            out = fn.compute(args, dtypes, i.dst.dtype)  # type: ignore[arg-type]
        write_words(self.tile(i.dst), np.broadcast_to(out, i.dst.shape), i.dst.dtype)  # type: ignore[arg-type]
        busy = -(-i.dst.shape[0] * i.dst.shape[1] // self.config.vec_lanes)
        self.stats.vec_cycles += busy
        self.timeline.schedule("vec", busy, 0, [self.ref(x) for x in i.srcs], [self.ref(i.dst)])

    def vecreduce(self, i: VecReduce) -> None:
        src_dtype = i.src.dtype or self.spaces[i.src.buffer].dtype
        reduce_dtypes(i.kind, src_dtype, i.dst.dtype)  # type: ignore[arg-type]
        out = reduce_rows(i.kind, self.values(i.src), i.dst.dtype)  # type: ignore[arg-type]
        if i.accumulate:
            with np.errstate(all="ignore"):
                out = REDUCE_COMBINE[i.kind](self.values(i.dst), out)
        write_words(self.tile(i.dst), out, i.dst.dtype)  # type: ignore[arg-type]
        h, w = i.src.shape
        busy = -(-h * w // self.config.vec_lanes)
        # the lanes' partial results meet in an adder/comparator tree: its depth is latency
        depth = max(0, (min(w, self.config.vec_lanes) - 1).bit_length())
        self.stats.vec_cycles += busy
        reads = [self.ref(i.src), *([self.ref(i.dst)] if i.accumulate else [])]
        self.timeline.schedule("vec", busy, depth, reads, [self.ref(i.dst)])

    def run(self) -> SectionStats:
        for ins in self.s.body:
            if isinstance(ins, Schedule):
                self.schedule(ins)
            elif not isinstance(ins, Label):
                self.stats.instructions += 1
                getattr(self, type(ins).__name__.lower())(ins)
        tl = self.timeline
        has_array = any(isinstance(i, (MatmulWS, MatmulOS, MatmulIS)) for i in self.s.body)
        # SCALE-Sim reports the index of the last cycle of a layer (total - 1).
        self.stats.cycles = tl.end - 1 if self.config.scalesim and has_array else tl.end
        self.stats.stalls = dict(tl.stalls)
        return self.stats


def run_section(section: Section, config: ArrayConfig, inputs: dict[str, np.ndarray],
                checked: bool = False) -> tuple[dict[str, np.ndarray], SectionStats]:
    """Simulate ``section`` on ``inputs`` (DRAM name -> array); returns its outputs
    (DRAM name -> array) and what it cost."""
    if not checked:
        check_section(section, config)
    machine = _Machine(section, config, inputs)
    stats = machine.run()
    outputs = {d.name: machine.drams[d.name] for d in section.drams if d.direction == "out"}
    return outputs, stats
