"""The gemm config space, the cost model and the autotuner end to end (tiny shapes)."""

from __future__ import annotations

import io

import numpy as np
import pytest

import wiadsl
from wiadsl.backends.llvm.backend import CpuKernel
from wiadsl.backends.llvm.gemm import GemmConfig, default_config
from wiadsl.backends.llvm.target import host
from wiadsl.profile.machine import Peaks
from wiadsl.tune import records, space
from wiadsl.tune.model import MIN_FIT, Fitted, analytic
from wiadsl.tune.tuner import autotune

MATMUL = "kernel mm(input A: f32[M, K], input B: f32[K, N], output C: f32[M, N]) { C = A @ B; }"
BITS = host().vector_bits
PEAKS = Peaks(gflops=100.0, copy_gbs=20.0, read_gbs=20.0, threads=2, cpu="test")
SHAPES = [space.GemmShape(64, 64, 64)]


def test_prune_keeps_default_and_only_valid_configs():
    kept = space.prune(space.generate(BITS), SHAPES, BITS)
    assert default_config() in kept and len(kept) < len(space.generate(BITS))
    regs = space.vector_registers(BITS)
    for c in kept:
        c.check(BITS)
        assert c.mr * c.nv + c.nv + 1 <= regs and c.mc % c.mr == 0


def test_check_rejects_what_the_host_cannot_run():
    with pytest.raises(ValueError):
        GemmConfig(vector_bits=1024).check(BITS)
    with pytest.raises(ValueError):
        GemmConfig(unroll=3).check(BITS)


def test_fitted_model_refines_after_measurements():
    model = Fitted(SHAPES, PEAKS, BITS)
    configs = space.prune(space.generate(BITS), SHAPES, BITS)[:6]
    truth = {c: analytic(c, SHAPES, PEAKS, BITS) * (2.0 if c.unroll == 1 else 1.0) for c in configs}
    for c in configs[:MIN_FIT - 1]:
        model.add(c, truth[c])
    assert model.weights is None
    for c in configs[MIN_FIT - 1:]:
        model.add(c, truth[c])
    assert model.weights is not None
    before = [abs(np.log(model.base(c) / truth[c])) for c in configs]
    after = [abs(np.log(model.predict(c) / truth[c])) for c in configs]
    assert sum(after) < sum(before)


@pytest.mark.parametrize("m,n", [(4, 4096), (4096, 4)])
def test_analytic_model_splits_like_the_driver(monkeypatch, m, n):
    # a wide, short gemm splits by columns and a tall, narrow one by rows (the
    # driver's choice): with 4 threads each thread's share is about a quarter
    from wiadsl.tune import model

    shapes, config = [space.GemmShape(m, n, 4096)], default_config()
    monkeypatch.setattr(model, "THREADS", 1)
    serial = analytic(config, shapes, PEAKS, BITS)
    monkeypatch.setattr(model, "THREADS", 4)
    assert analytic(config, shapes, PEAKS, BITS) < serial / 2.5


@pytest.mark.parametrize("config", [
    GemmConfig(mr=1, nv=1, vector_bits=128, kc=64, mc=24, unroll=1),
    GemmConfig(mr=3, nv=3, vector_bits=BITS, kc=64, mc=24, unroll=4),
    GemmConfig(mr=4, nv=2, vector_bits=BITS, kc=128, mc=48, unroll=2),
    GemmConfig(mr=2, nv=4, vector_bits=BITS, kc=64, mc=48, unroll=8),
], ids=lambda c: c.label())
def test_every_config_computes_the_same_product(config):
    fn = wiadsl.jit(MATMUL, kernel="mm", target="cpu")
    rng = np.random.default_rng(1)
    a = rng.standard_normal((37, 70)).astype(np.float32)   # odd sizes: row and column tails,
    b = rng.standard_normal((70, 29)).astype(np.float32)   # k not a multiple of kc or unroll
    got = CpuKernel(fn.ir_for(), "mm", config=config).run([a, b])[0]
    np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-4)


def test_autotune_measures_keeps_and_is_used(cache_dir):
    fn = wiadsl.jit(MATMUL, kernel="mm", target="cpu")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((48, 40)).astype(np.float32)
    b = rng.standard_normal((40, 56)).astype(np.float32)
    out = io.StringIO()
    result = autotune(fn, a, b, top_k=2, out=out, budget_s=0.01)
    text = out.getvalue()
    assert "[" in text and "speedup over the default config" in text
    assert default_config().label() in result.measured and 2 <= len(result.measured) <= 3
    assert result.gemms == [space.GemmShape(48, 56, 40)] and result.op == "matmul"
    rid = records.record_id(fn.ir_for(), "mm", [a.shape, b.shape], [a.dtype, b.dtype])
    assert len(records.measurements(rid)) == len(result.measured)  # one file per config
    tuned = records.tuned_config(fn.ir_for(), "mm", [a.shape, b.shape], [a.dtype, b.dtype])
    assert tuned == result.best and result.best_ms == min(result.measured.values())
    fresh = wiadsl.jit(MATMUL, kernel="mm", target="cpu")
    np.testing.assert_allclose(fresh(a, b), a @ b, rtol=1e-4, atol=1e-4)
    again = autotune(fn, a, b, top_k=1, out=None, budget_s=0.01)
    assert again.earlier == len(result.measured)  # earlier measurements are kept
    assert len(records.measurements(rid)) == len(result.measured) + 1


def test_autotune_needs_a_gemm():
    fn = wiadsl.jit("kernel f(input x: f32[N], output y: f32[N]) { y = x + x; }", kernel="f",
                    target="cpu")
    with pytest.raises(wiadsl.WiaUsageError, match="no matmul or conv2d"):
        autotune(fn, np.ones(4, np.float32), out=None)


def test_damaged_record_is_ignored():
    rid = "0" * 32
    records.save(rid, default_config(), 1.0, "matmul", "mm")
    (records.record_dir(rid) / "bad.json").write_text("{not json")
    assert records.best(rid).config == default_config()
