"""``quantize-int8`` / ``wiadsl.quant.quantize``: bit-exact against a NumPy int reference
on the interpreter, the CPU backend and the systolic simulator."""

import math

import numpy as np
import pytest

import wiadsl
from wiadsl.passes import optimize
from wiadsl.quant import params as qp
from wiadsl.quant import quantize
from wiadsl.quant.api import PREPARE
from wiadsl.quant.calibrate import MinMax, annotate, calibrate, product_ops

MLP = """kernel mlp(input x: f32[B, I], input w1: f32[I, H], input b1: f32[H],
                  input w2: f32[H, O], input b2: f32[O], output y: f32[B, O]) {
    h = x @ w1 + b1;
    h = max(h, 0.0);
    y = h @ w2 + b2;
}"""


def data(seed=0, B=24, IN=40, H=48, OUT=10, n=3):
    rng = np.random.default_rng(seed)
    w1 = (rng.standard_normal((IN, H)) / math.sqrt(IN)).astype(np.float32)
    b1 = (rng.standard_normal(H) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((H, OUT)) / math.sqrt(H)).astype(np.float32)
    b2 = (rng.standard_normal(OUT) * 0.1).astype(np.float32)
    return [(rng.standard_normal((B, IN)).astype(np.float32), w1, b1, w2, b2) for _ in range(n)]


def ranges(samples):
    """The calibration ranges the API computes (same module, same observers)."""
    k = wiadsl.jit(MLP, kernel="mlp")
    module = optimize(k.ir_for(), pipeline=PREPARE)
    annotate(module, "mlp", calibrate(module, "mlp", samples, MinMax))
    return [op.attributes["quant_range"] for op in product_ops(module, "mlp")]


def reference(sample, rngs):
    """The quantized MLP in NumPy integers: asymmetric activations, per-channel weights,
    i32 accumulation, the dequantize/bias/relu/requantize epilogue in f32."""
    x, w1, b1, w2, b2 = sample
    f32 = np.float32

    def layer(qx, zx, sx, w):
        sw = (np.maximum(np.abs(w).max(axis=0), f32(qp.TINY_SCALE) * f32(127)) / f32(127)).astype(f32)
        qw = qp.quantize(w, sw, 0)
        acc = qx.astype(np.int32) @ qw.astype(np.int32)
        corr = (qw.astype(np.int64).sum(axis=0).astype(np.int32) * np.int32(zx)).astype(np.int32)
        return (acc - corr).astype(f32) * (sw * f32(sx)).astype(f32)

    (s1, z1), (s2, z2) = (qp.choose(lo, hi, False) for lo, hi in rngs)
    qx = qp.quantize(x, s1, z1)
    h = np.maximum((layer(qx, z1, s1, w1) + b1).astype(f32), f32(0))
    qh = qp.quantize(h, s2, z2)                       # the fused requantize
    return (layer(qh, z2, s2, w2) + b2).astype(f32), qh


@pytest.fixture(scope="module")
def samples():
    return data()


@pytest.mark.parametrize("target", ["interp", "cpu", "systolic"])
def test_mlp_bit_exact(samples, target):
    qk = quantize(wiadsl.jit(MLP, kernel="mlp", target=target), samples)
    assert qk.report.products == 2 and qk.report.requantized == 1
    rngs = ranges(samples)
    for s in samples[:2]:
        want, _ = reference(s, rngs)
        np.testing.assert_array_equal(qk(*s), want)
    err = qk.report.outputs[0]
    assert 0 < err.mean_abs <= err.max_abs and err.max_rel < 0.05  # int8 is close, not equal


def test_requantized_int8_output_is_exact(samples):
    """A kernel whose output *is* the requantized i8 tensor (no float after it)."""
    src = """kernel q(input x: f32[B, I], input w: f32[I, H], input b: f32[H], output y: i8[B, H]) {
        y = quantize(max(x @ w + b, 0.0), 0.05, -128);
    }"""
    x, w1, b1 = samples[0][:3]
    for target in ("interp", "cpu", "systolic"):
        qk = quantize(wiadsl.jit(src, kernel="q", target=target), [s[:3] for s in samples])
        # the requantize lives in the product's body (fused by ``fuse`` or by the pass)
        assert "-> tensor<?x?xi8> {" in str(qk.quantized)
        lo = MinMax()
        lo.observe(np.concatenate([s[0] for s in samples]))
        s1, z1 = qp.choose(*lo.range(), False)
        sw = (np.abs(w1).max(axis=0) / np.float32(127)).astype(np.float32)
        qw = qp.quantize(w1, sw, 0)
        qx = qp.quantize(x, s1, z1)
        acc = qx.astype(np.int32) @ qw.astype(np.int32) - qw.astype(np.int32).sum(0) * np.int32(z1)
        h = np.maximum(acc.astype(np.float32) * (sw * s1).astype(np.float32) + b1, np.float32(0))
        np.testing.assert_array_equal(qk(x, w1, b1), qp.quantize(h, np.float32(0.05), -128))


def test_conv2d_and_constant_weights_across_backends():
    """conv2d (symmetric activations, per-channel constant weights folded at compile time)."""
    rng = np.random.default_rng(3)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32) * 0.3
    wtxt = np.array2string(w, separator=", ", threshold=10**6, floatmode="unique").replace("\n", "")
    src = f"""const W = {wtxt};
    kernel c(input x: f32[1, 3, 8, 8], output y: f32[1, 4, 8, 8]) {{ y = max(conv2d(x, W, padding=1), 0.0); }}"""
    cal = [(rng.standard_normal((1, 3, 8, 8)).astype(np.float32),) for _ in range(2)]
    outs = []
    for target in ("interp", "cpu", "systolic"):
        qk = quantize(wiadsl.jit(src, kernel="c", target=target), cal)
        assert qk.report.products == 1
        outs.append(qk(*cal[0]))
        assert qk.report.outputs[0].max_rel < 0.05
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_array_equal(outs[0], outs[2])


def test_dynamic_pass_from_the_pipeline():
    """``-p quantize-int8`` without calibration: per-tensor dynamic activation scales."""
    src = "kernel mm(input a: f32[M, K], input b: f32[K, N], output c: f32[M, N]) { c = a @ b; }"
    module = wiadsl.jit(src, kernel="mm").ir_for()
    remarks = []
    optimize(module, pipeline="inline,canonicalize,quantize-int8{per_channel=false},cse,dce", remarks=remarks)
    text = str(module)
    assert "tensor.fused_matmul" in text and "xi8>" in text and "quantized" in text
    assert any("dynamic" in r.message for r in remarks)
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((9, 33)).astype(np.float32), rng.standard_normal((33, 7)).astype(np.float32)
    from wiadsl.ir import run_func
    (got,) = run_func(module, "mm", [a, b])
    sa, sb = np.abs(a).max() / np.float32(127), np.abs(b).max() / np.float32(127)
    acc = qp.quantize(a, sa, 0).astype(np.int32) @ qp.quantize(b, sb, 0).astype(np.int32)
    np.testing.assert_array_equal(got, acc.astype(np.float32) * np.float32(sb * sa))
    assert np.abs(got - a @ b).max() < 0.05 * np.abs(a @ b).max()
