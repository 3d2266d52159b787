"""The gemm's k block (``GemmConfig.kc``) against NumPy's OpenBLAS, in one process.

Usage:
    PYTHONPATH=. python benchmarks/gemm_blocking.py [--sizes 512,1024,2048] [--kc 256,512]
        [--shapes 64x784x512,128x768x3072] [--rounds 5]

Each ``kc`` is compiled as an explicit ``gemm_config`` (the host's default micro-kernel,
only the k block changed); then every variant and NumPy's ``a @ b`` are timed in
interleaved rounds (a pause after NumPy's batch: its BLAS threads spin on), medians.
Prints GFLOP/s per variant and its ratio to NumPy (> 1: faster than OpenBLAS). This
is how ``gemm_config.KC`` was chosen; run it on a new host kind before changing it.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

os.environ["WIADSL_CACHE"] = "0"  # each variant compiled here, not found in a cache
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import wiadsl  # noqa: E402
from wiadsl.backends.llvm.gemm_config import GemmConfig, default_config  # noqa: E402
from wiadsl.backends.llvm.target import host  # noqa: E402

SRC = "kernel mm(input A: f32[M, K], input B: f32[K, N], output C: f32[M, N]) { C = A @ B; }"
#: seconds per timed batch, and of rest after NumPy's (cpu.py's SETTLE)
BATCH, SETTLE = 0.3, 0.25


def _per_call(fn, seconds: float = BATCH) -> float:
    fn()
    start, n = time.perf_counter(), 0
    while time.perf_counter() - start < seconds:
        fn()
        n += 1
    return (time.perf_counter() - start) / n


def compare(m: int, k: int, n: int, kcs: list[int], rounds: int) -> None:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((m, k), np.float32), rng.standard_normal((k, n), np.float32)
    base = default_config()
    variants = {}
    for kc in kcs:
        config = GemmConfig(base.mr, base.nv, base.vector_bits, kc, base.mc, base.unroll)
        mm = wiadsl.jit(SRC, target="cpu", gemm_config=config).mm
        np.testing.assert_allclose(mm(a, b), a @ b, rtol=1e-3, atol=1e-2)
        variants[kc] = mm
    times: dict[object, list[float]] = {kc: [] for kc in kcs} | {"numpy": []}
    for _ in range(rounds):
        for kc, mm in variants.items():
            times[kc].append(_per_call(lambda mm=mm: mm(a, b)))
        times["numpy"].append(_per_call(lambda: a @ b))
        time.sleep(SETTLE)
    flops = 2 * m * k * n
    ref = float(np.median(times["numpy"]))
    cells = [f"{flops / ref / 1e9:.0f}"]
    for kc in kcs:
        t = float(np.median(times[kc]))
        cells.append(f"{flops / t / 1e9:.0f} ({ref / t:.2f}x)")
    print(f"| {m}x{k}x{n} | " + " | ".join(cells) + " |", flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="512,1024,2048", help="square sizes n (n x n x n)")
    p.add_argument("--shapes", default="", help="MxKxN shapes besides the squares")
    p.add_argument("--kc", default="256,512", help="k blocks to compare")
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args(argv)
    kcs = [int(v) for v in args.kc.split(",")]
    shapes = [(s, s, s) for s in map(int, filter(None, args.sizes.split(",")))]
    shapes += [tuple(int(v) for v in s.split("x")) for s in filter(None, args.shapes.split(","))]
    from wiadsl.backends.llvm.threads import get_num_threads
    print(f"host {host().cpu}, {get_num_threads()} threads; GFLOP/s (ratio to NumPy), "
          f"medians of {args.rounds} interleaved rounds\n")
    print("| M x K x N | " + " | ".join(["NumPy"] + [f"kc {kc}" for kc in kcs]) + " |")
    print("|" + "---|" * (len(kcs) + 2))
    for m, k, n in shapes:
        compare(m, k, n, kcs, args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
