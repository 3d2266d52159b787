"""``operands="resident"`` (SCALE-Sim's on-chip assumption in overlap timing), the
end-to-end lower bound (bounds.py), and the overlapped schedule against both: like
for like never slower than the compatibility count, end to end never below the bound
and slower than compat only where the bound says the DMA forces it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import wiadsl
from wiadsl.backends.systolic import (
    emit_sasm,
    format_stats,
    parse_listing,
    run_section,
    schedule,
    tiling,
)
from wiadsl.backends.systolic.bounds import gemm_bound
from wiadsl.backends.systolic.config import ArrayConfig
from wiadsl.backends.systolic.isa import Schedule
from wiadsl.backends.systolic.schedule import build
from wiadsl.backends.systolic.timing import scalesim_closed_form
from wiadsl.diagnostics import WiaError, WiaUsageError

from .conftest import both

I8 = "kernel mm(input A: i8[M, K], input B: i8[K, N], output C: i32[M, N]) { C = cast(A, i32) @ cast(B, i32); }"
EPI = """kernel mm(input A: f32[M, K], input B: f32[K, N], input b: f32[N], output C: f32[M, N]) {
    C = relu(A @ B + b);
}"""
REFERENCE = json.loads((Path(__file__).parent / "scalesim_reference.json").read_text())["gemms"]
#: the held-out rows of benchmarks/systolic.md: SCALE-Sim's ws/os table and the is table
#: (benchmarks/systolic.py IS_GEMMS), (M, N, K, rows, cols, dataflow)
IS_ROWS = [(7, 9, 13, 8, 8), (33, 33, 33, 8, 8), (129, 7, 33, 32, 32), (100, 50, 70, 16, 16),
           (1, 128, 256, 128, 128), (300, 200, 100, 64, 32), (17, 5, 200, 8, 16), (50, 300, 40, 32, 64)]
HELD_OUT = [(g["M"], g["N"], g["K"], g["rows"], g["cols"], g["dataflow"]) for g in REFERENCE
            if g["M"] * g["N"] * g["K"] < 10 ** 8] + [(*r, "is") for r in IS_ROWS]
#: an end-to-end row slower than compat must be within this of the bound
NEAR_BOUND = 1.05


def _stats(m: int, n: int, k: int, r: int, c: int, df: str, **options) -> dict:
    kern = wiadsl.jit(I8, "mm", target="systolic", array=(r, c), dataflow=df, **options)
    out = kern(np.ones((m, k), np.int8), np.ones((k, n), np.int8))
    assert np.array_equal(out, np.full((m, n), k, np.int32))
    return dict(kern.stats)


def _id(row: tuple) -> str:
    m, n, k, r, c, df = row
    return f"{m}x{n}x{k}-{r}x{c}-{df}"


@pytest.mark.parametrize("row", HELD_OUT, ids=_id)
def test_held_out_rows(row):
    """Resident: at most the compatibility count. End to end: at least the bound; above
    compat only when the bound is (the DMA's latency forces it), and then near it."""
    m, n, k, r, c, df = row
    compat = scalesim_closed_form(m, n, k, r, c, df)
    resident = _stats(*row, operands="resident")
    e2e = _stats(*row)
    assert resident["operands"] == "resident" and resident["dma_cycles"] == 0
    assert resident["cycles"] <= compat
    assert resident["cycles"] >= gemm_bound(m, n, k, ArrayConfig(r, c, df, operands="resident"), 1, 4).cycles
    bound = gemm_bound(m, n, k, ArrayConfig(r, c, df), 1, 4).cycles
    assert e2e["cycles"] >= bound
    if e2e["cycles"] > compat:
        assert bound > compat
        assert e2e["cycles"] <= NEAR_BOUND * bound


@pytest.mark.parametrize("df", ["ws", "os"])
def test_1000_cubed_resident_below_compat(df):
    stats = _stats(1000, 1000, 1000, 128, 128, df, operands="resident")
    assert stats["cycles"] <= next(g["cycles"] for g in REFERENCE if g["M"] == 1000 and g["dataflow"] == df)


SHAPES = sorted({(m, n, k, r, c) for m, n, k, r, c, _ in HELD_OUT})


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_every_dataflow_resident_within_compat_total(shape):
    """Each held-out shape on every dataflow: resident overlap <= SCALE-Sim's total,
    which is its reported count + 1 (it reports the last cycle's index)."""
    m, n, k, r, c = shape
    for df in ("ws", "os", "is"):
        stats = _stats(m, n, k, r, c, df, operands="resident")
        assert stats["cycles"] <= scalesim_closed_form(m, n, k, r, c, df) + 1, df


def test_one_fold_cannot_overlap_anything():
    """One os tile: fill, stream, drain back to back in either timing; only SCALE-Sim's
    reporting convention (total - 1) separates the counts."""
    stats = _stats(1, 128, 256, 128, 128, "os", operands="resident")
    assert stats["cycles"] == scalesim_closed_form(1, 128, 256, 128, 128, "os") + 1 == 128 + 128 + 256 - 2


def test_bound_by_hand():
    # ws 7x9x13 on 8x8: first weight tile 1 cycle + 64 + preload 8; 2 x 2 folds of 7 rows;
    # fill/drain 14; a store 1 + 64
    b = gemm_bound(7, 9, 13, ArrayConfig(8, 8, "ws"), 1, 4)
    assert (b.stream, b.preload, b.dma) == (73 + 28 + 14 + 65, 65 + 4 * 8 + 1 + 14 + 65, 2 + 64)
    assert b.cycles == 180
    # os 64^3 on 32x32: two transfers + 64; 2 x 2 tiles of K = 64; fill/drain 62; a store
    assert gemm_bound(64, 64, 64, ArrayConfig(32, 32, "os"), 1, 4).cycles == 66 + 256 + 62 + 65
    # is 50x300x40 on 32x64: 2 x 1 folds streaming N = 300; the bound exceeds compat (851)
    assert gemm_bound(50, 300, 40, ArrayConfig(32, 64, "is"), 1, 4).cycles == 97 + 600 + 94 + 65
    # resident: no transfers, the first preload only
    assert gemm_bound(7, 9, 13, ArrayConfig(8, 8, "ws", operands="resident"), 1, 4).cycles == 8 + 28 + 14


@pytest.mark.parametrize("order, rotate, d", [("n-outer", False, 1), ("n-outer", True, 3),
                                              ("k-first:1", False, 2), ("k-first:2", True, 1)])
@pytest.mark.parametrize("df", ["ws", "is"])
def test_bound_holds_for_other_programs(order, rotate, d, df, monkeypatch):
    """The bound is for any program: forced fold orders, a slow or fast DMA."""
    def forced(g: schedule.Geometry, search: bool = True) -> schedule.WsSchedule:
        panels = tuple(range(len(g.k_ext)))
        panels = (*panels[-1:], *panels[:-1]) if rotate else panels
        o = order if g.max_accs >= len(g.n_ext) else "n-outer"
        o = f"k-first:{min(int(o[8:]), len(panels))}" if o.startswith("k-first") else o
        return build(g, o, panels, d)
    monkeypatch.setattr(tiling, "choose", forced)
    for m, n, k in [(7, 33, 129), (33, 9, 17), (1, 20, 40)]:
        for bw, lat in [(8, 16), (256, 64)]:
            stats = _stats(m, n, k, 8, 8, df, dma_bw=bw, dma_latency=lat)
            cfg = ArrayConfig(8, 8, df, dma_bytes_per_cycle=bw, dma_latency=lat)
            assert stats["cycles"] >= gemm_bound(m, n, k, cfg, 1, 4).cycles


@pytest.mark.parametrize("df", ["ws", "os", "is"])
def test_resident_values_equal_numpy(df, rng):
    for m, k, n in [(1, 7, 33), (7, 33, 129), (129, 1, 7)]:
        a = rng.integers(-128, 128, (m, k)).astype(np.int8)
        b = rng.integers(-128, 128, (k, n)).astype(np.int8)
        out, ref, stats = both(I8, "mm", a, b, array=(8, 8), dataflow=df, operands="resident")
        assert np.array_equal(out, ref) and stats["sections"] == {"array": 1}
        assert stats["dma_cycles"] == 0 and stats["operands"] == "resident"
        fa = rng.standard_normal((m, k)).astype(np.float32)
        fb = rng.standard_normal((k, n)).astype(np.float32)
        bias = rng.standard_normal(n).astype(np.float32)
        out, ref, _ = both(EPI, "mm", fa, fb, bias, array=(8, 8), dataflow=df, operands="resident")
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("df", ["ws", "os", "is"])
def test_cycle_true_agrees_with_resident_operands(df):
    """The cycle-true mode takes its DMA costs from the event model: free there too."""
    rng = np.random.default_rng(3)
    a = rng.integers(-128, 128, (7, 33)).astype(np.int8)
    b = rng.integers(-128, 128, (33, 19)).astype(np.int8)
    for array in [(4, 4), (8, 8)]:
        runs = []
        for cycle_true in (False, True):
            kern = wiadsl.jit(I8, "mm", target="systolic", array=array, dataflow=df,
                              operands="resident", cycle_true=cycle_true)
            runs.append((kern(a, b), dict(kern.stats)))
        (ev, evs), (ct, cts) = runs
        assert np.array_equal(ct, ev) and np.array_equal(ct, a.astype(np.int32) @ b.astype(np.int32))
        for key in ("cycles", "stall_cycles", "dma_cycles", "macs", "weight_load_cycles"):
            assert cts[key] == evs[key], key


def test_option_round_trips_through_the_listing_and_the_stats():
    ir = wiadsl.jit(I8, "mm").ir_for()
    shapes = {"A": (33, 129), "B": (129, 7)}
    text = emit_sasm(ir, "mm", array=(8, 8), shapes=shapes, operands="resident")
    target = next(line for line in text.splitlines() if line.startswith(".target"))
    assert target.endswith(" operands=resident")
    listing = parse_listing(text)
    assert listing.text() == text and listing.config.operands == "resident"
    note = next(i for i in listing.sections[0].body if isinstance(i, Schedule))
    assert note.get("operands") == "resident" and int(note.get("floor")) > 0
    a, b = np.ones(shapes["A"], np.int8), np.ones(shapes["B"], np.int8)
    kern = wiadsl.jit(I8, "mm", target="systolic", array=(8, 8), operands="resident")
    kern(a, b)
    # the recorded option drives the simulator: the listing alone gives the same count
    _, st = run_section(listing.sections[0], listing.config, {"A": a, "B": b})
    assert st.cycles == kern.stats["cycles"] == kern.stats["floor_cycles"]
    assert kern.stats["schedule"][0]["operands"] == "resident"
    assert "operands resident" in format_stats(kern.stats)
    # the default machine: no key on the .target line (older listings read back the same)
    plain = emit_sasm(ir, "mm", array=(8, 8), shapes=shapes)
    assert "operands=" not in plain.splitlines()[1]
    assert parse_listing(plain).config.operands == "dram"
    assert "; schedule" in plain and "operands=dram" in plain


def test_bad_operands_option():
    kern = wiadsl.jit(I8, "mm", target="systolic", operands="sram")
    with pytest.raises(WiaUsageError, match="operands must be one of dram, resident"):
        kern(np.ones((2, 2), np.int8), np.ones((2, 2), np.int8))
    kern = wiadsl.jit(I8, "mm", target="systolic", operands=True)
    with pytest.raises(WiaUsageError, match="bad value"):
        kern(np.ones((2, 2), np.int8), np.ones((2, 2), np.int8))
    text = emit_sasm(wiadsl.jit(I8, "mm").ir_for(), "mm", array=(4, 4),
                     shapes={"A": (2, 2), "B": (2, 2)}).replace("vec_lanes=4", "vec_lanes=4 operands=sram")
    with pytest.raises(WiaError, match="operands must be one of"):
        parse_listing(text)


@pytest.mark.parametrize("df", ["ws", "is"])
@pytest.mark.parametrize("operands", ["dram", "resident"])
@pytest.mark.parametrize("options", [{}, {"dma_bw": 16, "dma_latency": 8}, {"spad": 16384, "acc": 16384}],
                         ids=["default", "slow-dma", "small-memories"])
def test_simulator_lands_on_the_floor(df, operands, options):
    """The scheduler's floor is its model of the very program it emits, buffer reuse,
    epilogue operand loads and the vector unit included: the simulator reaches it."""
    for m, k, n in [(7, 33, 129), (200, 129, 150), (513, 77, 40)]:
        kern = wiadsl.jit(EPI, "mm", target="systolic", array=(8, 16), dataflow=df,
                          operands=operands, **options)
        kern(np.ones((m, k), np.float32), np.ones((k, n), np.float32), np.ones(n, np.float32))
        assert kern.stats["cycles"] == kern.stats["floor_cycles"] > 0


BMM = """kernel bmm(input A: i8[P, M, K], input B: i8[P, K, N], output C: i32[P, M, N]) {
    C = cast(A, i32) @ cast(B, i32);
}"""


@pytest.mark.parametrize("memories", [{}, {"spad": 1100}, {"spad": 700}, {"spad": 400}, {"acc": 150}],
                         ids=["default", "w-rotating", "k-blocked", "k-blocked-2-buffers",
                              "2-accumulators"])
@pytest.mark.parametrize("operands", ["dram", "resident"])
def test_os_pipeline_values_under_every_buffer_plan(memories, operands, rng):
    """os loads go ahead of the matmuls in rotating buffers (batched W reloaded, K
    blocked in small memories): a load placed before its buffer's last reader would
    give wrong values, the simulator running the listing in program order."""
    a, b = rng.integers(-128, 128, (3, 9, 50)).astype(np.int8), rng.integers(-128, 128, (3, 50, 13)).astype(np.int8)
    out, ref, stats = both(BMM, "bmm", a, b, array=(4, 4), dataflow="os", operands=operands, **memories)
    assert np.array_equal(out, ref) and stats["sections"] == {"array": 1}


def test_os_loads_run_ahead_of_the_stores():
    """64^3 on 32x32 os: the second M panel's A is loaded before the first tile's
    store; the first tile's K splits at R; enough accumulators rotate that no tile
    waits for a store; end to end below the compatibility count."""
    ir = wiadsl.jit(I8, "mm").ir_for()
    text = emit_sasm(ir, "mm", array=(32, 32), dataflow="os", shapes={"A": (64, 64), "B": (64, 64)})
    body = [line.strip() for line in text.splitlines() if line.startswith("  ")]
    second_panel = next(i for i, line in enumerate(body) if line.startswith("mvin") and "A.l[0, 32:64" in line)
    assert second_panel < next(i for i, line in enumerate(body) if line.startswith("mvout"))
    matmuls = [line for line in text.splitlines() if "matmul.os" in line]
    assert "a0[0:32, 0:32]" in matmuls[0] and "matmul.os.acc" in matmuls[1]
    assert len({line.split()[1].split("[")[0] for line in matmuls}) == 4    # c0..c3
    stats = _stats(64, 64, 64, 32, 32, "os")
    assert stats["cycles"] < scalesim_closed_form(64, 64, 64, 32, 32, "os")
    assert stats["stall_cycles"].get("destination", 0) == 0
