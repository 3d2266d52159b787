"""Run statistics: per-section costs summed over a kernel call, and their text form.

Keys of ``KernelStats.as_dict()`` (what ``kernel.stats`` holds after a call):
``cycles``, ``utilization`` (useful MACs / (cycles x R x C)), ``mapping_efficiency``
(useful MACs / PE-cycles offered while streaming), ``dram_bytes``, ``macs``,
``stream_cycles``, ``weight_load_cycles``, ``dma_cycles``, ``vec_cycles``,
``stall_cycles`` (by cause), ``sections`` (array / vector / host counts),
``host_ops`` (names of ops run on the host), ``array``, ``dataflow``, ``timing``,
``operands`` (``dram``, or ``resident``: no DMA cost, ``config.ArrayConfig``),
``schedule`` (the scheduler's note of each array section: order, prefetch,
accumulators, peak DMA demand, predicted floor; see ``schedule.py``) and
``floor_cycles`` (the sum of those floors; 0 without notes).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .config import ArrayConfig
from .simulator import SectionStats


@dataclass
class KernelStats:
    config: ArrayConfig
    total: SectionStats = field(default_factory=SectionStats)
    placements: Counter = field(default_factory=Counter)
    host_ops: list[str] = field(default_factory=list)
    schedules: list[dict[str, str]] = field(default_factory=list)

    def add(self, placement: str, s: SectionStats) -> None:
        t = self.total
        self.placements[placement] += 1
        self.schedules += s.schedules
        for key in ("cycles", "macs", "mapped_macs", "stream_cycles", "weight_load_cycles",
                    "dma_cycles", "vec_cycles", "dram_bytes", "instructions"):
            setattr(t, key, getattr(t, key) + getattr(s, key))
        for cause, n in s.stalls.items():
            t.stalls[cause] = t.stalls.get(cause, 0) + n

    def host(self, op_name: str) -> None:
        self.placements["host"] += 1
        self.host_ops.append(op_name)

    def as_dict(self) -> dict[str, Any]:
        t, c = self.total, self.config
        peak = t.cycles * c.rows * c.cols
        return {
            "cycles": t.cycles,
            "utilization": t.macs / peak if peak else 0.0,
            "mapping_efficiency": t.macs / t.mapped_macs if t.mapped_macs else 0.0,
            "dram_bytes": t.dram_bytes,
            "macs": t.macs,
            "stream_cycles": t.stream_cycles,
            "weight_load_cycles": t.weight_load_cycles,
            "dma_cycles": t.dma_cycles,
            "vec_cycles": t.vec_cycles,
            "instructions": t.instructions,
            "stall_cycles": dict(t.stalls),
            "sections": dict(self.placements),
            "host_ops": list(self.host_ops),
            "array": (c.rows, c.cols),
            "dataflow": c.dataflow,
            "timing": c.timing,
            "operands": c.operands,
            "schedule": [dict(s) for s in self.schedules],
            "floor_cycles": sum(int(s.get("floor", 0)) for s in self.schedules),
        }


def format_stats(stats: dict[str, Any]) -> str:
    """``kernel.stats`` as the lines ``wiac --run --target systolic`` prints."""
    if not stats:
        return "systolic: no statistics (the kernel has not run)"
    rows, cols = stats["array"]
    stalls = ", ".join(f"{k} {v}" for k, v in sorted(stats["stall_cycles"].items())) or "none"
    sections = ", ".join(f"{k} {v}" for k, v in sorted(stats["sections"].items())) or "none"
    lines = [
        f"systolic {rows}x{cols} {stats['dataflow']}, timing {stats['timing']}"
        + (", operands resident (no DMA cost)" if stats.get("operands") == "resident" else ""),
        f"  cycles              {stats['cycles']}",
        f"  utilization         {100 * stats['utilization']:.1f}% of {rows * cols} MACs/cycle",
        f"  mapping efficiency  {100 * stats['mapping_efficiency']:.1f}%",
        f"  MACs                {stats['macs']}",
        f"  DRAM traffic        {stats['dram_bytes']} bytes",
        f"  array streaming     {stats['stream_cycles']} cycles; weight loads "
        f"{stats['weight_load_cycles']}; DMA busy {stats['dma_cycles']}; vector "
        f"{stats['vec_cycles']}",
        f"  array stalls        {stalls}",
        f"  sections            {sections}",
    ]
    for note in stats.get("schedule", []):
        lines.append(f"  schedule            {note.get('order')}, panels {note.get('panels')}, "
                     f"prefetch {note.get('prefetch')}, {note.get('accumulators')} accumulators; "
                     f"peak demand {note.get('peak_demand')} of {note.get('dma_bw')}; "
                     f"floor {note.get('floor')} cycles")
    if stats["host_ops"]:
        lines.append(f"  on the host         {', '.join(sorted(set(stats['host_ops'])))}")
    return "\n".join(lines)
