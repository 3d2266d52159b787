"""Time to a model's first result: wiadsl's ``load_onnx`` + first call against ONNX
Runtime's ``InferenceSession`` + first ``run``, each in a fresh process (issue 21).

    PYTHONPATH=. python benchmarks/first_result.py [--reps N] [--models resnet18,mobilenet_v2]

Every measurement is a new interpreter that imports its library, then times from
just before loading the model file to the first result (imports are printed apart).
wiadsl runs twice per round on one cache folder: first with it empty (``cold``:
every kernel compiled), then again (``warm``: the compile cache's hits); and with
``tiered=True`` on another empty folder (``tiered``: the first call runs on the
interpreter while the compile goes on in the background; the process then waits for
it before exiting, untimed). Rounds are interleaved (ORT, cold, warm, tiered) and the
table shows medians. Every result is compared with ORT's (rtol 1e-3) before anything
is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]  # ``import onnx``: the package
sys.path.insert(0, str(ROOT))

#: name -> (builder call, description)
CASES = {
    "resnet18": ("models.resnet18()", "torchvision ResNet-18, 3x224x224, batch 1"),
    "mobilenet_v2": ("models.mobilenet_v2(3, 64, 10, width=16)",
                     "3x64x64, width 16, 2 inverted residual blocks, batch 1"),
}

CHILD = """
import json, sys, time
t0 = time.perf_counter()
import numpy as np
{imports}
t1 = time.perf_counter()
feeds = {{k: v for k, v in np.load({feeds!r}).items()}}
t2 = time.perf_counter()
{run}
t3 = time.perf_counter()
np.save({out!r}, np.asarray(result))
print(json.dumps({{"import_ms": (t1 - t0) * 1e3, "first_ms": (t3 - t2) * 1e3}}))
"""

SIDES = {
    "ort": ("import onnxruntime as ort",
            "sess = ort.InferenceSession({model!r}, providers=['CPUExecutionProvider'])\n"
            "result = sess.run(None, feeds)[0]"),
    "wiadsl": ("import wiadsl",
               "mod = wiadsl.load_onnx({model!r})\nresult = mod(**feeds)"),
    "tiered": ("import wiadsl",
               "mod = wiadsl.load_onnx({model!r}, tiered=True)\nresult = mod(**feeds)"),
}


def _child(side: str, model: str, feeds: str, out: str, cache: str) -> dict[str, float]:
    imports, run = SIDES[side]
    code = CHILD.format(imports=imports, feeds=feeds, out=out, run=run.format(model=model))
    env = dict(os.environ, WIADSL_CACHE_DIR=cache, PYTHONPATH=str(ROOT))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as an installed package has its bytecode
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=1800)
    if done.returncode:
        raise RuntimeError(f"{side} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def measure(name: str, reps: int, folder: Path) -> dict[str, list[dict[str, float]]]:
    import numpy as np
    import onnx

    from tests.onnx import models  # noqa: F401  (the builder call below)

    built = eval(CASES[name][0])  # noqa: S307 - a literal from CASES
    model, feeds = folder / f"{name}.onnx", folder / f"{name}.npz"
    onnx.save(built.model, model)
    np.savez(feeds, **built.make_inputs(1))
    runs: dict[str, list[dict[str, float]]] = {"ort": [], "cold": [], "warm": [], "tiered": []}
    for rep in range(reps):
        with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as other:
            outs = {k: str(folder / f"{name}.{k}.{rep}.npy") for k in runs}
            runs["ort"].append(_child("ort", str(model), str(feeds), outs["ort"], cache))
            runs["cold"].append(_child("wiadsl", str(model), str(feeds), outs["cold"], cache))
            runs["warm"].append(_child("wiadsl", str(model), str(feeds), outs["warm"], cache))
            runs["tiered"].append(_child("tiered", str(model), str(feeds), outs["tiered"], other))
            want = np.load(outs["ort"])
            for k in ("cold", "warm", "tiered"):
                np.testing.assert_allclose(np.load(outs[k]), want, rtol=1e-3, atol=1e-4)
    return runs


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--models", default=",".join(CASES))
    args = ap.parse_args(argv)
    print("| model | size | ORT session + first run | wiadsl cold: load_onnx + first call | "
          "wiadsl warm | tiered (cold) | cold / ORT | warm / ORT | tiered / ORT | "
          "imports: ORT, wiadsl |\n|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            runs = measure(name, args.reps, Path(tmp))
            med = {k: statistics.median(r["first_ms"] for r in v) for k, v in runs.items()}
            imp = {k: statistics.median(r["import_ms"] for r in v) for k, v in runs.items()}
            print(f"| {name} | {CASES[name][1]} | {med['ort']:.0f} ms | {med['cold']:.0f} ms | "
                  f"{med['warm']:.0f} ms | {med['tiered']:.0f} ms | {med['cold'] / med['ort']:.1f}x | "
                  f"{med['warm'] / med['ort']:.1f}x | {med['tiered'] / med['ort']:.1f}x | "
                  f"{imp['ort']:.0f} ms, {imp['warm']:.0f} ms |")
    print(f"\n{args.reps} rounds (ORT, cold, warm, tiered interleaved), medians; goal (issue 21): "
          "the first result within 3x of ORT on an empty cache")


if __name__ == "__main__":
    main(sys.argv[1:])
