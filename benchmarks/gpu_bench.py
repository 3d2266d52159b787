"""GPU benchmark: our PTX vs CuPy/cuBLAS on matmul 4096^2 (f32, f16) and a fused elementwise chain.

usage: PYTHONPATH=. python benchmarks/gpu_bench.py [--n 4096] [--elems 16777216] [--reps 10]
Prints TFLOP/s (matmul), GB/s (chain) and our/CuPy ratios. Needs cuda-python; CuPy optional.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from wiadsl.backends.ptx.cuda import CudaDevice, device_arch, driver  # noqa: E402
from wiadsl.backends.ptx.emit import emit_ptx  # noqa: E402
from wiadsl.backends.ptx.executor import to_device  # noqa: E402
from wiadsl.backends.ptx.isa import DEVICE_NUMPY, MIN_VERSION  # noqa: E402
from wiadsl.backends.ptx.symbolic import evaluate  # noqa: E402
from wiadsl.dtypes import DTYPE_NAMES  # noqa: E402
from wiadsl.frontend.compile import compile_to_ir  # noqa: E402

MATMUL = "kernel k(input a: {t}[M, K], input b: {t}[K, N], output y: {t}[M, N]) {{ y = a @ b; }}"
CHAIN = "kernel k(input a: f32[N], input b: f32[N], input c: f32[N], output y: f32[N]) { y = relu(a * b + c); }"


def time_plan(src: str, inputs: dict[str, np.ndarray], reps: int,
              check=None) -> float:
    """Seconds per run of the plan's launches (inputs uploaded once, buffers reused).

    ``check(kinds, result)``: called once with the plan's kernel kinds and the first
    output (downloaded after the warm-up run), to validate the path and the numbers."""
    arch = device_arch()
    arch = arch if arch in MIN_VERSION else "sm_90"
    shapes = {k: v.shape for k, v in inputs.items()}
    text, plan = emit_ptx(compile_to_ir(src, "<bench>"), "k", arch, shapes)
    dev = CudaDevice(text)
    bufs = {k: dev.upload(to_device(v, DTYPE_NAMES[str(plan_input(plan, k)["dtype"])]))
            for k, v in inputs.items()}
    steps = plan["blocks"][0]["steps"]
    for s in steps:
        if s["op"] == "alloc":
            size = evaluate(s["size"], {})
            bufs[s["buffer"]] = dev.alloc(size * 4)
    launches = [s for s in steps if s["op"] == "launch"]

    def run() -> None:
        for s in launches:
            args = [bufs[a["buffer"]] if "buffer" in a else
                    (np.uint32 if a["type"] == "u32" else np.int32)(evaluate(a["expr"], {}))
                    for a in s["args"]]
            dev.launch(s["kernel"], tuple(int(evaluate(g, {})) for g in s["grid"]),
                       tuple(s["block"]), args, 0)
    run()
    dev.synchronize()
    if check is not None:
        out = next(s for s in steps if s["op"] == "return")["values"][0]
        alloc = next(s for s in steps if s["op"] == "alloc" and s["buffer"] == out["buffer"])
        dt = np.dtype(DEVICE_NUMPY[DTYPE_NAMES[alloc["dtype"]]])
        shape = tuple(int(evaluate(d, {})) for d in alloc["shape"])
        data = dev.download(bufs[out["buffer"]], dt, int(np.prod(shape))).reshape(shape)
        check([k["kind"] for k in plan["kernels"]], data)
    t0 = time.perf_counter()
    for _ in range(reps):
        run()
    dev.synchronize()
    return (time.perf_counter() - t0) / reps


def plan_input(plan: dict, name: str) -> dict:
    return next(i for i in plan["inputs"] if i["name"] == name)


def time_cupy(fn, reps: int) -> float | None:
    try:
        import cupy
    except ImportError:
        return None
    fn()
    cupy.cuda.Device().synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    cupy.cuda.Device().synchronize()
    return (time.perf_counter() - t0) / reps


def _check_matmul(kinds: list[str], y: np.ndarray, a: np.ndarray, b: np.ndarray, t: str) -> None:
    """The f16 run must take the tensor-core path; spot-check 64 rows against NumPy."""
    rows = np.arange(0, a.shape[0], max(1, a.shape[0] // 64))
    want = a[rows].astype(np.float32) @ b.astype(np.float32)
    err = float(np.max(np.abs(y[rows].astype(np.float32) - want) / (1 + np.abs(want))))
    print(f"matmul {t}: kernels {kinds}; max rel err on {len(rows)} rows {err:.2e}", flush=True)
    if t == "f16" and kinds != ["matmul(mma)"]:
        raise SystemExit(f"f16 matmul did not use mma.sync: {kinds}")
    if err > (2e-2 if t == "f16" else 1e-3):
        raise SystemExit(f"matmul {t} result is wrong (max rel err {err:.2e})")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--elems", type=int, default=1 << 24)
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args()
    driver()
    rng = np.random.default_rng(0)
    n = args.n
    try:
        import cupy
    except ImportError:
        cupy = None
        print("CuPy not installed: no cuBLAS comparison")
    for t, npt in (("f32", np.float32), ("f16", np.float16)):
        a = rng.standard_normal((n, n)).astype(npt)
        b = rng.standard_normal((n, n)).astype(npt)
        ours = time_plan(MATMUL.format(t=t), {"a": a, "b": b}, args.reps,
                         check=lambda kinds, y, a=a, b=b, t=t: _check_matmul(kinds, y, a, b, t))
        flops = 2 * n ** 3
        line = f"matmul {t} {n}^2: ours {flops / ours / 1e12:.2f} TFLOP/s ({ours * 1e3:.2f} ms)"
        if cupy is not None:
            ga, gb = cupy.asarray(a), cupy.asarray(b)
            ref = time_cupy(lambda ga=ga, gb=gb: ga @ gb, args.reps)
            line += f"; cuBLAS {flops / ref / 1e12:.2f} TFLOP/s; ratio ours/cuBLAS {ref / ours:.2f}"
        print(line, flush=True)
    m = args.elems
    x = [rng.standard_normal(m).astype(np.float32) for _ in range(3)]
    ours = time_plan(CHAIN, {"a": x[0], "b": x[1], "c": x[2]}, args.reps)
    nbytes = 16 * m
    line = f"relu(a*b+c) {m} f32: ours {nbytes / ours / 1e9:.1f} GB/s ({ours * 1e3:.3f} ms)"
    if cupy is not None:
        ga, gb, gc = (cupy.asarray(v) for v in x)
        ref = time_cupy(lambda: cupy.maximum(ga * gb + gc, 0), args.reps)
        fused = cupy.ElementwiseKernel("float32 a, float32 b, float32 c", "float32 y",
                                       "y = fmaxf(a * b + c, 0.f)", "chain")
        out = cupy.empty_like(ga)
        reff = time_cupy(lambda: fused(ga, gb, gc, out), args.reps)
        line += (f"; CuPy (3 ops) {nbytes / ref / 1e9:.1f} GB/s, CuPy fused {nbytes / reff / 1e9:.1f} GB/s;"
                 f" ratio ours/fused {reff / ours:.2f}")
    print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
