"""Autotuner benchmark: the tuned matmul config vs the default, for 3 shapes.

Usage:
    PYTHONPATH=. python benchmarks/tune.py [--top-k K]

Each shape is tuned in a fresh cache folder (no earlier measurements). Then the
default and the best config are re-measured side by side, alternating, 7 rounds
of medians, so the reported speedup does not come from the tuning run's own
(noisy) numbers.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SHAPES = [(128, 128, 128), (256, 256, 256), (64, 1024, 512)]  # (M, N, K)
SRC = "kernel mm(input A: f32[M, K], input B: f32[K, N], output C: f32[M, N]) { C = A @ B; }"


def main(argv: list[str]) -> None:
    top_k = int(argv[argv.index("--top-k") + 1]) if "--top-k" in argv else 8
    print("| M x N x K | default config | ms | tuned config | ms | GFLOP/s tuned | speedup "
          "(re-measured) | tuning run's own speedup |\n|---|---|---|---|---|---|---|---|")
    for m, n, k in SHAPES:
        with tempfile.TemporaryDirectory() as folder:
            os.environ["WIADSL_CACHE_DIR"] = folder
            import wiadsl
            from wiadsl.backends.llvm.backend import CpuKernel
            from wiadsl.backends.llvm.gemm import default_config
            from wiadsl.profile.timing import median_ms
            from wiadsl.tune.tuner import autotune

            fn = wiadsl.jit(SRC, kernel="mm", target="cpu")
            rng = np.random.default_rng(0)
            a = rng.standard_normal((m, k)).astype(np.float32)
            b = rng.standard_normal((k, n)).astype(np.float32)
            result = autotune(fn, a, b, top_k=top_k, out=sys.stderr)
            kernels = {c.label(): CpuKernel(fn.ir_for(), "mm", config=c)
                       for c in (default_config(), result.best)}
            times: dict[str, list[float]] = {label: [] for label in kernels}
            for _ in range(7):
                for label, kern in kernels.items():
                    times[label].append(median_ms(lambda kern=kern, a=a, b=b: kern.run([a, b]), budget_s=0.1))
            d = float(np.median(times[default_config().label()]))
            t = float(np.median(times[result.best.label()]))
            print(f"| {m}x{n}x{k} | {default_config().label()} | {d:.3f} | {result.best.label()} | "
                  f"{t:.3f} | {2 * m * n * k / t / 1e6:.1f} | {d / t:.2f}x | {result.speedup:.2f}x |",
                  flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
