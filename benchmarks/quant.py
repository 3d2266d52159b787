"""int8 quantization on the CPU backend against f32: speed ratio and error, in one run.

    PYTHONPATH=. python benchmarks/quant.py [--quick]

Rows (medians of timed calls, both sides in the same process and run; ratio > 1
means the int8 version is faster):
- int8 GEMM 1024^3 (``cast(a, i32) @ cast(b, i32)`` on i8 inputs, the ``loop.qgemm``
  micro-kernel) against the f32 GEMM of the same size; error: exact (checked).
- the f32 matmul kernel 1024^3 quantized by ``wiadsl.quant.quantize`` (activation
  quantize + run-time per-channel weight quantization + int8 GEMM + dequantize)
  against the f32 kernel; error against the f32 result.
- examples/quantized_mlp.wia at 256x512x1024x256, quantized against f32.
"""

from __future__ import annotations

import math
import pathlib
import statistics
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import wiadsl  # noqa: E402
from wiadsl.quant import quantize  # noqa: E402

QUICK = "--quick" in sys.argv
REPS = 3 if QUICK else 7


def timed(fn, *args) -> float:
    fn(*args)  # compile + warm up
    ts = []
    for _ in range(REPS):
        t = time.perf_counter()
        fn(*args)
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def row(name: str, t_q: float, t_f: float, err: str) -> None:
    print(f"| {name} | {t_q * 1e3:.1f} ms | {t_f * 1e3:.1f} ms | {t_f / t_q:.2f}x | {err} |")


def main() -> None:
    rng = np.random.default_rng(0)
    n = 512 if QUICK else 1024
    print("| benchmark | int8 | f32 | speed ratio | error vs f32 |")
    print("|---|---|---|---|---|")
    src = """kernel mm8(input a: i8[M, K], input b: i8[K, N], output c: i32[M, N]) { c = cast(a, i32) @ cast(b, i32); }
    kernel mm(input a: f32[M, K], input b: f32[K, N], output c: f32[M, N]) { c = a @ b; }"""
    mod = wiadsl.jit(src, target="cpu")
    a8 = rng.integers(-128, 128, (n, n), dtype=np.int8)
    b8 = rng.integers(-128, 128, (n, n), dtype=np.int8)
    af, bf = a8.astype(np.float32), b8.astype(np.float32)
    exact = np.array_equal(mod.mm8(a8, b8), a8.astype(np.int64) @ b8.astype(np.int64))
    row(f"int8 GEMM {n}^3 (i8 in, i32 out) vs f32 GEMM", timed(mod.mm8, a8, b8), timed(mod.mm, af, bf),
        "exact" if exact else "MISMATCH")

    a = rng.standard_normal((n, n)).astype(np.float32)
    b = (rng.standard_normal((n, n)) / math.sqrt(n)).astype(np.float32)
    qmm = quantize(mod.mm, [(a, b)])
    e = qmm.report.outputs[0]
    row(f"quantized matmul kernel {n}^3 (f32 in/out)", timed(qmm, a, b), timed(mod.mm, a, b),
        f"max {e.max_abs:.3g} ({e.max_rel:.2%} of max), mean {e.mean_abs:.3g}")

    bsz, din, dh, dout = (64, 256, 512, 64) if QUICK else (256, 512, 1024, 256)
    mlp = wiadsl.jit((ROOT / "examples/quantized_mlp.wia").read_text(), kernel="mlp", target="cpu")
    w1 = (rng.standard_normal((din, dh)) / math.sqrt(din)).astype(np.float32)
    b1 = (rng.standard_normal(dh) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((dh, dout)) / math.sqrt(dh)).astype(np.float32)
    b2 = (rng.standard_normal(dout) * 0.1).astype(np.float32)
    cal = [(rng.standard_normal((bsz, din)).astype(np.float32), w1, b1, w2, b2) for _ in range(4)]
    qmlp = quantize(mlp, cal)
    x = rng.standard_normal((bsz, din)).astype(np.float32)
    y32, yq = mlp(x, w1, b1, w2, b2), qmlp(x, w1, b1, w2, b2)
    err = np.abs(yq - y32)
    row(f"quantized_mlp {bsz}x{din}x{dh}x{dout}", timed(qmlp, x, w1, b1, w2, b2),
        timed(mlp, x, w1, b1, w2, b2),
        f"max {err.max():.3g} ({err.max() / np.abs(y32).max():.2%} of max), mean {err.mean():.3g} (held-out x)")


if __name__ == "__main__":
    main()
