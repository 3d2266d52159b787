"""The profiler: counts, verdicts, the report, the machine probe and the plots."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import wiadsl
from wiadsl.profile import cli, counts, machine, profiler, trace
from wiadsl.profile.machine import Peaks
from wiadsl.profile.profiler import KernelStat

ROOT = Path(__file__).resolve().parents[2]
PEAKS = Peaks(gflops=100.0, copy_gbs=20.0, read_gbs=10.0, threads=2, cpu="test")
NET = """
import nn;
kernel net(input x: f32[B, D], input w: f32[D, H], input b: f32[H], output y: f32[B, H]) {
    y = nn.softmax(relu(x @ w + b));
}
"""


@pytest.fixture
def fixed_peaks(monkeypatch):
    """The report logic under known roofs (the probe itself is tested on its own)."""
    monkeypatch.setattr(profiler, "peaks", lambda: PEAKS)


def test_probe_measures_positive_peaks_and_caches_them(monkeypatch, cache_dir):
    monkeypatch.setattr(machine, "BW_BYTES", 1 << 20)
    monkeypatch.setattr(machine, "FMA_ITERS", 20_000)
    found = machine.peaks(threads=1)
    assert found.gflops > 0 and found.copy_gbs > 0 and found.read_gbs > 0 and found.threads == 1
    assert machine.peaks(threads=1) == found  # read back from the cache folder
    assert list((cache_dir / "v1" / "machine").glob("*.json"))


def test_verdicts_follow_the_roofline():
    assert PEAKS.ridge == 5.0 and PEAKS.gbs == 20.0
    gemm = KernelStat("k", "tensor.matmul", ms=1.0, flops=50_000_000, bytes=1_000_000, peaks=PEAKS)
    assert gemm.bound == "compute" and gemm.utilization == pytest.approx(50.0)
    assert "autotune" in gemm.suggestion()
    stream = KernelStat("e", "tensor.fused_elementwise", 1.0, 1_000_000, 4_000_000, PEAKS)
    assert stream.bound == "memory" and stream.utilization == pytest.approx(20.0)
    assert stream.suggestion() == "memory-bound at 20% of bandwidth: fuse with its consumer"
    tiny = KernelStat("t", "tensor.fused_elementwise", 0.01, 10, 40, PEAKS)
    assert tiny.suggestion().startswith("call-overhead bound")


def test_counts_of_a_traced_matmul():
    fn = wiadsl.jit(NET, kernel="net", target="cpu")
    x, w, b = (np.ones(s, np.float32) for s in ((3, 5), (5, 7), (7,)))
    module, inputs = trace.specialize(fn, (x, w, b))
    traced = trace.trace(trace.optimized(module), "net", inputs)
    mm = next(t for t in traced if "matmul" in t.op.name)
    assert counts.flops(mm) >= 2 * 3 * 7 * 5
    assert counts.bytes_moved(mm) >= (15 + 35 + 21) * 4


def test_profile_of_the_cnn_example_report_and_plots(fixed_peaks, tmp_path):
    pytest.importorskip("matplotlib")
    path = ROOT / "examples" / "cnn.wia"
    text = cli.profile_report(path.read_text(), str(path), runs=5)
    assert "profile of 'forward_pass'" in text and "GFLOP/s" in text and "->" in text
    assert "eager" in text and "compiled" in text and "p99" in text and "jitter" in text
    result = profiler.LAST[0]
    assert all(s.ms > 0 for s in result.stats)
    assert {s.bound for s in result.stats} <= {"compute", "memory"}
    labels = [s.label for s in result.stats]
    assert "conv_bn_relu_fused" in labels and "matmul" in labels
    conv = next(s for s in result.stats if s.label == "conv_bn_relu_fused")
    assert conv.flops >= 2 * 8 * 16 * 16 * 27  # 2 x outputs x (C x kh x kw)
    written = cli.plot_roofline(tmp_path / "roofline.png")
    for name in ("roofline.png", "roofline_latency.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and name in written
