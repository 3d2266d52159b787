"""Regenerate benchmarks/systolic.md: our cycle counts next to SCALE-Sim's.

    python benchmarks/systolic.py                       # table from the stored reference
    python benchmarks/systolic.py --scalesim VENV/bin/python   # re-run SCALE-Sim first

The reference numbers live in tests/systolic/scalesim_reference.json (the tests
read them too). ``--scalesim`` needs a Python with ``pip install scalesim
"numpy<2"`` (a separate venv); it runs SCALE-Sim's own CLI on each GEMM and reads
the "Total Cycles" column of COMPUTE_REPORT.csv.
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import wiadsl  # noqa: E402
from wiadsl.backends.systolic import schedule  # noqa: E402
from wiadsl.backends.systolic.timing import scalesim_closed_form  # noqa: E402

REFERENCE = ROOT / "tests" / "systolic" / "scalesim_reference.json"
OUT = ROOT / "benchmarks" / "systolic.md"
GEMMS = [(7, 9, 13, 8, 8, "ws"), (33, 33, 33, 8, 8, "ws"), (129, 7, 33, 32, 32, "ws"),
         (64, 64, 64, 32, 32, "os"), (100, 50, 70, 16, 16, "os"), (256, 128, 512, 128, 128, "ws"),
         (129, 129, 129, 32, 32, "os"), (1, 128, 256, 128, 128, "ws"),
         (300, 200, 100, 64, 32, "ws"), (50, 300, 40, 32, 64, "os"), (17, 5, 200, 8, 16, "ws"),
         (7, 33, 129, 8, 8, "os"), (1000, 1000, 1000, 128, 128, "ws"),
         (1000, 1000, 1000, 128, 128, "os")]
#: input-stationary GEMMs (SCALE-Sim v3's third dataflow): its closed form, and
#: SCALE-Sim's own count when --scalesim ran them
IS_GEMMS = [(7, 9, 13, 8, 8), (33, 33, 33, 8, 8), (129, 7, 33, 32, 32), (100, 50, 70, 16, 16),
            (1, 128, 256, 128, 128), (300, 200, 100, 64, 32), (17, 5, 200, 8, 16),
            (50, 300, 40, 32, 64)]
CONFIG = """[general]
run_name = {name}

[architecture_presets]
ArrayHeight: {R}
ArrayWidth: {C}
IfmapSramSzkB: 1000000
FilterSramSzkB: 1000000
OfmapSramSzkB: 1000000
IfmapOffset: 0
FilterOffset: 100000000
OfmapOffset: 200000000
Bandwidth : 10
Dataflow : {df}
MemoryBanks: 1
ReadRequestBuffer: 32
WriteRequestBuffer: 32

[layout]
IfmapCustomLayout: False
IfmapSRAMBankBandwidth: 10
IfmapSRAMBankNum: 10
IfmapSRAMBankPort: 2
FilterCustomLayout: False
FilterSRAMBankBandwidth: 10
FilterSRAMBankNum: 10
FilterSRAMBankPort: 2

[sparsity]
SparsitySupport : false
SparseRep : ellpack_block
OptimizedMapping : false
BlockSize : 8
RandomNumberGeneratorSeed : 40

[run_presets]
InterfaceBandwidth: CALC
UseRamulatorTrace: False
"""
SOURCE = ("SCALE-Sim 3.0.0 (pip install scalesim, numpy 1.26.4, Python 3.11, separate venv), "
          "GEMM topology (-i gemm), 'Total Cycles' column of COMPUTE_REPORT.csv, SRAMs 1 GB "
          "each, InterfaceBandwidth CALC; regenerate with: python benchmarks/systolic.py "
          "--scalesim /path/to/venv/bin/python")
MM = ("kernel mm(input A: i8[M, K], input B: i8[K, N], output C: i32[M, N]) "
      "{ C = cast(A, i32) @ cast(B, i32); }")
MM_F32 = "kernel mm(input A: f32[M, K], input B: f32[K, N], output C: f32[M, N]) { C = A @ B; }"


def run_scalesim(python: str, m: int, n: int, k: int, rows: int, cols: int, df: str) -> int:
    """SCALE-Sim's compute cycles for one GEMM, from its own CLI and report."""
    name = f"g{m}x{n}x{k}_{rows}x{cols}_{df}"
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "c.cfg").write_text(CONFIG.format(name=name, R=rows, C=cols, df=df))
        (Path(d) / "t.csv").write_text(f"Layer, M, N, K,\n{name}, {m}, {n}, {k},\n")
        (Path(d) / "l.csv").write_text(f"Layer, a, b, c, d, e, f,\n{name}, 1, 1, 1, 1, 1, 1,\n")
        subprocess.run([python, "-m", "scalesim.scale", "-c", "c.cfg", "-t", "t.csv", "-l",
                        "l.csv", "-i", "gemm", "-p", "out", "-s", "N"],
                       check=True, capture_output=True, cwd=d)
        with open(Path(d) / "out" / name / "COMPUTE_REPORT.csv") as f:
            return int(list(csv.reader(f))[1][2])


