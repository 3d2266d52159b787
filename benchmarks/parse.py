"""Frontend benchmark: parse + check (what ``wiac FILE --emit ast`` does) vs program size.

Usage:
    PYTHONPATH=. python benchmarks/parse.py [--quick] [--markdown]

Generates programs of 1k, 4k, 16k, 64k and 100k lines (``--quick``: up to 16k),
half one kernel with many statements, half many small funcs and kernels calling
them, and times ``check(load_program(text))`` on each: the median of several runs
for the small ones, one run for the large ones. Times are process CPU time
(``time.process_time``), which a shared machine's other work disturbs far less
than wall time. Prints lines, seconds, µs per line, and the linearity: µs per
line of the largest program over that of the smallest (1.0 is perfectly linear;
the quadratic frontend of issue 17 gave ~30 from 2k to 16k lines). The load
average is printed too: on a loaded machine even CPU time grows with it.
"""

from __future__ import annotations

import gc
import os
import pathlib
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from wiadsl.frontend.loader import load_program  # noqa: E402
from wiadsl.frontend.typecheck import check  # noqa: E402

QUICK = "--quick" in sys.argv
MARKDOWN = "--markdown" in sys.argv
SIZES = [1_000, 4_000, 16_000] if QUICK else [1_000, 4_000, 16_000, 64_000, 100_000]

_BIG_HEAD = """\
kernel big(input x: f32[N], input w: f32[N], input s: f32, output y: f32[N]) {
    h = x * w + 1.0;
"""
_BIG_LINES = [
    "    h = h * 0.5 + x - w / 2.0;",
    "    g = relu(h) * s + reduce_sum(x) / 4.0;",
    "    h = where(g > 0.0, g, h) - abs(w);",
    "    for i in range(3) { h = h + cast(i, f32); }",
]
_SMALL = """\
func helper{i}(a, b) {{
    c = a * b + a;
    return c - b;
}}
kernel k{i}(input a: f32[M, K], input b: f32[K], output c: f32[M, K]) {{
    t = helper{i}(a, b) + a;
    c = t * 2.0;
}}
"""


def program(lines: int) -> str:
    """A program of ``lines`` lines (within a few)."""
    out = [_BIG_HEAD]
    body = lines // 2 - 4
    out += [_BIG_LINES[i % len(_BIG_LINES)] + "\n" for i in range(body)]
    out.append("    y = h;\n}\n")
    per_small = _SMALL.count("\n")
    out += [_SMALL.format(i=i) for i in range((lines - lines // 2) // per_small)]
    return "".join(out)


def seconds(text: str, runs: int) -> float:
    """Median process time of parse + check over ``runs`` runs."""
    times = []
    for _ in range(runs):
        gc.collect()
        start = time.process_time()
        check(load_program(text, "bench.wia"))
        times.append(time.process_time() - start)
    return statistics.median(times)


def main() -> None:
    check(load_program(program(40), "warmup.wia"))  # builds the parser, imports everything
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"parse + check, process time; {os.cpu_count()} cores, load average at start {load}")
    if MARKDOWN:
        print("\n| lines | CPU seconds | µs/line |\n|---|---|---|")
    else:
        print(f"{'lines':>8s} {'CPU s':>9s} {'µs/line':>9s}")
    per_line = []
    for size in SIZES:
        text = program(size)
        n = text.count("\n")
        t = seconds(text, 5 if size <= 4_000 else 3 if size <= 16_000 else 1)
        per_line.append(t / n * 1e6)
        if MARKDOWN:
            print(f"| {n} | {t:.2f} | {per_line[-1]:.0f} |", flush=True)
        else:
            print(f"{n:8d} {t:9.2f} {per_line[-1]:9.0f}", flush=True)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\nlinearity (µs/line at {SIZES[-1]} / at {SIZES[0]} lines): "
          f"{per_line[-1] / per_line[0]:.2f}; load average at end {load}")


if __name__ == "__main__":
    main()
