"""Single convolution layers of an imported model (Conv + bias + Relu, frozen weights)
against ONNX Runtime, with and without Winograd's F(2x2, 3x3) and F(4x4, 3x3)
(loops/conv.py's ``winograd_tile``, backends/llvm/conv_winograd.py).

    PYTHONPATH=. python benchmarks/conv_layers.py [--threads 1,2] [--rounds 7] [--layers 64x32x16x1x1,...]

The layers are ResNet-18's 3x3 stride-1 stages (where Winograd applies) and, for
reference, one of its stride-2 layers and a 1x1 downsample (where it does not: both
columns are the same code); ``--layers`` names others, ``CxHxOxKxS`` each (input
channels, plane, output channels, kernel, stride). "direct" is the same import compiled with the rule's
channel minimum raised out of reach (the convolution then runs as it did before:
conv.py's pixel panels or conv_rows.py). All three run in this process on the same
input, in interleaved rounds at each thread count, and their outputs are checked
against ORT (rtol 1e-3) first. The disk cache is off: the rule is not part of its key.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]  # ``import onnx``
sys.path.insert(0, str(HERE.parent))
os.environ["WIADSL_CACHE"] = "0"

import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import wiadsl  # noqa: E402
from wiadsl.cache import entries as cache  # noqa: E402
from wiadsl.loops import conv  # noqa: E402

#: (input channels, plane, output channels, kernel, stride)
LAYERS = [(64, 56, 64, 3, 1), (128, 28, 128, 3, 1), (256, 14, 256, 3, 1), (512, 7, 512, 3, 1),
          (128, 28, 256, 3, 2), (256, 14, 512, 1, 2)]


def layer_model(c: int, h: int, o: int, k: int, s: int) -> onnx.ModelProto:
    rng = np.random.default_rng(c + h + o + k + s)
    w = (rng.standard_normal((o, c, k, k)) * 0.05).astype(np.float32)
    b = rng.standard_normal(o).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "W", "B"], ["c"], pads=[k // 2] * 4, strides=[s, s]),
         helper.make_node("Relu", ["c"], ["y"])],
        "layer", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, h, h])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "B")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def compiled(model: onnx.ModelProto, x: np.ndarray, winograd: bool):  # type: ignore[no-untyped-def]
    """The imported layer, compiled (its first call) with or without the rule."""
    saved = conv.WINO_CHANNELS
    conv.WINO_CHANNELS = saved if winograd else 1 << 30
    cache.clear_memory()
    try:
        mod = wiadsl.load_onnx(model.SerializeToString())
        mod(x=x)
        return mod
    finally:
        conv.WINO_CHANNELS = saved


def timed(fn, seconds: float) -> float:  # type: ignore[no-untyped-def]
    start, n = time.perf_counter(), 0
    while True:
        fn()
        n += 1
        if time.perf_counter() - start >= seconds:
            return (time.perf_counter() - start) / n


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--layers", default="", help="CxHxOxKxS layers instead of ResNet-18's")
    args = p.parse_args(argv)
    layers = [tuple(int(v) for v in spec.split("x")) for spec in args.layers.split(",") if spec] or LAYERS
    print("| layer (C, plane, O, kernel, stride) | threads | direct | winograd | onnxruntime "
          "| direct / winograd | ort / winograd |")
    print("|---|---|---|---|---|---|---|")
    for layer in layers:
        model = layer_model(*layer)
        x = np.random.default_rng(1).standard_normal((1, layer[0], layer[1], layer[1])).astype(np.float32)
        ours = {"direct": compiled(model, x, False), "winograd": compiled(model, x, True)}
        for threads in (int(t) for t in args.threads.split(",")):
            wiadsl.set_num_threads(threads)
            opts = ort.SessionOptions()
            opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
            sess = ort.InferenceSession(model.SerializeToString(), opts,
                                        providers=["CPUExecutionProvider"])
            want = sess.run(None, {"x": x})[0]
            runs = {name: (lambda m=m, x=x: m(x=x)) for name, m in ours.items()}
            runs["ort"] = lambda s=sess, x=x: s.run(None, {"x": x})
            for name, mod in ours.items():
                got = np.asarray(mod(x=x))
                np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3, err_msg=name)
            times: dict[str, list[float]] = {name: [] for name in runs}
            for _ in range(args.rounds):
                for name, fn in runs.items():
                    time.sleep(0.05)  # the other side's spinning threads go idle
                    fn()
                    times[name].append(timed(fn, 0.2))
            d, w, r = (statistics.median(times[k]) * 1e3 for k in ("direct", "winograd", "ort"))
            print(f"| {', '.join(map(str, layer))} | {threads} | {d:.3f} ms | {w:.3f} ms | "
                  f"{r:.3f} ms | {d / w:.2f}x | {r / w:.2f}x |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