def ours(g: dict, timing: str, dtype: str = "i8", old_order: bool = False) -> dict:
    """Our stats for GEMM ``g``; ``old_order``: the ws fold order before the
    bandwidth-aware scheduler (N tiles outer, no search)."""
    src, npdt = (MM, np.int8) if dtype == "i8" else (MM_F32, np.float32)
    k = wiadsl.jit(src, "mm", target="systolic", array=(g["rows"], g["cols"]),
                   dataflow=g["dataflow"], timing=timing)
    saved = schedule.SEARCH_FOLDS
    schedule.SEARCH_FOLDS = -1 if old_order else saved
    try:
        k(np.ones((g["M"], g["K"]), npdt), np.ones((g["K"], g["N"]), npdt))
    finally:
        schedule.SEARCH_FOLDS = saved
    return dict(k.stats)


def is_rows(ref: dict) -> list[str]:
    """The input-stationary table: compat cycles vs the closed form (and SCALE-Sim)."""
    measured = {(g["M"], g["N"], g["K"], g["rows"], g["cols"]): g["cycles"]
                for g in ref["gemms"] if g["dataflow"] == "is"}
    lines = ["", "## Input-stationary (`dataflow=\"is\"`, int8 GEMMs)", "",
             "| M | N | K | array | SCALE-Sim | closed form | ours (scalesim) | ours (overlap) | "
             "overlap / scalesim |", "|---|---|---|---|---|---|---|---|---|"]
    for m, n, k, r, c in IS_GEMMS:
        g = {"M": m, "N": n, "K": k, "rows": r, "cols": c, "dataflow": "is"}
        compat, over = ours(g, "scalesim"), ours(g, "overlap")
        closed = scalesim_closed_form(m, n, k, r, c, "is")
        real = measured.get((m, n, k, r, c))
        mark = "" if compat["cycles"] == (real or closed) else " **MISMATCH**"
        lines.append(f"| {m} | {n} | {k} | {r}x{c} | {real if real else 'not run'} | {closed} | "
                     f"{compat['cycles']}{mark} | {over['cycles']} | "
                     f"{over['cycles'] / compat['cycles']:.3f} |")
        print(lines[-1], flush=True)
    return lines


