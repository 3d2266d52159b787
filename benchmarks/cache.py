"""Compile cache benchmark: cold compile vs warm-process hit vs in-process hit.

Usage:
    PYTHONPATH=. python benchmarks/cache.py [--reps N] [EXAMPLE.wia ...]

For every kernel of every example (symbolic dims = 7, inputs as ``wiac check``
makes them), each repetition uses a fresh, empty cache folder and runs:
- a cold process: the first call compiles (tensor passes, lowering, LLVM);
- a warm process on the same folder: the first call loads the object code;
- in that warm process, a second ``wiadsl.jit`` of the same source: a memory hit.
Reported: the kernel's ``compile_ms`` (the cache lookup + compile or load, as
the backend measures it), medians over the repetitions, and cold / warm.
The frontend (parse + check, the same in every case) is reported apart.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def child(path: str) -> None:
    """Run every kernel of ``path`` once; print what its first call cost."""
    import wiadsl
    from wiadsl.runtime import cache_key
    from wiadsl.runtime.cache import STATS

    # One compiler version for both processes: other engineers edit this live tree
    # meanwhile, and a changed source file would (rightly) change every key.
    pinned = os.environ["WIADSL_BENCH_VERSION"]
    cache_key.compiler_version = lambda: pinned  # type: ignore[assignment]
    from wiadsl.tools.check import kernel_inputs

    text = Path(path).read_text()
    t0 = time.perf_counter()
    module = wiadsl.jit(text, filename=path, target="cpu")
    frontend_ms = (time.perf_counter() - t0) * 1e3
    out = {}
    for name, fn in module.kernels.items():
        _, _, inputs = kernel_inputs(fn.signature, {}, seed=0)
        args = [inputs[p.name] for p in fn.signature.inputs]
        try:
            fn(*args)
        except wiadsl.WiaError as exc:  # a runtime check on random data: still compiled
            if "compile_ms" not in fn.stats:
                out[name] = {"error": str(exc).splitlines()[0]}
                continue
        again = wiadsl.jit(text, kernel=name, filename=path, target="cpu")
        try:
            again(*args)
        except wiadsl.WiaError:
            pass
        out[name] = {"ms": fn.stats["compile_ms"], "source": fn.stats["cache"],
                     "mem_ms": again.stats["compile_ms"], "mem_source": again.stats["cache"]}
    print(json.dumps({"frontend_ms": frontend_ms, "kernels": out, "stats": STATS.as_dict()}))


def run(path: Path, folder: str) -> dict:
    from wiadsl.runtime.cache_key import compiler_version

    env = dict(os.environ, WIADSL_CACHE_DIR=folder, PYTHONPATH=str(ROOT),
               WIADSL_BENCH_VERSION=compiler_version())
    proc = subprocess.run([sys.executable, __file__, "--child", str(path)], env=env,
                          capture_output=True, text=True, timeout=900)
    if proc.returncode:
        raise RuntimeError(proc.stderr[-2000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str]) -> None:
    reps = int(argv[argv.index("--reps") + 1]) if "--reps" in argv else 3
    names = [a for a in argv if a.endswith(".wia")]
    paths = [Path(p) for p in names] or sorted((ROOT / "examples").glob("*.wia"))
    rows: dict[str, dict[str, list[float]]] = {}
    for path in paths:
        for _ in range(reps):
            with tempfile.TemporaryDirectory() as folder:
                cold, warm = run(path, folder), run(path, folder)
            assert warm["stats"]["compiles"] == 0, f"{path.name}: the warm process compiled"
            for name, c in cold["kernels"].items():
                w = warm["kernels"].get(name, {})
                if "error" in c or w.get("source") != "disk":
                    continue
                row = rows.setdefault(f"{path.stem}.{name}", {k: [] for k in
                                                              ("cold", "warm", "mem", "fe")})
                row["cold"].append(c["ms"])
                row["warm"].append(w["ms"])
                row["mem"].append(w["mem_ms"])
                row["fe"].append(warm["frontend_ms"])
    print("| kernel | cold compile ms | warm-process hit ms | in-process hit ms | cold / warm | "
          "frontend ms (both) |\n|---|---|---|---|---|---|")
    ratios = []
    for name, r in rows.items():
        med = {k: float(np.median(v)) for k, v in r.items()}
        ratios.append(med["cold"] / med["warm"])
        print(f"| {name} | {med['cold']:.1f} | {med['warm']:.2f} | {med['mem']:.3f} | "
              f"{ratios[-1]:.0f}x | {med['fe']:.1f} |")
    print(f"\n{len(rows)} kernels, {reps} repetitions; cold / warm: median "
          f"{np.median(ratios):.0f}x, min {min(ratios):.0f}x (goal: at least 20x)")


if __name__ == "__main__":
    if "--child" in sys.argv:
        child(sys.argv[sys.argv.index("--child") + 1])
    else:
        main(sys.argv[1:])
