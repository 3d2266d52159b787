"""The command line of the fuzzer: ``wiac fuzz`` / ``python -m wiadsl.fuzz``.

``main(argv) -> int`` parses ``--seed S --count N [--targets ..] [--out DIR]
[--budget SECONDS] [--jobs J] [--no-reduce] [--malformed N]`` and returns the exit status:
0 when no program mismatched or crashed, 1 otherwise (the summary on stdout),
2 on a malformed command line (argparse's convention).
"""

from __future__ import annotations

import argparse
import sys

from .differential import ALL_TARGETS
from .driver import DEFAULT_TARGETS, run_fuzz


def build_parser(prog: str = "wiac fuzz") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="Differential fuzzing: random "
                                "well-typed programs through the interpreter (the oracle), "
                                "the pipeline pass by pass, and every backend.")
    p.add_argument("--seed", type=int, default=0, help="run seed (default 0)")
    p.add_argument("--count", type=int, default=100, help="programs to generate (default 100)")
    p.add_argument("--targets", default=",".join(DEFAULT_TARGETS),
                   help=f"comma-separated, from {','.join(ALL_TARGETS)}")
    p.add_argument("--every", action="append", default=[], metavar="TARGET=K",
                   help="run TARGET on every K-th program only (repeatable)")
    p.add_argument("--out", default="fuzz-out", help="where reproducers and the report go")
    p.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                   help="stop starting programs after this long")
    p.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    p.add_argument("--no-reduce", action="store_true", help="do not reduce failures")
    p.add_argument("--malformed", type=int, default=0, metavar="N",
                   help="also run N malformed sources and N malformed calls")
    return p


def main(argv: list[str] | None = None, prog: str = "wiac fuzz") -> int:
    args = build_parser(prog).parse_args(argv)
    targets = tuple(t.strip() for t in args.targets.split(",") if t.strip())
    every = {}
    for item in args.every:
        name, _, k = item.partition("=")
        if not k.isdigit():
            build_parser(prog).error(f"--every wants TARGET=K, got {item!r}")
        every[name] = int(k)
    report = run_fuzz(args.seed, args.count, targets, args.out, budget_s=args.budget,
                      every=every, jobs=args.jobs, reduce=not args.no_reduce,
                      log=lambda m: print(m, file=sys.stderr, flush=True))
    print(report.summary())
    status = 0 if report.ok else 1
    if args.malformed:
        from .malformed import run_malformed

        bad = run_malformed(args.seed, args.malformed)
        print(bad.summary())
        status = status or (0 if bad.ok else 1)
    return status
