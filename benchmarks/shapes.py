"""Shape-generic CPU code (issue 21): compiles per distinct extent, and what generic
code costs against static code at the same shape.

Usage:
    PYTHONPATH=. python benchmarks/shapes.py [--reps N] [--calls N]

Part 1, compiles: ``--calls`` calls (default 1,000), each with a new extent, of an
elementwise kernel (length 1..N) and of a matmul (M and N both new each call, K
fixed), under the default ``shapes="auto"`` policy and under ``shapes="static"``
(one compile per shape, as before issue 21; run on the first 60 extents only and
scaled). Reported: compiles (distinct codes the kernel holds), total wall time and
time per call. Every result is checked against NumPy.

Part 2, steady state: each kernel compiled static (``shapes="static"``) and generic
(``shapes="generic"``: every extent read at run time), called at the same inputs in
interleaved rounds; medians of ``--reps`` rounds, ratio = static time / generic
time (1.00: the generic code is as fast; < 1: slower).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ADD = "kernel add(input a: f32[N], input b: f32[N], output c: f32[N]) { c = relu(a * b + 1.0); }"
MATMUL = "kernel mm(input A: f32[M, K], input B: f32[K, N], output C: f32[M, N]) { C = A @ B; }"
SOFTMAX = ("import nn;\nkernel sm(input x: f32[R, C], output y: f32[R, C]) "
           "{ y = nn.softmax(x, axis=-1); }")
LAYER_NORM = ("import nn;\nkernel ln(input x: f32[R, C], input g: f32[C], input b: f32[C], "
              "output y: f32[R, C]) { y = nn.layer_norm(x, g, b, eps=1e-5); }")
MLP = (ROOT / "examples" / "mlp.wia").read_text()


def compile_counts(calls: int) -> None:
    import wiadsl

    rng = np.random.default_rng(0)
    print(f"{'kernel':<12} {'policy':<7} {'calls':>6} {'compiles':>9} {'total s':>8} {'ms/call':>8}")
    for name, src, kernel, make, ref in (
            ("elementwise", ADD, "add",
             lambda i: [rng.standard_normal(i + 1).astype(np.float32) for _ in range(2)],
             lambda a, b: np.maximum(a * b + 1, 0)),
            ("matmul", MATMUL, "mm",
             lambda i: [rng.standard_normal((1 + i % 97, 16)).astype(np.float32),
                        rng.standard_normal((16, 1 + (i * 7) % 89)).astype(np.float32)],
             lambda a, b: a @ b)):
        for policy, n in (("auto", calls), ("static", min(calls, 60))):
            fn = wiadsl.jit(src, kernel=kernel, target="cpu", shapes=policy)
            t0 = time.perf_counter()
            for i in range(n):
                args = make(i)
                np.testing.assert_allclose(fn(*args), ref(*args), rtol=1e-4, atol=1e-4)
            total = time.perf_counter() - t0
            (compiled,) = fn._specializations.values()
            print(f"{name:<12} {policy:<7} {n:>6} {compiled.compiles:>9} {total:>8.2f} "
                  f"{total / n * 1e3:>8.2f}")


def steady_state(reps: int) -> None:
    import wiadsl

    rng = np.random.default_rng(1)

    def f32(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32)

    rows = [
        ("elementwise 4", ADD, "add", [f32(4), f32(4)]),
        ("elementwise 1M", ADD, "add", [f32(1 << 20), f32(1 << 20)]),
        ("matmul 7x33x129", MATMUL, "mm", [f32(7, 33), f32(33, 129)]),
        ("matmul 256^3", MATMUL, "mm", [f32(256, 256), f32(256, 256)]),
        ("matmul 512^3", MATMUL, "mm", [f32(512, 512), f32(512, 512)]),
        ("softmax 512x1024", SOFTMAX, "sm", [f32(512, 1024)]),
        ("layer_norm 512x1024", LAYER_NORM, "ln", [f32(512, 1024), f32(1024), f32(1024)]),
        ("mlp_relu 32x256", MLP, "mlp_relu",
         [f32(32, 256), f32(256, 512), f32(512), f32(512, 10), f32(10)]),
    ]
    print(f"\n{'kernel':<22} {'static ms':>10} {'generic ms':>11} {'static/generic':>15}")
    for label, src, kernel, args in rows:
        fns = {p: wiadsl.jit(src, kernel=kernel, target="cpu", shapes=p) for p in ("static", "generic")}
        want = fns["static"](*args)
        np.testing.assert_allclose(fns["generic"](*args), want, rtol=1e-4, atol=1e-5)
        inner = max(1, int(2e-3 / max(_once(fns["static"], args), 1e-7)))  # ~2 ms per sample
        times: dict[str, list[float]] = {p: [] for p in fns}
        for _ in range(reps):
            for p, fn in fns.items():  # interleaved: load changes hit both alike
                t0 = time.perf_counter()
                for _ in range(inner):
                    fn(*args)
                times[p].append((time.perf_counter() - t0) / inner)
        s, g = (statistics.median(times[p]) * 1e3 for p in ("static", "generic"))
        print(f"{label:<22} {s:>10.4f} {g:>11.4f} {s / g:>15.2f}")


def _once(fn, args) -> float:
    fn(*args)
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=21)
    ap.add_argument("--calls", type=int, default=1000)
    args = ap.parse_args()
    compile_counts(args.calls)
    steady_state(args.reps)


if __name__ == "__main__":
    main()
