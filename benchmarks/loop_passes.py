"""Time kernels on the CPU target with the default loop pipeline and with each of the
seed's loop transformations added (``loop_pipeline``): one command, one table.

    python benchmarks/loop_passes.py [--repeat 7] [--quick]

Kernels: a row sum (reduce_sum over axis 1 of 4096x1024 f32: the lowering marks its
accumulation ``reassoc``, so LLVM vectorizes it already), a user ``for`` loop
computing a dot product (no ``reassoc``: LLVM keeps the sequential add chain), an
elementwise chain and a transpose (to see slowdowns). Times are the best of ``--repeat`` runs in ms;
``x`` is the speedup over the default pipeline (>1: faster).
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import wiadsl  # noqa: E402

SRC = """
kernel rowsum(input x: f32[T, D], output y: f32[T]) { y = reduce_sum(x, axis=1); }
kernel dot(input a: f32[N], input b: f32[N], output s: f32) {
    acc = 0.0;
    for i in range(N) { acc = acc + a[i] * b[i]; }
    s = acc;
}
kernel chain(input a: f32[M, N], input b: f32[N], output y: f32[M, N]) { y = relu(a * b + 1.0); }
kernel tr(input x: f32[M, N], output y: f32[N, M]) { y = exp(transpose(x)); }
"""

PIPELINES = ["", "unroll{factor=4}", "tile{size=64}", "tile{size=32,interchange=true}",
             "split-accumulators{count=4}", "split-accumulators{count=8}", "pipeline-loads"]


def inputs(quick: bool) -> dict[str, list[np.ndarray]]:
    rng = np.random.default_rng(0)
    s = 4 if quick else 1
    return {
        "rowsum": [rng.standard_normal((4096 // s, 1024)).astype(np.float32)],
        "dot": [rng.standard_normal((1 << 22) // s).astype(np.float32) for _ in range(2)],
        "chain": [rng.standard_normal((4096 // s, 1024)).astype(np.float32),
                  rng.standard_normal(1024).astype(np.float32)],
        "tr": [rng.standard_normal((2048 // s, 2048)).astype(np.float32)],
    }


def reference(name: str, args: list[np.ndarray]) -> np.ndarray:
    x = args[0].astype(np.float64)
    if name == "rowsum":
        return x.sum(axis=1)
    if name == "dot":
        return np.asarray(np.dot(x, args[1].astype(np.float64)))
    if name == "chain":
        return np.maximum(x * args[1] + 1, 0)
    return np.exp(x.T)


def time_ms(fn, args: list[np.ndarray], repeat: int) -> float:
    fn(*args)  # compile and warm up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(*args)
        times.append((time.perf_counter() - t0) * 1e3)
    return min(times)  # the least disturbed run: this machine is shared


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--quick", action="store_true", help="smaller inputs")
    opts = ap.parse_args()
    data = inputs(opts.quick)
    table: dict[str, dict[str, float]] = {}
    for pipeline in PIPELINES:
        mod = wiadsl.jit(SRC, target="cpu", loop_pipeline=pipeline)
        for name, args in data.items():
            fn = getattr(mod, name)
            got, want = fn(*args), reference(name, args)
            if not np.allclose(np.asarray(got, np.float64), want, rtol=1e-3, atol=1e-2):
                raise SystemExit(f"{name} with '{pipeline}' disagrees with NumPy")
            table.setdefault(name, {})[pipeline] = time_ms(fn, args, opts.repeat)
    width = max(len(p) for p in PIPELINES if p)
    print(f"{'kernel':8} {'default ms':>10}  " + "  ".join(f"{p:>{width}}" for p in PIPELINES[1:]))
    for name, row in table.items():
        base = row[""]
        cells = [f"{row[p]:7.2f} ({base / row[p]:4.2f}x)".rjust(width) for p in PIPELINES[1:]]
        print(f"{name:8} {base:10.2f}  " + "  ".join(cells))


if __name__ == "__main__":
    main()
