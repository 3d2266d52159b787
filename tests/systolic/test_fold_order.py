"""The ws fold order chosen from bandwidth (schedule.py): its floor by hand, the
choice never slower than the old order, numerics of every candidate order, and the
bandwidth-bound regime (f32 1000^3 on 128x128, scaled down 4x to stay fast)."""

from __future__ import annotations

import numpy as np
import pytest

import wiadsl
from wiadsl.backends.systolic import emit_sasm, format_stats, parse_listing, schedule, tiling
from wiadsl.backends.systolic.isa import Schedule
from wiadsl.backends.systolic.schedule import Geometry, build, candidates
from wiadsl.backends.systolic.timing import scalesim_closed_form

from .conftest import both

I8 = "kernel mm(input A: i8[M, K], input B: i8[K, N], output C: i32[M, N]) { C = cast(A, i32) @ cast(B, i32); }"
F32 = "kernel mm(input A: f32[M, K], input B: f32[K, N], output C: f32[M, N]) { C = A @ B; }"
EPI = """kernel mm(input A: f32[M, K], input B: f32[K, N], input b: f32[N], output C: f32[M, N]) {
    C = relu(A @ B + b);
}"""


def _run(src: str, m: int, k: int, n: int, dtype=np.int8, **options) -> dict:
    kern = wiadsl.jit(src, "mm", target="systolic", **options)
    a, b = np.ones((m, k), dtype), np.ones((k, n), dtype)
    assert np.array_equal(kern(a, b), np.full((m, n), k))
    return dict(kern.stats)


