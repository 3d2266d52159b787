"""dataflow="is": SCALE-Sim's compat cycles (the closed form of systolic_compute_is),
numerics against NumPy on odd sizes, the assembler round trip and the checks."""

from __future__ import annotations

import numpy as np
import pytest

import wiadsl
from wiadsl.backends.systolic import parse_listing, run_section
from wiadsl.backends.systolic.config import ArrayConfig
from wiadsl.backends.systolic.isa import MatmulIS, SasmError
from wiadsl.backends.systolic.timing import scalesim_closed_form

from .conftest import both

I8 = "kernel mm(input A: i8[M, K], input B: i8[K, N], output C: i32[M, N]) { C = cast(A, i32) @ cast(B, i32); }"
F32 = "kernel mm(input A: f32[M, K], input B: f32[K, N], output C: f32[M, N]) { C = A @ B; }"


@pytest.mark.parametrize("m, n, k, r, c", [
    (7, 9, 13, 8, 8), (33, 33, 33, 8, 8), (129, 7, 33, 32, 32), (100, 50, 70, 16, 16),
    (1, 128, 256, 128, 128), (300, 200, 100, 64, 32), (17, 5, 200, 8, 16), (50, 300, 40, 32, 64),
    (1, 1, 1, 4, 4), (129, 129, 129, 16, 8)])
def test_compat_cycles_equal_the_closed_form(m, n, k, r, c):
    kern = wiadsl.jit(I8, "mm", target="systolic", array=(r, c), dataflow="is", timing="scalesim")
    assert np.array_equal(kern(np.ones((m, k), np.int8), np.ones((k, n), np.int8)),
                          np.full((m, n), k, np.int32))
    assert kern.stats["cycles"] == scalesim_closed_form(m, n, k, r, c, "is")


def test_closed_form_by_hand():
    # K = 13 on 8 rows: 2 row folds; M = 7 on 8 columns: 1 column fold; each fold
    # 2 * 8 + 8 + N - 2 with N = 9 streaming: 2 * 31 - 1
    assert scalesim_closed_form(7, 9, 13, 8, 8, "is") == 61
    # the is fold count depends on M, not N (ws: on N)
    assert scalesim_closed_form(100, 1, 8, 8, 8, "is") == 13 * (16 + 8 + 1 - 2) - 1
    assert scalesim_closed_form(100, 1, 8, 8, 8, "ws") == 1 * (16 + 8 + 100 - 2) - 1


@pytest.mark.parametrize("m, k, n", [(1, 7, 33), (7, 33, 129), (129, 1, 7), (33, 129, 1)])
@pytest.mark.parametrize("array", [(8, 8), (8, 16), (32, 32)])
def test_numerics_match_numpy(m, k, n, array, rng):
    a = rng.integers(-128, 128, (m, k)).astype(np.int8)
    b = rng.integers(-128, 128, (k, n)).astype(np.int8)
    out, ref, stats = both(I8, "mm", a, b, array=array, dataflow="is")
    assert np.array_equal(out, ref) and stats["sections"] == {"array": 1}
    assert stats["macs"] == m * k * n
    fa, fb = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    out, ref, _ = both(F32, "mm", fa, fb, array=array, dataflow="is")
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


def test_overlap_streams_n_per_fold_and_overlaps():
    # a DMA that costs nothing: what is left is the array's own overlap
    kern = wiadsl.jit(I8, "mm", target="systolic", array=(8, 8), dataflow="is", dma_bw=4096,
                      dma_latency=0)
    kern(np.ones((20, 24), np.int8), np.ones((24, 16), np.int8))
    s = kern.stats
    folds = 3 * 3   # ceil(K/R) x ceil(M/C)
    assert s["stream_cycles"] == folds * 16 and s["weight_load_cycles"] == folds * 8
    assert s["cycles"] < scalesim_closed_form(20, 16, 24, 8, 8, "is")


LISTING = """.target rows=4 cols=4 dataflow=is timing=overlap spad=4096 acc=4096 dma_bw=8 dma_latency=0 vec_lanes=4
.section s0 array "mm"
.dram A i8 [3, 4] in
.dram B i8 [4, 6] in
.dram C i32 [3, 6] out
.view A.l = mat A target=[3, 4] shape=[1, 3, 4]
.view B.r = mat B target=[4, 6] shape=[1, 4, 6]
.view C.o = mat C target=[3, 6] shape=[1, 3, 6]
.spad a0 i8 [4, 4]
.spad w0buf i8 [4, 6]
.acc c0 [4, 6]
  mvin a0[0:3, 0:4], A.l[0, 0:3, 0:4]
  mvin w0buf[0:4, 0:6], B.r[0, 0:4, 0:6]
  preload w1, a0[0:3, 0:4]
  matmul.is c0[0:3, 0:6], w0buf[0:4, 0:6], w1
  mvout C.o[0, 0:3, 0:6], c0[0:3, 0:6]:i32
.end
"""


def test_hand_written_listing_runs_and_round_trips(rng):
    listing = parse_listing(LISTING)
    assert parse_listing(listing.text()) == listing
    body = listing.sections[0].body
    assert isinstance(body[3], MatmulIS) and body[3].slot == 1 and not body[3].accumulate
    a = rng.integers(-128, 128, (3, 4)).astype(np.int8)
    b = rng.integers(-128, 128, (4, 6)).astype(np.int8)
    out, stats = run_section(listing.sections[0], listing.config, {"A": a, "B": b})
    assert np.array_equal(out["C"], a.astype(np.int32) @ b.astype(np.int32))
    assert stats.stream_cycles == 6     # the 6 weight columns stream


@pytest.mark.parametrize("edit, message", [
    ("dataflow=is", "dataflow=ws"),                                 # matmul.is on a ws array
    ("preload w1, a0[0:3, 0:4]", "preload w1, w0buf[0:4, 0:6]"),    # 4 x 6 tile > C x R
])
def test_checker_rejects_misuse(edit, message):
    text = LISTING.replace(edit, message)
    listing = parse_listing(text)
    with pytest.raises(SasmError, match="section s0"):
        run_section(listing.sections[0], listing.config, {"A": np.zeros((3, 4), np.int8),
                                                           "B": np.zeros((4, 6), np.int8)})


def test_is_config_from_options():
    assert ArrayConfig(8, 8, "is").header().split()[3] == "dataflow=is"