def fold_order_rows() -> list[str]:
    """1000^3 on 128x128 ws at f32 and int8: old order, chosen order, floor."""
    g = {"M": 1000, "N": 1000, "K": 1000, "rows": 128, "cols": 128, "dataflow": "ws"}
    compat = scalesim_closed_form(1000, 1000, 1000, 128, 128, "ws")
    lines = ["", "## Fold order chosen from bandwidth (1000 x 1000 x 1000 on 128x128 ws)", "",
             "| operands | compat (SCALE-Sim) | old order (N outer) | chosen | chosen / compat | "
             "floor | chosen / floor | schedule |", "|---|---|---|---|---|---|---|---|"]
    for dtype in ("f32", "i8"):
        old, new = ours(g, "overlap", dtype, old_order=True), ours(g, "overlap", dtype)
        note = new["schedule"][0]
        lines.append(f"| {dtype} | {compat} | {old['cycles']} | {new['cycles']} | "
                     f"{new['cycles'] / compat:.3f} | {new['floor_cycles']} | "
                     f"{new['cycles'] / new['floor_cycles']:.3f} | {note['order']}, panels "
                     f"{note['panels']}, prefetch {note['prefetch']}, {note['accumulators']} "
                     f"accumulators, chunks {note['chunk']}, peak demand {note['peak_demand']} |")
        print(lines[-1], flush=True)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scalesim", metavar="PYTHON", help="re-run SCALE-Sim with this Python")
    args = parser.parse_args()
    if args.scalesim:
        gemms = []
        for m, n, k, r, c, df in [*GEMMS, *((*g, "is") for g in IS_GEMMS)]:
            cycles = run_scalesim(args.scalesim, m, n, k, r, c, df)
            gemms.append({"M": m, "N": n, "K": k, "rows": r, "cols": c, "dataflow": df,
                          "cycles": cycles})
            print(gemms[-1], flush=True)
        REFERENCE.write_text(json.dumps({"source": SOURCE, "gemms": gemms}, indent=1) + "\n")
    ref = json.loads(REFERENCE.read_text())
    lines = [
        "# Systolic backend: cycle counts", "",
        "Generated by `python benchmarks/systolic.py`; do not edit by hand.", "",
        "## How the reference numbers were obtained", "",
        f"{ref['source']}.", "",
        "SCALE-Sim was run for real (not the closed form) on every row below; the closed",
        "form of PERFORMANCE.md (ws fold 2R + C + T - 2, os fold R + C + T - 2, folds",
        "back to back, reported total - 1) agrees with it on every row.", "",
        "## Compatibility mode vs SCALE-Sim (int8 GEMMs, `timing=\"scalesim\"`)", "",
        "| M | N | K | array | dataflow | SCALE-Sim | closed form | ours (scalesim) | "
        "ours (overlap) | overlap / scalesim | utilization (overlap) | old fold order (overlap) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    ratio_1000 = None
    for g in [g for g in ref["gemms"] if g["dataflow"] != "is"]:
        t0 = time.perf_counter()
        compat, over = ours(g, "scalesim"), ours(g, "overlap")
        closed = scalesim_closed_form(g["M"], g["N"], g["K"], g["rows"], g["cols"], g["dataflow"])
        ratio = over["cycles"] / compat["cycles"]
        if (g["M"], g["N"], g["K"], g["rows"], g["dataflow"]) == (1000, 1000, 1000, 128, "ws"):
            ratio_1000 = (over["cycles"], compat["cycles"], ratio)
        mark = "" if compat["cycles"] == g["cycles"] else " **MISMATCH**"
        old = ours(g, "overlap", old_order=True)["cycles"] if g["dataflow"] == "ws" else "-"
        lines.append(f"| {g['M']} | {g['N']} | {g['K']} | {g['rows']}x{g['cols']} | "
                     f"{g['dataflow']} | {g['cycles']} | {closed} | {compat['cycles']}{mark} | "
                     f"{over['cycles']} | {ratio:.3f} | {100 * over['utilization']:.1f}% | {old} |")
        print(lines[-1], f"({time.perf_counter() - t0:.1f} s)", flush=True)
    lines += ["", "## Overlapped timing (the default)", "",
              "Defaults: scratchpad 8 MiB, accumulators 4 MiB, DMA 256 B/cycle with 64 cycles",
              "latency, vector unit one accumulator row per cycle; weight tiles are",
              "double-buffered in the array and prefetched d folds ahead (d chosen by the",
              "ws scheduler, `schedule.py`: the loop order, prefetch distance and",
              "accumulator use with the lowest predicted floor; 'old fold order' above is",
              "N tiles outer with no search).", ""]
    if ratio_1000:
        o, c, r = ratio_1000
        lines.append(f"1000 x 1000 x 1000 int8 (int32 result) on 128x128 ws: {o} cycles vs {c} in "
                     f"compatibility mode: **{r:.3f}x** (target <= 0.75x; 64 folds x 1000 rows "
                     f"= 64,000 is the streaming floor).")
    lines += ["", "Small GEMMs can be slower in overlap mode than in compatibility mode: there",
              "DMA costs bandwidth and latency, while SCALE-Sim's compute count assumes the",
              "operands are already on chip: the first operands arrive dma_latency (64) after",
              "their mvin and the last results leave 64 after theirs, plus one fill and",
              "drain that compat charges per fold but we cannot hide in a GEMM of one or",
              "two folds per tile. Every ws row is at or below its old fold order.", ""]
    lines += fold_order_rows()
    lines += ["", "The floor is the scheduler's fluid model of the chosen program (DMA items",
              "in program order at dma_bw bytes/cycle plus latency, preloads, streaming,",
              "fill and drain); the simulator's count is at or above it.", ""]
    lines += is_rows(ref)
    lines += ["", "is folds (SCALE-Sim's systolic_compute_is): ceil(K/R) x ceil(M/C), each",
              "2R + C + N - 2 (the A tile held, the N weight columns streaming).", ""]
    OUT.write_text("\n".join(lines))
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