def _geometry(k: int) -> Geometry:
    # 8x8 array, 8 B/cycle, latency 4; M = 16 rows of int8 in one chunk, N = 8, i32 out
    return Geometry(8, 8, 8, 4, 8, ((0, 0, 16),), 16, (8,) * (k // 8), (8,), 1, 4)


def test_floor_of_one_fold_by_hand():
    s = build(_geometry(8), "n-outer", (0,), 2)
    # W 64 B: DMA 0-8, usable 12; A 16x8 = 128 B: 8-24, usable 28; preload 12-20;
    # stream 28-44, done 44 + 8 + 8 - 2 = 58; store 16x8x4 = 512 B: 58-122, + 4
    assert s.floor == 126
    assert s.dma == 8 + 16 + 64
    assert s.stream == 16


def test_floor_of_two_folds_by_hand():
    s = build(_geometry(16), "n-outer", (0, 1), 2)
    # W0 0-8 (12), A0 8-24 (28), W1 24-32 (36), preload0 12-20, stream0 28-44;
    # A1 32-48 (52), preload1 max(20, 36) -> 44, stream1 52-68, done 82; store 82-146
    assert s.floor == 150
    assert [i.kind for i in s.program] == ["w", "lbl", "a", "pre", "w", "mm", "lbl", "a", "pre",
                                           "mm", "out"]


@pytest.mark.parametrize("k", [8, 16])
def test_simulator_reaches_the_chosen_floor_on_small_cases(k):
    stats = _run(I8, 16, k, 8, array=(8, 8), dma_bw=8, dma_latency=4)
    assert stats["cycles"] == stats["floor_cycles"]
    assert stats["floor_cycles"] <= build(_geometry(k), "n-outer", tuple(range(k // 8)), 2).floor


SHAPES = [(33, 33, 33, 8, 8), (129, 33, 7, 32, 32), (256, 512, 128, 128, 128),
          (300, 100, 200, 64, 32), (17, 200, 5, 8, 16), (7, 13, 9, 8, 8), (1, 256, 128, 128, 128),
          (200, 129, 150, 16, 16)]


@pytest.mark.parametrize("src, dtype", [(I8, np.int8), (F32, np.float32)], ids=["i8", "f32"])
@pytest.mark.parametrize("m, k, n, r, c", SHAPES)
def test_chosen_order_never_slower_than_old_order(src, dtype, m, k, n, r, c, monkeypatch):
    new = _run(src, m, k, n, dtype, array=(r, c))
    monkeypatch.setattr(schedule, "SEARCH_FOLDS", -1)   # the old order: N tiles outer
    old = _run(src, m, k, n, dtype, array=(r, c))
    assert old["schedule"][0]["order"] == "n-outer"
    assert new["cycles"] <= old["cycles"]
    assert new["cycles"] >= new["floor_cycles"]


def test_bandwidth_bound_f32_reaches_its_floor():
    """1000^3 f32 on 128x128 at 256 B/cycle, every extent / 4 (bytes per cycle per
    array column kept): N tiles outer needs all of A in the first column pass."""
    opts = dict(array=(32, 32), dma_bw=64, dma_latency=16, spad=512 << 10, acc=256 << 10)
    new = _run(F32, 250, 250, 250, np.float32, **opts)
    compat = scalesim_closed_form(250, 250, 250, 32, 32, "ws")
    note = new["schedule"][0]
    assert note["order"].startswith("k-first") and int(note["accumulators"]) == 8
    assert new["cycles"] <= 0.76 * compat
    assert new["floor_cycles"] <= new["cycles"] <= 1.02 * new["floor_cycles"]
    assert new["stall_cycles"].get("operands", 0) < 0.05 * new["cycles"]


def _force(monkeypatch, order: str, rotate: bool, d: int, edge: bool) -> None:
    def chosen(g: Geometry, search: bool = True) -> schedule.WsSchedule:
        panels = tuple(range(len(g.k_ext)))
        if rotate:
            panels = (*panels[-1:], *panels[:-1])
        p = order if not order.startswith("k-first") else f"k-first:{min(int(order[8:]), len(panels))}"
        if g.max_accs < len(g.n_ext):
            p = "n-outer"
        return build(g if not edge else schedule.replace(g, edge_chunk=max(1, g.chunk // 4)),
                     p, panels, d)
    monkeypatch.setattr(tiling, "choose", chosen)


@pytest.mark.parametrize("order, rotate, d, edge", [
    ("n-outer", False, 1, False), ("n-outer", True, 3, True), ("k-first:1", False, 2, True),
    ("k-first:2", True, 2, False), ("k-first:99", True, 3, True)])
@pytest.mark.parametrize("mkn", [(1, 7, 33), (7, 33, 129), (129, 129, 7), (33, 1, 129)])
@pytest.mark.parametrize("dataflow", ["ws", "is"])
def test_every_order_matches_numpy(order, rotate, d, edge, mkn, dataflow, rng, monkeypatch):
    """ws, and is (the same orders on the transposed product: held A tiles, streamed
    W columns, accumulators [M tile, N columns])."""
    _force(monkeypatch, order, rotate, d, edge)
    m, k, n = mkn
    a = rng.integers(-128, 128, (m, k)).astype(np.int8)
    b = rng.integers(-128, 128, (k, n)).astype(np.int8)
    out, ref, stats = both(I8, "mm", a, b, array=(8, 8), dataflow=dataflow)
    assert np.array_equal(out, ref) and stats["sections"] == {"array": 1}
    fa, fb = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    out, ref, _ = both(EPI, "mm", fa, fb, bias, array=(8, 8), dataflow=dataflow)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


def test_candidates_cover_orders_prefetch_and_panels():
    g = Geometry(8, 8, 8, 4, 8, ((0, 0, 16),), 16, (8, 8, 3), (8, 8), 4, 4, max_accs=2,
                 max_wbufs=4)
    cands = candidates(g)
    assert {o for o, _, _ in cands} == {"n-outer", "k-first:1", "k-first:2", "k-first:3"}
    assert {d for _, _, d in cands} == {1, 2, 3}
    assert {p for _, p, _ in cands} == {(0, 1, 2), (2, 0, 1)}   # the narrow panel first
    for order, panels, d in cands:
        s = build(g, order, panels, d)
        folds = sorted((f.j, f.i) for f in s.folds)
        assert folds == sorted((j, i) for j in range(2) for i in range(3))
        assert sum(f.first for f in s.folds) == sum(f.last for f in s.folds) == 2


def test_choice_and_floor_in_listing_and_report():
    text = emit_sasm(wiadsl.jit(F32, "mm").ir_for(), "mm", array=(32, 32), shapes={"A": (250, 250), "B": (250, 250)},
                     dma_bw=64, dma_latency=16, spad=512 << 10, acc=256 << 10)
    notes = [line for line in text.splitlines() if line.strip().startswith("; schedule ")]
    assert len(notes) == 1 and "order=k-first:" in notes[0] and "floor=" in notes[0]
    listing = parse_listing(text)
    assert parse_listing(listing.text()) == listing
    note = next(i for i in listing.sections[0].body if isinstance(i, Schedule))
    assert note.get("peak_demand").endswith("B/cycle") and int(note.get("floor")) > 0
    stats = _run(F32, 33, 129, 7, np.float32, array=(8, 8))
    assert "schedule" in format_stats(stats) and "floor" in format_stats(stats)
    compat = _run(F32, 33, 129, 7, np.float32, array=(8, 8), timing="scalesim")
    assert compat["schedule"] == [] and compat["floor_cycles"] == 0
