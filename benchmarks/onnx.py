"""Imported ONNX models on target="cpu" against ONNX Runtime's CPU provider.

    PYTHONPATH=. python benchmarks/onnx.py [--quick] [--threads 1,2] [--models mlp,encoder]

Both sides run in this process on the same inputs, with the same thread count, for
each count of ``--threads`` (default: 1 and the CPU backend's ``THREADS``):
``wiadsl.set_num_threads`` on ours, ``SessionOptions.intra_op_num_threads`` on
ORT's (``inter_op_num_threads`` = 1, sequential execution). One compile of ours
serves every count.
Each side is warmed up, then timed in interleaved rounds (so machine load hits
both alike); the table shows medians and the ratio ORT time / wiadsl time
(> 1: wiadsl is faster). Outputs are checked against ORT before timing.
The models are the ones of the tests (``tests/onnx/models.py``) at larger sizes, and
the ``*_export`` rows the graphs torch.onnx wrote (``tests/onnx/exports``).
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

import wiadsl  # noqa: E402
from benchmarks.core_latency import round_trip_ns  # noqa: E402
from tests.onnx import models  # noqa: E402
from wiadsl.onnx.importer import load_onnx  # noqa: E402


class Exported:
    """A fixture of tests/onnx/exports (what torch.onnx wrote) as a benchmark model."""

    def __init__(self, file: str, seq: int = 16):
        import onnx

        from tests.onnx.test_exports import feeds_for, model_bytes
        self.model = onnx.load_from_string(model_bytes(file))
        self.file, self.seq, self._feeds = file, seq, feeds_for

    def make_inputs(self, batch: int) -> dict[str, np.ndarray]:
        return self._feeds(self.file, batch, self.seq)


#: name -> (builder, batch, description); sizes of small real models.
CASES = {
    "mlp": (lambda: models.mlp(784, 512, 10), 64, "784-512-512-10, batch 64"),
    "encoder": (lambda: models.encoder(seq=128, d=256, heads=4, ff=1024), 1,
                "seq 128, d 256, 4 heads, ff 1024, batch 1"),
    "cnn": (lambda: models.cnn(3, 32, 10), 8, "3x32x32, conv 8/16, batch 8"),
    "mobilenet_v2": (lambda: models.mobilenet_v2(3, 64, 10, width=16), 4,
                     "3x64x64, width 16, 2 inverted residual blocks, batch 4"),
    "qdq_matmul": (lambda: models.qdq_matmul(512, 512), 64, "512x512 int8 QDQ, batch 64"),
    "resnet18": (lambda: models.resnet18(), 1,
                 "torchvision ResNet-18 (its graph, random weights), 3x224x224, batch 1"),
    "resnet18_export": (lambda: Exported("resnet18_torchscript.onnx.gz"), 1,
                        "torchvision ResNet-18 at 1/8 width, 3x64x64, torch.onnx, batch 1"),
    "mobilenet_v2_export": (lambda: Exported("mobilenet_v2_torchscript.onnx.gz"), 1,
                            "torchvision MobileNetV2 x0.25, 3x64x64, torch.onnx, batch 1"),
    "bert_export": (lambda: Exported("bert_torchscript.onnx.gz"), 1,
                    "transformers BERT, 2 layers, hidden 128, seq 16, torch.onnx, batch 1"),
    "gpt2_export": (lambda: Exported("gpt2_dynamo.onnx.gz"), 1,
                    "transformers GPT-2, 2 layers, hidden 128, seq 16, torch.onnx dynamo, batch 1"),
}
QUICK = {
    "mlp": (lambda: models.mlp(64, 128, 10), 8, "64-128-128-10, batch 8"),
    "encoder": (lambda: models.encoder(), 1, "seq 8, d 32, batch 1"),
    "cnn": (lambda: models.cnn(), 2, "3x16x16, batch 2"),
    "mobilenet_v2": (lambda: models.mobilenet_v2(), 2, "3x16x16, width 8, batch 2"),
    "qdq_matmul": (lambda: models.qdq_matmul(), 8, "32x16, batch 8"),
}


def _default_threads() -> list[int]:
    from wiadsl.backends.llvm.threads import THREADS
    return sorted({1, THREADS})


#: Seconds both sides rest before each timed batch (``--settle``): the other side's
#: worker threads keep spinning after its last call (ORT's intra-op pool, ours) and
#: would take a core from the batch that follows; cpu.py pauses after OpenBLAS alike.
SETTLE = 0.1


def _time(fn, seconds: float) -> float:
    time.sleep(SETTLE)
    start, n = time.perf_counter(), 0
    while True:
        fn()
        n += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return elapsed / n


def _session(model, threads: int):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def bench(name: str, case, counts: list[int], rounds: int, seconds: float) -> list[list[str]]:
    """One row per thread count: medians of interleaved rounds, both sides at that count."""
    build, batch, what = case
    built = build()
    feeds = built.make_inputs(batch)
    start = time.perf_counter()
    mod = load_onnx(built.model, target="cpu")
    mod(**feeds)  # the first call compiles
    compile_s = time.perf_counter() - start
    rows = []
    for threads in counts:
        wiadsl.set_num_threads(threads)
        sess = _session(built.model, threads)
        theirs = sess.run(None, feeds)[0]
        err = float(np.max(np.abs(np.asarray(mod(**feeds)) - theirs)))
        run_ours, run_ort = (lambda: mod(**feeds)), (lambda s=sess: s.run(None, feeds))
        for _ in range(3):
            run_ours(), run_ort()
        t_ours, t_ort = [], []
        trips = [round_trip_ns(0.25)] if threads > 1 else []
        for _ in range(rounds):
            t_ours.append(_time(run_ours, seconds))
            t_ort.append(_time(run_ort, seconds))
        trips += [round_trip_ns(0.25)] if threads > 1 else []
        a, b = statistics.median(t_ours), statistics.median(t_ort)
        trip = "-" if None in trips or not trips else " / ".join(f"{t:.0f}" for t in trips)
        rows.append([name, what, str(threads), _fmt(a), _fmt(b), f"{b / a:.2f}x", f"{err:.1e}",
                     f"{compile_s:.1f} s", trip])
    return rows


def _fmt(seconds: float) -> str:
    return f"{seconds * 1e6:.0f} us" if seconds < 1e-3 else f"{seconds * 1e3:.2f} ms"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small models, short timing")
    p.add_argument("--threads", default=None, help="comma-separated thread counts for both sides")
    p.add_argument("--models", default=None, help="comma-separated subset of " + ", ".join(CASES))
    p.add_argument("--settle", type=float, default=SETTLE,
                   help=f"seconds of rest before each timed batch (default {SETTLE})")
    args = p.parse_args(argv)
    globals()["SETTLE"] = args.settle
    cases = QUICK if args.quick else CASES
    names = args.models.split(",") if args.models else list(cases)
    counts = [int(t) for t in args.threads.split(",")] if args.threads else _default_threads()
    rounds, seconds = (3, 0.1) if args.quick else (7, 0.3)
    print(f"threads: {', '.join(map(str, counts))} (wiadsl.set_num_threads and ORT intra-op)\n")
    header = ["model", "size", "threads", "wiadsl cpu", "onnxruntime", "ratio (ort/ours)",
              "max |diff|", "compile", "core round trip ns (before / after)"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for name in names:
        if name not in cases:
            p.error(f"unknown model '{name}'; models: {', '.join(cases)}")
        try:
            rows = bench(name, cases[name], counts, rounds, seconds)
        except Exception as exc:  # report and go on: one broken model hides no others
            rows = [[name, cases[name][2], f"error: {type(exc).__name__}: {exc}"[:120],
                     "", "", "", "", "", ""]]
        for row in rows:
            print("| " + " | ".join(row) + " |", flush=True)
    print("\nCore round trip: a cache line between CPUs 0 and 1 and back (core_latency.py), "
          "before and after a model's rounds at two or more threads; ~3x the lowest one "
          "means the two vCPUs sit in different core complexes and the two-thread rows "
          "of both sides read slower.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
