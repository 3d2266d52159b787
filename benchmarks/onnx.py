"""Imported ONNX models on target="cpu" against ONNX Runtime's CPU provider.

    PYTHONPATH=. python benchmarks/onnx.py [--quick] [--threads N] [--models mlp,encoder]

Both sides run in this process on the same inputs, with the same thread count
(``SessionOptions.intra_op_num_threads`` = the CPU backend's ``THREADS`` unless
``--threads`` is given; ``inter_op_num_threads`` = 1, sequential execution).
Each side is warmed up, then timed in interleaved rounds (so machine load hits
both alike); the table shows medians and the ratio ORT time / wiadsl time
(> 1: wiadsl is faster). Outputs are checked against ORT before timing.
The models are the ones of the tests (``tests/onnx/models.py``) at larger sizes.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# Run as a script, this file's folder comes first on sys.path, and this file is
# named like the ``onnx`` package: drop the folder so ``import onnx`` finds the package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(ROOT))

from tests.onnx import models  # noqa: E402
from wiadsl.frontend.onnx_import import load_onnx  # noqa: E402

#: name -> (builder, batch, description); sizes of small real models.
CASES = {
    "mlp": (lambda: models.mlp(784, 512, 10), 64, "784-512-512-10, batch 64"),
    "encoder": (lambda: models.encoder(seq=128, d=256, heads=4, ff=1024), 1,
                "seq 128, d 256, 4 heads, ff 1024, batch 1"),
    "cnn": (lambda: models.cnn(3, 32, 10), 8, "3x32x32, conv 8/16, batch 8"),
    "mobilenet_v2": (lambda: models.mobilenet_v2(3, 64, 10, width=16), 4,
                     "3x64x64, width 16, 2 inverted residual blocks, batch 4"),
    "qdq_matmul": (lambda: models.qdq_matmul(512, 512), 64, "512x512 int8 QDQ, batch 64"),
}
QUICK = {
    "mlp": (lambda: models.mlp(64, 128, 10), 8, "64-128-128-10, batch 8"),
    "encoder": (lambda: models.encoder(), 1, "seq 8, d 32, batch 1"),
    "cnn": (lambda: models.cnn(), 2, "3x16x16, batch 2"),
    "mobilenet_v2": (lambda: models.mobilenet_v2(), 2, "3x16x16, width 8, batch 2"),
    "qdq_matmul": (lambda: models.qdq_matmul(), 8, "32x16, batch 8"),
}


def _threads() -> int:
    try:
        from wiadsl.backends.llvm.parallel import THREADS
    except ImportError:  # a CPU backend without native threads runs on one
        return 1
    return int(THREADS)


def _time(fn, seconds: float) -> float:
    start, n = time.perf_counter(), 0
    while True:
        fn()
        n += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return elapsed / n


def bench(name: str, case, threads: int, rounds: int, seconds: float) -> list[str]:
    import onnxruntime as ort

    build, batch, what = case
    built = build()
    feeds = built.make_inputs(batch)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(built.model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    start = time.perf_counter()
    mod = load_onnx(built.model, target="cpu")
    ours = mod(**feeds)
    compile_s = time.perf_counter() - start
    theirs = sess.run(None, feeds)[0]
    err = float(np.max(np.abs(np.asarray(ours) - theirs)))
    run_ours, run_ort = (lambda: mod(**feeds)), (lambda: sess.run(None, feeds))
    for _ in range(3):
        run_ours(), run_ort()
    t_ours, t_ort = [], []
    for _ in range(rounds):
        t_ours.append(_time(run_ours, seconds))
        t_ort.append(_time(run_ort, seconds))
    a, b = statistics.median(t_ours), statistics.median(t_ort)
    return [name, what, _fmt(a), _fmt(b), f"{b / a:.2f}x", f"{err:.1e}", f"{compile_s:.1f} s"]


def _fmt(seconds: float) -> str:
    return f"{seconds * 1e6:.0f} us" if seconds < 1e-3 else f"{seconds * 1e3:.2f} ms"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small models, short timing")
    p.add_argument("--threads", type=int, default=None, help="threads for both sides")
    p.add_argument("--models", default=None, help="comma-separated subset of " + ", ".join(CASES))
    args = p.parse_args(argv)
    cases = QUICK if args.quick else CASES
    names = args.models.split(",") if args.models else list(cases)
    threads = args.threads or _threads()
    rounds, seconds = (3, 0.1) if args.quick else (7, 0.3)
    print(f"threads: {threads} (wiadsl CPU backend and ORT intra-op)\n")
    header = ["model", "size", "wiadsl cpu", "onnxruntime", "ratio (ort/ours)", "max |diff|",
              "compile"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for name in names:
        if name not in cases:
            p.error(f"unknown model '{name}'; models: {', '.join(cases)}")
        try:
            row = bench(name, cases[name], threads, rounds, seconds)
        except Exception as exc:  # report and go on: one broken model hides no others
            row = [name, cases[name][2], f"error: {type(exc).__name__}: {exc}"[:120],
                   "", "", "", ""]
        print("| " + " | ".join(row) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
