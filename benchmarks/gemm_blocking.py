"""The gemm's blocking (``GemmConfig``) against NumPy's OpenBLAS, in one process.

Usage:
    PYTHONPATH=. python benchmarks/gemm_blocking.py [--sizes 512,1024,2048] [--kc 256,512]
        [--configs 6x2u1,6x2u4,4x3u4k256] [--shapes 64x784x512,128x768x3072] [--rounds 5]

Each variant is compiled as an explicit ``gemm_config``: with ``--kc``, the host's
default micro-kernel with only the k block changed; with ``--configs``, micro-kernels
of MR rows x NV vectors, the k loop unrolled U times (``MRxNVuU``, ``kKC`` to set
the k block too, ``mMC`` the rows of A per cache block). Then every variant and NumPy's ``a @ b`` are timed in interleaved
rounds (a pause after NumPy's batch: its BLAS threads spin on), medians. Prints
GFLOP/s per variant and its ratio to NumPy (> 1: faster than OpenBLAS). This is how
``gemm_config.KC`` and the AVX2 default were chosen; run it on a new host kind
before changing them.
"""

from __future__ import annotations

import argparse
import os
import re
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


def parse_config(spec: str) -> GemmConfig:
    """``6x2u4`` (MR x NV, unrolled 4 times), ``6x2u4k256`` (and KC 256), ``6x2u4k256m48``
    (and MC 48)."""
    found = re.fullmatch(r"(\d+)x(\d+)u(\d+)(?:k(\d+))?(?:m(\d+))?", spec)
    if not found:
        raise SystemExit(f"--configs: '{spec}' is not MRxNVuU[kKC][mMC] (e.g. 6x2u4, 6x2u4k256m48)")
    mr, nv, unroll, kc, mc = found.groups()
    base = default_config()
    config = GemmConfig(int(mr), int(nv), base.vector_bits, int(kc or base.kc), int(mc or base.mc),
                        int(unroll))
    config.check(host().vector_bits)
    return config


def compare(m: int, k: int, n: int, variants: dict[str, GemmConfig], rounds: int) -> None:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((m, k), np.float32), rng.standard_normal((k, n), np.float32)
    kernels = {}
    for name, config in variants.items():
        mm = wiadsl.jit(SRC, target="cpu", gemm_config=config).mm
        np.testing.assert_allclose(mm(a, b), a @ b, rtol=1e-3, atol=1e-2)
        kernels[name] = mm
    times: dict[str, list[float]] = {name: [] for name in kernels} | {"numpy": []}
    for _ in range(rounds):
        for name, mm in kernels.items():
            times[name].append(_per_call(lambda mm=mm: mm(a, b)))
        times["numpy"].append(_per_call(lambda: a @ b))
        time.sleep(SETTLE)
    flops = 2 * m * k * n
    ref = float(np.median(times["numpy"]))
    cells = [f"{flops / ref / 1e9:.0f}"]
    for name in kernels:
        t = float(np.median(times[name]))
        cells.append(f"{flops / t / 1e9:.0f} ({ref / t:.2f}x)")
    print(f"| {m}x{k}x{n} | " + " | ".join(cells) + " |", flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="512,1024,2048", help="square sizes n (n x n x n)")
    p.add_argument("--shapes", default="", help="MxKxN shapes besides the squares")
    p.add_argument("--kc", default="256,512", help="k blocks to compare")
    p.add_argument("--configs", default="", help="micro-kernels to compare instead: MRxNVuU[kKC][mMC]")
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args(argv)
    base = default_config()
    if args.configs:
        variants = {spec: parse_config(spec) for spec in args.configs.split(",")}
    else:
        variants = {f"kc {kc}": GemmConfig(base.mr, base.nv, base.vector_bits, int(kc), base.mc,
                                           base.unroll) for kc in args.kc.split(",")}
    shapes = [(s, s, s) for s in map(int, filter(None, args.sizes.split(",")))]
    shapes += [tuple(int(v) for v in s.split("x")) for s in filter(None, args.shapes.split(","))]
    from wiadsl.backends.llvm.threads import get_num_threads
    print(f"host {host().cpu}, {get_num_threads()} threads, default config {base.label()}; "
          f"GFLOP/s (ratio to NumPy), medians of {args.rounds} interleaved rounds\n")
    print("| M x K x N | " + " | ".join(["NumPy", *variants]) + " |")
    print("|" + "---|" * (len(variants) + 2))
    for m, k, n in shapes:
        compare(m, k, n, variants, args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
