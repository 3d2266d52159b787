"""A lower bound on the cycles of any program computing one GEMM on a machine.

``gemm_bound`` answers: how fast can C = A @ W (M x K @ K x N, no epilogue) possibly
run on ``config``'s array and DMA, whatever the tiling, loop order, prefetch or
chunking? It shows whether a GEMM slower end to end than SCALE-Sim's count (which
charges no DMA) is forced by the DMA's latency alone or is the schedule's fault.

It rests only on the timing model's rules (``timing.py``), which hold for every
program:
- the DMA moves one transfer at a time, in program order, each ceil(bytes / bw) >= 1
  cycles, usable (or, for a store, finished) ``latency`` cycles after;
- the array's input port takes one instruction at a time; a ws/is matmul streams
  T rows (columns) in T cycles, an os matmul holds the port max(T, R) >= T, and its
  results complete T + R + C - 2 cycles after it starts; a ws/is matmul waits for
  its slot's preload, which takes R cycles on the serial weight path after its
  tile has arrived; an os matmul needs its two operand tiles, two transfers;
- a store reads results after the matmul that made them has completed.
And on coverage: a stationary tile spans at most R x C of its grid (ws: K x N,
is: K x M, os: M x N), and the points (iR, jC) are one per tile at most, so every
program has at least ceil(.. / R) * ceil(.. / C) tiles (preloads for ws/is), each
streaming its M (ws), N (is) or K (os) extent: ``stream`` below. Every element of
A and W comes in and every element of C goes out at least once.

Three chains, each a bound (the result is their max):
- ``dma``: all bytes through the DMA, then the last transfer's latency;
- ``stream``: the first matmul cannot start before its operands arrived (ws/is:
  one transfer, latency and the R-cycle preload; os: two transfers and latency),
  the port streams at least ``stream`` cycles, the last matmul's results complete
  R + C - 2 after its last row, and a store (>= 1 cycle plus latency) follows;
- ``preload`` (ws/is): the first tile's transfer and latency, ``tiles`` preloads of
  R cycles one after another, at least one row streaming behind the last of them,
  its fill and drain, and a store.
With ``operands="resident"`` (or ``scalesim`` timing) transfers are free: the same
chains with no DMA terms.
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import ArrayConfig


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Bound:
    """The chains (cycles) of ``gemm_bound``; ``cycles`` is the bound itself."""

    dma: int
    stream: int
    preload: int

    @property
    def cycles(self) -> int:
        return max(self.dma, self.stream, self.preload)


def min_tiles_and_stream(m: int, n: int, k: int, config: ArrayConfig) -> tuple[int, int]:
    """(the fewest stationary tiles, the fewest streamed cycles) of any ``config.dataflow``
    program for one M x K @ K x N product (module docstring: coverage)."""
    r, c = config.rows, config.cols
    if config.dataflow == "ws":
        tiles, length = _cdiv(k, r) * _cdiv(n, c), m
    elif config.dataflow == "is":
        tiles, length = _cdiv(k, r) * _cdiv(m, c), n
    else:
        tiles, length = _cdiv(m, r) * _cdiv(n, c), k
    return tiles, tiles * length


def gemm_bound(m: int, n: int, k: int, config: ArrayConfig, elem: int, out_elem: int,
               batches: int = 1) -> Bound:
    """The lower bound (module docstring) for ``batches`` products M x K @ K x N with
    operands of ``elem`` bytes and results of ``out_elem`` bytes."""
    r, c = config.rows, config.cols
    tiles, stream = min_tiles_and_stream(m, n, k, config)
    tiles, stream = tiles * batches, stream * batches
    drain = r + c - 2
    if config.free_dma:
        # nothing to transfer: the first preload (ws/is) is the only thing before streaming
        first = 0 if config.dataflow == "os" else r
        preload = tiles * r + 1 + drain if config.dataflow != "os" else 0
        return Bound(0, first + stream + drain, preload)
    lat, bw = config.dma_latency, config.dma_bytes_per_cycle
    nbytes = batches * ((m * k + k * n) * elem + m * n * out_elem)
    store = 1 + lat
    if config.dataflow == "os":
        first, preload = 2 + lat, 0
    else:
        first = 1 + lat + r
        preload = 1 + lat + tiles * r + 1 + drain + store
    return Bound(_cdiv(nbytes, bw) + lat, first + stream + drain + store, preload)
