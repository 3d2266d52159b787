"""Cycle-true mode (pe_array/): the PE grid run register by register vs the event model.

The examples' GEMMs at 4x4, 8x8 and 16x16, ws/os/is, scalesim and overlap timing:
int results bit for bit, float results within f32 summation rounding of NumPy and of
the event simulator, and every cycle figure equal (docs/systolic.md, "Cycle-true
mode", says why they can be). Grid-level tests check the register timing on its own
and that an instruction issued one cycle too early really corrupts the result.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import wiadsl
from wiadsl.backends.systolic import emit_sasm, parse_listing, run_section
from wiadsl.backends.systolic.isa import Local
from wiadsl.backends.systolic.pe_array import run_section_cycle_true
from wiadsl.backends.systolic.pe_array.output import OutputGrid
from wiadsl.backends.systolic.pe_array.stationary import StationaryGrid
from wiadsl.diagnostics import WiaUsageError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ARRAYS = [(4, 4), (8, 8), (16, 16)]
DATAFLOWS = ["ws", "os", "is"]
TIMINGS = ["scalesim", "overlap"]
#: figures the two engines must report identically
SAME = ("cycles", "macs", "mapping_efficiency", "stream_cycles", "weight_load_cycles", "dma_cycles",
        "vec_cycles", "dram_bytes", "instructions")


def _example(name: str) -> str:
    return (EXAMPLES / name).read_text()


def _both(src: str, kernel: str, args: list[np.ndarray], **options: object):
    """(event outputs, cycle-true outputs, event stats, cycle-true stats)."""
    event = wiadsl.jit(src, kernel, target="systolic", **options)
    true = wiadsl.jit(src, kernel, target="systolic", cycle_true=True, **options)
    return event(*args), true(*args), dict(event.stats), dict(true.stats)


def _same_figures(ev: dict, ct: dict) -> None:
    for key in SAME:
        assert ct[key] == ev[key], key
    assert ct["stall_cycles"] == ev["stall_cycles"]  # by cause too
    assert ct["sections"] == ev["sections"]


def _rounding_bound(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """|error| of an f32 dot product of length K, any summation order: <= K * eps * |a| @ |b|
    (plus one rounding of each product); the two engines each stay within it of the exact
    value, so their difference is within twice that."""
    k = a.shape[-1]
    eps = float(np.finfo(np.float32).eps)
    return 2 * (k + 1) * eps * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)))


MATMUL_SHAPES = [(7, 33, 19), (1, 1, 1), (16, 16, 16)]


@pytest.mark.parametrize("array", ARRAYS, ids=lambda a: f"{a[0]}x{a[1]}")
@pytest.mark.parametrize("dataflow", DATAFLOWS)
@pytest.mark.parametrize("timing", TIMINGS)
def test_example_matmuls_agree(array, dataflow, timing):
    """examples/matmul.wia (f32) and quantize.wia's int8_matmul (i8 x i8 -> i32)."""
    rng = np.random.default_rng(23)
    f32_src, i8_src = _example("matmul.wia"), _example("quantize.wia")
    for m, k, n in MATMUL_SHAPES:
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float32)
        ev, ct, evs, cts = _both(f32_src, "matmul", [a, b], array=array, dataflow=dataflow,
                                 timing=timing)
        _same_figures(evs, cts)
        assert cts["sections"] == {"array": 1}
        exact = a.astype(np.float64) @ b.astype(np.float64)
        bound = _rounding_bound(a, b)
        assert np.all(np.abs(ct - exact) <= bound / 2)
        assert np.all(np.abs(ct - ev) <= bound)

        qa = rng.integers(-128, 128, (m, k)).astype(np.int8)
        qb = rng.integers(-128, 128, (k, n)).astype(np.int8)
        ev, ct, evs, cts = _both(i8_src, "int8_matmul", [qa, qb], array=array,
                                 dataflow=dataflow, timing=timing)
        _same_figures(evs, cts)
        assert np.array_equal(ct, ev)
        assert np.array_equal(ct, qa.astype(np.int32) @ qb.astype(np.int32))


I8_OUT = "kernel i8mm(input A: i8[M, K], input B: i8[K, N], output C: i8[M, N]) { C = A @ B; }"


