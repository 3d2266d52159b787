"""Explicit SIMD (``vectorize``) and software prefetch (``prefetch``) loop passes on the CPU.

Usage:
    PYTHONPATH=. python benchmarks/vectorize.py [--reps N]

Three kernels, each compiled through ``loop_pipeline`` as: the default loop
pipeline, ``+vectorize{width=8}`` (with ``interleave=4`` too), and each of those
followed by ``prefetch{distance=64}``. Reported: the median wall time of ``--reps`` calls after
a warm-up, and the speedup over the default. Results are checked against NumPy.
- ``chain``: ``relu(x * y + 0.5) * x`` over 16M f32 (LLVM's own loop vectorizer
  already handles such loops);
- ``row_sum``: ``reduce_sum`` over the rows of 4096 x 1024 f32 (the lowering marks the
  accumulation ``reassoc``, so LLVM may vectorize the scalar loop too);
- ``row_max``: ``reduce_max`` over the same rows (NaN-propagating max).
The backend's own thread count applies (row loops run as parallel regions); pin the
process (``taskset -c 0``) to measure one core.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

KERNELS = {
    "chain": ("""
kernel chain(input x: f32[N], input y: f32[N], output z: f32[N]) {
    z = relu(x * y + 0.5) * x;
}
""", lambda r: [r.standard_normal(1 << 24).astype(np.float32) for _ in range(2)],
        lambda x, y: np.maximum(x * y + np.float32(0.5), 0) * x),
    "row_sum": ("""
kernel row_sum(input x: f32[N, M], output s: f32[N]) {
    s = reduce_sum(x, axis=1);
}
""", lambda r: [r.standard_normal((4096, 1024)).astype(np.float32)], lambda x: x.sum(axis=1)),
    "row_max": ("""
kernel row_max(input x: f32[N, M], output s: f32[N]) {
    s = reduce_max(x, axis=1);
}
""", lambda r: [r.standard_normal((4096, 1024)).astype(np.float32)], lambda x: x.max(axis=1)),
}

PIPELINES = {
    "default": "",
    "+vectorize": "vectorize{width=8}",
    "+vectorize{interleave=4}": "vectorize{width=8,interleave=4}",
    "+vectorize+prefetch": "vectorize{width=8},prefetch{distance=64}",
    "+vec{il=4}+prefetch": "vectorize{width=8,interleave=4},prefetch{distance=64}",
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    import wiadsl

    rng = np.random.default_rng(0)
    print(f"{'kernel':<10} {'pipeline':<22} {'median ms':>10} {'min ms':>8} {'speedup':>8}")
    for name, (src, make, ref) in KERNELS.items():
        inputs = make(rng)
        want = ref(*inputs)
        base = None
        for label, pipe in PIPELINES.items():
            options = {"loop_pipeline": pipe} if pipe else {}
            kernel = wiadsl.jit(src, kernel=name, target="cpu", **options)
            got = kernel(*inputs)
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
            times = []
            for _ in range(args.reps):
                t0 = time.perf_counter()
                kernel(*inputs)
                times.append(time.perf_counter() - t0)
            med, best = 1e3 * float(np.median(times)), 1e3 * min(times)
            base = base or med
            print(f"{name:<10} {label:<22} {med:>10.2f} {best:>8.2f} {base / med:>7.2f}x")


if __name__ == "__main__":
    main()
