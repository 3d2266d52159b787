"""The cycle model: when each instruction starts and finishes (docs/systolic.md, "Timing").

Units run in parallel and each issues in program order: the DMA engine
(``mvin``/``mvout``), the weight-load path (``preload``), the array's input port
(``matmul``) and the vector unit (``vec``). An instruction starts when its unit is
free and its operands are ready:
- reads wait for the last overlapping write to be ready (RAW); writes wait for
  overlapping reads and writes to finish (WAR, WAW) — tracked per buffer region;
- the array keeps its own accumulator writes in order, so array-after-array
  accumulator accesses do not wait (partial sums are added as they arrive);
- ``preload wS`` waits until the matmuls using slot S have streamed (double
  buffering); a ws matmul waits for its slot's weights.
Costs: DMA ceil(bytes / dma_bw) busy + dma_latency until data is usable; preload
R; matmul streaming T rows busy T, results complete T + R + C - 2 after start
(fill and drain); os matmuls keep the array max(T, R) (drain of the previous tile's
outputs); vec ceil(elements / vec_lanes).

``scalesim`` timing: every instruction starts when the previous one has
completed (no overlap of weight loads, streaming and drain), DMA costs nothing.
A ws or is fold (preload + matmul) is then 2R + C + T - 2 cycles, an os fold
R + C + T - 2, folds back to back — SCALE-Sim's model.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .config import ArrayConfig

UNITS = ("dma", "wload", "array", "vec")


@dataclass
class _Access:
    rows: tuple[int, int]
    cols: tuple[int, int]
    write: bool
    time: int
    unit: str

    def overlaps(self, rows: tuple[int, int], cols: tuple[int, int]) -> bool:
        return (self.rows[0] < rows[1] and rows[0] < self.rows[1]
                and self.cols[0] < cols[1] and cols[0] < self.cols[1])

    def covered_by(self, rows: tuple[int, int], cols: tuple[int, int]) -> bool:
        return (rows[0] <= self.rows[0] and self.rows[1] <= rows[1]
                and cols[0] <= self.cols[0] and self.cols[1] <= cols[1])


Ref = tuple[str, tuple[int, int], tuple[int, int]]  # (buffer, rows, cols)


@dataclass
class Timeline:
    """Schedules instructions one by one (program order) and keeps the totals."""

    config: ArrayConfig
    acc_buffers: frozenset[str] = frozenset()
    free: dict[str, int] = field(default_factory=lambda: dict.fromkeys(UNITS, 0))
    accesses: dict[str, list[_Access]] = field(default_factory=dict)
    slot_ready: list[int] = field(default_factory=lambda: [0, 0])
    slot_free: list[int] = field(default_factory=lambda: [0, 0])
    serial_end: int = 0
    end: int = 0
    busy: dict[str, int] = field(default_factory=lambda: dict.fromkeys(UNITS, 0))
    stalls: dict[str, int] = field(default_factory=dict)

    def _ready(self, unit: str, reads: list[Ref], writes: list[Ref]) -> dict[str, int]:
        """Earliest start per cause: operands (RAW) and destination (WAR/WAW)."""
        bounds = {"operands": 0, "destination": 0}
        for buf, rows, cols in reads:
            for a in self.accesses.get(buf, ()):
                if a.write and a.overlaps(rows, cols) and not self._in_order(unit, a, buf):
                    bounds["operands"] = max(bounds["operands"], a.time)
        for buf, rows, cols in writes:
            for a in self.accesses.get(buf, ()):
                if a.overlaps(rows, cols) and not self._in_order(unit, a, buf):
                    bounds["destination"] = max(bounds["destination"], a.time)
        return bounds

    def _in_order(self, unit: str, a: _Access, buf: str) -> bool:
        return unit == "array" and a.unit == "array" and buf in self.acc_buffers

    def _record(self, unit: str, refs: list[Ref], write: bool, time: int) -> None:
        for buf, rows, cols in refs:
            kept = [a for a in self.accesses.get(buf, [])
                    if not (a.covered_by(rows, cols) and a.write == write and a.time <= time)]
            kept.append(_Access(rows, cols, write, time, unit))
            self.accesses[buf] = kept

    def schedule(self, unit: str, busy: int, latency: int, reads: list[Ref], writes: list[Ref],
                 extra: dict[str, int] | None = None) -> tuple[int, int]:
        """Place one instruction; returns (start, completion).

        ``busy``: cycles the unit is held; ``latency``: further cycles until its
        results are usable; ``extra``: more start bounds by cause (weights...).
        """
        bounds = self._ready(unit, reads, writes)
        bounds.update(extra or {})
        port = self.serial_end if self.config.scalesim else self.free[unit]
        start = max(port, *bounds.values())
        if unit == "array" and start > port:
            cause = max(bounds, key=lambda k: bounds[k])
            self.stalls[cause] = self.stalls.get(cause, 0) + start - port
        done = start + busy + latency
        self.free[unit] = start + busy
        self.busy[unit] += busy
        self.serial_end = done
        self.end = max(self.end, done)
        self._record(unit, reads, False, start + busy)
        self._record(unit, writes, True, done)
        return start, done


def scalesim_closed_form(m: int, n: int, k: int, rows: int, cols: int, dataflow: str) -> int:
    """SCALE-Sim's compute cycles for one GEMM (M x K @ K x N), as it reports them.

    ws folds: ceil(K/R) * ceil(N/C), each 2R + C + M - 2; os folds: ceil(M/R) *
    ceil(N/C), each R + C + K - 2; is folds (A^T held: K on the rows, M on the
    columns; the N weight columns stream): ceil(K/R) * ceil(M/C), each 2R + C + N - 2
    (SCALE-Sim's systolic_compute_is); folds back to back; reported total - 1.
    """
    if dataflow == "ws":
        folds, per = -(-k // rows) * -(-n // cols), 2 * rows + cols + m - 2
    elif dataflow == "is":
        folds, per = -(-k // rows) * -(-m // cols), 2 * rows + cols + n - 2
    else:
        folds, per = -(-m // rows) * -(-n // cols), rows + cols + k - 2
    return folds * per - 1