@pytest.mark.parametrize("dataflow", DATAFLOWS)
def test_int8_wraps_bit_for_bit(dataflow):
    """i8 results read from int32 words wrap: the same bits as the event simulator."""
    rng = np.random.default_rng(5)
    a = rng.integers(-128, 128, (9, 40)).astype(np.int8)
    b = rng.integers(-128, 128, (40, 6)).astype(np.int8)
    ev, ct, evs, cts = _both(I8_OUT, "i8mm", [a, b], array=(8, 8), dataflow=dataflow)
    _same_figures(evs, cts)
    assert np.array_equal(ct, ev)
    wrapped = (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int32).astype(np.int8)
    assert np.array_equal(ct, wrapped)


@pytest.mark.parametrize("array, dataflow, timing", [
    ((4, 4), "ws", "overlap"), ((4, 4), "os", "scalesim"), ((8, 8), "is", "overlap"),
    ((8, 8), "ws", "scalesim"), ((16, 16), "os", "overlap"), ((16, 16), "is", "scalesim")])
def test_example_mlp_agrees(array, dataflow, timing):
    """examples/mlp.wia: two GEMMs with bias + relu epilogues on the vector unit."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((5, 12)).astype(np.float32)
    w1 = rng.standard_normal((12, 20)).astype(np.float32)
    b1 = rng.standard_normal(20).astype(np.float32)
    w2 = rng.standard_normal((20, 7)).astype(np.float32)
    b2 = rng.standard_normal(7).astype(np.float32)
    ev, ct, evs, cts = _both(_example("mlp.wia"), "mlp_relu", [x, w1, b1, w2, b2],
                             array=array, dataflow=dataflow, timing=timing)
    _same_figures(evs, cts)
    assert cts["sections"].get("array", 0) == 2
    ref = np.maximum(x @ w1 + b1, 0) @ w2 + b2
    np.testing.assert_allclose(ct, ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ct, ev, rtol=1e-5, atol=1e-5)


def test_example_attention_agrees():
    """examples/attention.wia: Q @ K^T through a transposing view, softmax on the vector
    unit, then @ V — array, vector and DMA traffic interleaved."""
    rng = np.random.default_rng(11)
    q = rng.standard_normal((5, 6)).astype(np.float32)
    k = rng.standard_normal((7, 6)).astype(np.float32)
    v = rng.standard_normal((7, 4)).astype(np.float32)
    ev, ct, evs, cts = _both(_example("attention.wia"), "attn_explicit", [q, k, v],
                             array=(8, 8), dataflow="ws")
    _same_figures(evs, cts)
    np.testing.assert_allclose(ct, ev, rtol=1e-5, atol=1e-6)


def test_same_sasm_text_runs_on_both_engines():
    """The listing text wiac writes, assembled once, runs on either engine."""
    ir = wiadsl.jit(_example("matmul.wia"), "matmul").ir_for()
    text = emit_sasm(ir, "matmul", array=(4, 4), dataflow="ws", shapes={"A": (6, 9), "B": (9, 5)})
    listing = parse_listing(text)
    rng = np.random.default_rng(3)
    inputs = {"A": rng.standard_normal((6, 9)).astype(np.float32),
              "B": rng.standard_normal((9, 5)).astype(np.float32)}
    for section in listing.sections:
        out_e, st_e = run_section(section, listing.config, inputs)
        out_c, st_c = run_section_cycle_true(section, listing.config, inputs)
        assert st_c.cycles == st_e.cycles
        for name, value in out_e.items():
            np.testing.assert_allclose(out_c[name], value, rtol=1e-5, atol=1e-6)


def test_os_tiles_of_unequal_length_differ_within_the_bound():
    """Where the two models differ: a K-blocked os GEMM (a small scratchpad splits K=50
    into blocks of 7 and a last block of 1). The event model holds the array max(T, R)
    per os tile; the column buses really allow the next tile at u + max(T, T + R - T'),
    so each change of tile length T -> T' moves a start by at most R - 1 cycles. Equal
    in scalesim timing (there every instruction waits for the previous one anyway)."""
    ir = wiadsl.jit(_example("matmul.wia"), "matmul").ir_for()
    shapes = {"A": (9, 50), "B": (50, 6)}
    text = emit_sasm(ir, "matmul", array=(4, 4), dataflow="os", shapes=shapes, spad=700)
    lengths = [i.lhs.shape[1] for s in parse_listing(text).sections for i in s.body
               if type(i).__name__ == "MatmulOS"]
    changes = sum(t != u for t, u in zip(lengths, lengths[1:]))
    assert changes > 0
    rng = np.random.default_rng(9)
    a = rng.standard_normal(shapes["A"]).astype(np.float32)
    b = rng.standard_normal(shapes["B"]).astype(np.float32)
    for timing in TIMINGS:
        ev, ct, evs, cts = _both(_example("matmul.wia"), "matmul", [a, b], array=(4, 4),
                                 dataflow="os", timing=timing, spad=700)
        assert np.all(np.abs(ct - ev) <= _rounding_bound(a, b))
        if timing == "scalesim":
            assert cts["cycles"] == evs["cycles"]
        else:
            assert cts["cycles"] != evs["cycles"]  # the event model's hold is not exact here
            assert abs(cts["cycles"] - evs["cycles"]) <= (4 - 1) * changes


# ------------------------------------------------------------------ the grids alone

class _Memory:
    """Named 2-D buffers standing in for the scratchpad and accumulators."""

    def __init__(self, **buffers: np.ndarray):
        self.buffers = buffers

    def tile(self, x: Local) -> np.ndarray:
        return self.buffers[x.buffer][x.rows[0]:x.rows[1], x.cols[0]:x.cols[1]]


class _Op:
    def __init__(self, index: int, ins: object):
        self.index, self.ins = index, ins


class _Pass:
    def __init__(self, dst: Local, src: Local, accumulate: bool):
        self.dst, self.src, self.accumulate = dst, src, accumulate


def _ws_run(r: int, c: int, a: np.ndarray, w: np.ndarray, stream_at: int):
    """Preload w at cycle 0, stream a from ``stream_at``; (accumulator, events by kind)."""
    mem = _Memory(w=w.copy(), a=a.copy(), acc=np.zeros((a.shape[0], w.shape[1]), np.uint32))
    g = StationaryGrid(r, c, mem, transposed=False)
    wsrc = Local("w", (0, w.shape[0]), (0, w.shape[1]))
    src = Local("a", (0, a.shape[0]), (0, a.shape[1]))
    dst = Local("acc", (0, a.shape[0]), (0, w.shape[1]))
    pre, mm = _Op(0, None), _Op(1, _Pass(dst, src, False))
    events: dict[tuple[int, str], int] = {}
    for cycle in range(200):
        if cycle == 0:
            g.preload(pre, 0, wsrc, cycle)
        if cycle == stream_at:
            g.matmul(mm, 0, src, dst, False, cycle)
        for ev in g.step(cycle):
            events[(ev.op.index, ev.kind)] = ev.time
    return mem.buffers["acc"].view(np.int32), events


def test_ws_grid_timing_is_the_wavefront():
    """Weights ready R cycles after the preload starts; the last of T rows lands
    T + R + C - 2 after the stream starts, whatever the tile's size."""
    rng = np.random.default_rng(0)
    r, c = 6, 5
    a = rng.integers(-128, 128, (9, 4)).astype(np.int8)   # K = 4 < R
    w = rng.integers(-128, 128, (4, 3)).astype(np.int8)   # N = 3 < C
    acc, events = _ws_run(r, c, a, w, stream_at=r)
    assert np.array_equal(acc, a.astype(np.int32) @ w.astype(np.int32))
    assert events[(0, "done")] == r and events[(0, "read_end")] == r
    assert events[(1, "read_end")] == r + 9
    assert events[(1, "done")] == r + 9 + r + c - 2


def test_ws_grid_streaming_too_early_is_wrong():
    """The weights really shift in per cycle. PE(0, 0)'s last weight shift and its first
    MAC may share cycle R - 1 (registers load on the same edge), so streaming from R - 1
    is still right — the one cycle of slack docs/systolic.md names; from R - 2 the
    first row meets a stale (zero) weight."""
    rng = np.random.default_rng(1)
    a = rng.integers(1, 100, (5, 4)).astype(np.int8)
    w = rng.integers(1, 100, (4, 4)).astype(np.int8)
    exact = a.astype(np.int32) @ w.astype(np.int32)
    assert np.array_equal(_ws_run(4, 4, a, w, stream_at=4)[0], exact)
    assert np.array_equal(_ws_run(4, 4, a, w, stream_at=3)[0], exact)
    early, _ = _ws_run(4, 4, a, w, stream_at=2)
    assert not np.array_equal(early, exact)
    assert np.array_equal(early[1:], exact[1:])  # only row 0 passed PE(0, 0) too soon


def test_ws_grid_refilling_a_slot_too_early_is_wrong():
    """A slot may be refilled from the cycle after its last activation entered (u + T):
    the new weights then stay just behind the old activations' diagonal. One cycle
    earlier, the last row meets a new weight at PE(0, 0)."""
    rng = np.random.default_rng(4)
    r = c = 4
    a = rng.integers(1, 100, (6, 4)).astype(np.int8)
    w = rng.integers(1, 100, (4, 4)).astype(np.int8)
    exact = a.astype(np.int32) @ w.astype(np.int32)

    def run(refill_at: int) -> np.ndarray:
        mem = _Memory(w=w.copy(), v=(w + 1).astype(np.int8), a=a.copy(),
                      acc=np.zeros((6, 4), np.uint32))
        g = StationaryGrid(r, c, mem, transposed=False)
        src, dst = Local("a", (0, 6), (0, 4)), Local("acc", (0, 6), (0, 4))
        mm = _Op(1, _Pass(dst, src, False))
        for cycle in range(60):
            if cycle == 0:
                g.preload(_Op(0, None), 0, Local("w", (0, 4), (0, 4)), cycle)
            if cycle == r:
                g.matmul(mm, 0, src, dst, False, cycle)
            if cycle == refill_at:
                g.preload(_Op(2, None), 0, Local("v", (0, 4), (0, 4)), cycle)
            g.step(cycle)
        return mem.buffers["acc"].view(np.int32)

    stream_end = r + 6
    assert np.array_equal(run(stream_end), exact)
    early = run(stream_end - 1)
    assert not np.array_equal(early[-1], exact[-1]) and np.array_equal(early[:-1], exact[:-1])


def test_os_grid_timing_and_back_to_back_tiles():
    """Two os tiles of equal T issued max(T, R) apart share the column buses without a
    collision; each lands T + R + C - 2 after its start."""
    rng = np.random.default_rng(2)
    r, c, t = 5, 4, 3
    lhs = rng.standard_normal((2 * r, t)).astype(np.float32)
    rhs = rng.standard_normal((t, c)).astype(np.float32)
    mem = _Memory(l=lhs, w=rhs, acc=np.zeros((2 * r, c), np.uint32))
    g = OutputGrid(r, c, mem)
    ops = []
    for i in range(2):
        lo = Local("l", (i * r, (i + 1) * r), (0, t))
        dst = Local("acc", (i * r, (i + 1) * r), (0, c))
        ops.append((_Op(i, _Pass(dst, lo, False)), lo))
    starts = {0: 0, max(t, r): 1}
    events: dict[tuple[int, str], int] = {}
    for cycle in range(100):
        if cycle in starts:
            op, lo = ops[starts[cycle]]
            assert g.port_ready(t, cycle)
            g.matmul(op, lo, Local("w", (0, t), (0, c)), cycle)
        elif cycle < max(t, r):
            # input ports free from T on, the column buses only from R on
            assert not g.port_ready(t, cycle)
        for ev in g.step(cycle):
            events[(ev.op.index, ev.kind)] = ev.time
    got = mem.buffers["acc"].view(np.float32)
    np.testing.assert_allclose(got, lhs @ rhs, rtol=1e-6, atol=1e-6)
    assert events[(0, "done")] == t + r + c - 2
    assert events[(1, "done")] == max(t, r) + t + r + c - 2


# ------------------------------------------------------------------ usage errors

def test_array_larger_than_16_is_a_usage_error():
    with pytest.raises(WiaUsageError, match="up to 16x16"):
        wiadsl.jit(_example("matmul.wia"), "matmul", target="systolic", array=(17, 16),
                   cycle_true=True)(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32))


def test_cycle_true_flag_must_be_a_bool():
    with pytest.raises(WiaUsageError, match="cycle_true must be True or False"):
        wiadsl.jit(_example("matmul.wia"), "matmul", target="systolic", array=(4, 4),
                   cycle_true="yes")(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32))
