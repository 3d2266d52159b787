"""``wiac``: the WIA DSL compiler's command line.

Three commands share the program name:

    wiac [OPTIONS] FILE            compile FILE and print or write one stage (--emit, -o)
    wiac [OPTIONS] FILE --run      run a kernel of FILE on .npy inputs
    wiac check [OPTIONS] FILE      run every kernel on every backend and compare
    wiac fuzz --seed S --count N   differential fuzzing of random well-typed programs
    wiac cache info|clear|prune|why K   the compile cache: contents, clearing, size, why K recompiled
    wiac --repl  (or no argument)  the interactive session

Exit statuses are documented in ``errors.py`` (0 ok, 1 user error, 2 bad command
line, 3 internal compiler error). Invariant: every path through ``main`` returns
one of them; nothing raises out of it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from .. import __version__
from ..diagnostics import WiaUsageError
from ..runtime.backend import TARGETS
from .emit import EMITTERS, EXTENSIONS, TARGET_EMITS, Artifact, CompileJob
from .errors import EXIT_OK, EXIT_USAGE, guarded
from .pipeline import PM_OPTIONS, OptOptions
from .source import CommandLineError, parse_defines, parse_inputs, read_source

COMPILE_TARGETS = sorted({*TARGETS, *TARGET_EMITS})

EXAMPLES = """\
examples:
  wiac examples/matmul.wia                     print the IR as lowered (--emit ir)
  wiac examples/matmul.wia -O3                 the optimized IR (any -O/-p/pass option
                                               makes --emit opt-ir the default)
  wiac examples/cnn.wia --emit opt-ir -O3 --time-passes
  wiac examples/mlp.wia -p 'inline,canonicalize,cse,dce' --print-ir-after-all
  wiac examples/matmul.wia -o matmul.ptx       PTX, and the launch plan in matmul.ptx.json
  wiac examples/matmul.wia -D M=256 -D K=256 -D N=256 -o matmul.sasm
  wiac examples/matmul.wia --run --input A=a.npy --input B=b.npy -o c.npz
  cat k.wia | wiac - --emit ast                '-' reads stdin (and -o - writes stdout)
  wiac check examples/mlp.wia -D B=5 --bisect  every backend against the interpreter
  wiac fuzz --seed 1 --count 200               random programs: every backend vs the interpreter
  wiac examples/cnn.wia --run --profile --plot roofline.png   where the time goes
  wiac examples/matmul.wia -D M=512 -D K=512 -D N=512 --autotune
  wiac cache why matmul                        which part of the key changed
  wiac --repl                                  the interactive session (also: python -m wiadsl)

-o OUT picks the output from its extension: .ir (optimized IR), .ll (LLVM IR),
.s (host assembly), .o (object), .ptx (PTX), .sasm (systolic assembly), .wia
(canonical source); any other extension needs --emit.

exit status: 0 success, 1 error in the program or its inputs (diagnostic on stderr),
2 malformed command line, 3 internal compiler error (set WIADSL_DEBUG=1 for the traceback).
"""


class UsageArgumentParser(argparse.ArgumentParser):
    """argparse, but usage errors exit with status 2 through our own message format."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def build_arg_parser() -> argparse.ArgumentParser:
    p = UsageArgumentParser(
        prog="wiac", formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EXAMPLES,
        usage="wiac [options] FILE\n       wiac check [options] FILE\n"
              "       wiac fuzz [options]\n       wiac cache info|clear|prune [SIZE]|why KERNEL\n"
              "       wiac --repl",
        description="Compile WIA DSL kernels: print any stage of the pipeline, write "
        "PTX, systolic assembly, LLVM IR or objects, run a kernel on .npy files, or "
        "start the interactive session.")
    p.add_argument("file", nargs="?", metavar="FILE", help="a .wia source file ('-': stdin)")
    out = p.add_argument_group("output")
    out.add_argument("-o", "--output", metavar="OUT",
                     help="write here ('-': stdout); the extension picks --emit")
    out.add_argument("--emit", choices=list(EMITTERS), metavar="STAGE",
                     help="what to produce: " + ", ".join(EMITTERS) + " (default: ir)")
    out.add_argument("--target", choices=COMPILE_TARGETS, metavar="TARGET",
                     help="backend: " + ", ".join(COMPILE_TARGETS) + " (for --run: "
                     "where the kernel runs; otherwise the default --emit)")
    out.add_argument("--kernel", metavar="NAME", help="the kernel to compile or run")
    out.add_argument("-D", dest="defines", action="append", default=[], metavar="DIM=N",
                     help="fix a symbolic dim (-D M=128); repeatable")
    opt = p.add_argument_group("optimization")
    opt.add_argument("-O", dest="level", type=int, choices=range(4), default=None,
                     metavar="N", help="optimization level -O0..-O3 (default: -O2)")
    opt.add_argument("-p", "--passes", dest="pipeline", metavar="PIPELINE",
                     help="run this pass pipeline instead ('inline,cse,tile{sizes=32,32}')")
    opt.add_argument("--print-ir-after-all", action="store_true",
                     help="print the IR after every pass (stderr)")
    opt.add_argument("--print-ir-after", action="append", metavar="PASS",
                     help="print the IR after this pass (stderr); repeatable")
    opt.add_argument("--print-ir-after-change", action="store_true",
                     help="print the IR after each pass that changed it (stderr)")
    opt.add_argument("--time-passes", action="store_true",
                     help="a table of the time spent in each pass (stderr)")
    opt.add_argument("--remarks", action="store_true",
                     help="report what was fused and what was not, and why (stderr)")
    opt.add_argument("--patterns", action="append", default=[], metavar="FILE",
                     help="add the rewrite patterns of FILE; repeatable")
    be = p.add_argument_group("backend options")
    be.add_argument("--arch", default="sm_80", help="PTX target architecture (default sm_80)")
    be.add_argument("--fast-math", action="store_true",
                    help="PTX: raw ex2/lg2.approx.ftz transcendentals (a few ulp, subnormals "
                         "flushed to 0); default: accurate to ~1 ulp, no .ftz")
    be.add_argument("--allow-tf32", action="store_true",
                    help="PTX: f32 matmuls on tensor cores in tf32 (inputs rounded to 10 "
                         "mantissa bits, f32 accumulation; sm_80+); default: exact f32 FMA")
    be.add_argument("--array", default="128x128", metavar="RxC",
                    help="systolic array size (default 128x128)")
    be.add_argument("--dataflow", choices=("ws", "os", "is"), default="ws",
                    help="systolic dataflow: weight-, output- or input-stationary (default ws)")
    run = p.add_argument_group("running")
    run.add_argument("--run", action="store_true",
                     help="run the kernel; results go to -o (.npz/.npy) or stdout")
    run.add_argument("--profile", action="store_true",
                     help="with --run: per fused kernel time, FLOPs, bytes, roofline verdict, "
                     "and eager vs compiled latency")
    run.add_argument("--plot", metavar="PNG", help="with --profile: draw the roofline (and the "
                     "latency histograms beside it); needs matplotlib")
    run.add_argument("--autotune", action="store_true",
                     help="tune the matmul/conv configuration of a kernel on random (or "
                     "--input) arguments and keep the best in the cache")
    run.add_argument("--input", action="append", default=[], metavar="NAME=VALUE",
                     help="an input: NAME=file.npy, NAME=file.npz:key or NAME=0.5")
    p.add_argument("--repl", action="store_true", help="start the interactive session")
    p.add_argument("--version", action="version", version=f"wiac {__version__}")
    return p


def parse_array(text: str) -> tuple[int, int]:
    rows, sep, cols = text.lower().partition("x")
    if not (sep and rows.isdigit() and cols.isdigit()) or int(rows) < 1 or int(cols) < 1:
        raise CommandLineError(f"--array expects ROWSxCOLS (like 128x128), got '{text}'")
    return int(rows), int(cols)


def job_from_args(args: argparse.Namespace, text: str, filename: str) -> CompileJob:
    pm = {k: getattr(args, k) for k in PM_OPTIONS if getattr(args, k)}
    patterns = [read_source(path)[0] for path in args.patterns]
    opt = OptOptions(2 if args.level is None else args.level, args.pipeline, pm, patterns)
    return CompileJob(text, filename, args.kernel, opt, parse_defines(args.defines),
                      args.arch, parse_array(args.array), args.dataflow,
                      [] if args.remarks else None, fast_math=args.fast_math,
                      allow_tf32=args.allow_tf32)


#: Stages that run no pass: optimization options are ignored there (with a warning).
FRONTEND_STAGES = ("tokens", "ast", "ir")


def optimization_flags(args: argparse.Namespace) -> list[str]:
    """The optimization options given on the command line, as spelled there."""
    given = [f"-O{args.level}"] if args.level is not None else []
    given += ["-p"] if args.pipeline else []
    given += [f"--{k.replace('_', '-')}" for k in PM_OPTIONS if getattr(args, k)]
    given += ["--remarks"] if args.remarks else []
    given += ["--patterns"] if args.patterns else []
    return given


def choose_emitter(args: argparse.Namespace) -> str:
    """--emit, else the -o extension, else the --target default, else ``opt-ir`` when
    an optimization option is given, else ``ir``."""
    if args.emit:
        if args.emit in FRONTEND_STAGES and optimization_flags(args):
            print(f"wiac: warning: {', '.join(optimization_flags(args))} has no effect with "
                  f"--emit {args.emit} (use --emit opt-ir)", file=sys.stderr)
        return args.emit
    if args.output and args.output != "-":
        suffix = Path(args.output).suffix
        if suffix in EXTENSIONS:
            return EXTENSIONS[suffix]
        if not args.target:  # writing IR to 'mm.txt' unasked would hide a typo
            known = ", ".join(f"{ext} ({EXTENSIONS[ext]})" for ext in EXTENSIONS)
            raise WiaUsageError(f"-o {args.output}: the extension '{suffix}' does not say what "
                                f"to write; use one of {known}, or give --emit STAGE")
    if args.target:
        return TARGET_EMITS[args.target]
    return "opt-ir" if optimization_flags(args) else "ir"


def _check_combinations(args: argparse.Namespace) -> None:
    if args.file is None:
        raise CommandLineError("no input file (give FILE, '-' for stdin, or --repl)")
    if args.input and not args.run:
        raise CommandLineError("--input needs --run")
    if args.run and args.emit:
        raise CommandLineError("--run and --emit exclude each other")
    if args.profile and not args.run:
        raise CommandLineError("--profile needs --run")
    if args.plot and not args.profile:
        raise CommandLineError("--plot needs --profile")


def compile_command(args: argparse.Namespace) -> int:
    _check_combinations(args)
    if args.file.endswith(".onnx"):
        job = _onnx_job(args)
    else:
        text, filename = read_source(args.file)
        if not text.strip():
            raise WiaUsageError(f"{filename} is empty: there is nothing to compile")
        job = job_from_args(args, text, filename)
    if args.autotune:
        from ..tune.cli import run_autotune

        print(run_autotune(job.text, job.filename, job.kernel,
                           {**job.weights, **parse_inputs(args.input)}, job.dims))
        return EXIT_OK
    if args.run and args.profile:
        return _profile(args, job)
    if args.run:
        return _run(args, job)
    emitter = EMITTERS[choose_emitter(args)]
    if emitter.binary and args.output in (None, "-") and sys.stdout.isatty():
        raise WiaUsageError(f"--emit {emitter.name} writes binary data; give -o FILE")
    artifact = emitter.run(job)
    if job.weights and args.output not in (None, "-") and emitter.name != "wia":
        # The weights are kernel inputs (see wiadsl/onnx/importer.py): keep
        # them beside the output so the artifact can be run.
        artifact.side[".weights.npz"] = job.weights  # type: ignore[assignment]
    _write(artifact, args.output)
    _print_remarks(job)
    return EXIT_OK


def _onnx_job(args: argparse.Namespace) -> CompileJob:
    """An ONNX model as a compile job: its DSL translation, with ``-D`` dims fixed at
    import (so ``--emit opt-ir -D batch=1`` shows static shapes) and its weights."""
    from ..onnx.importer import import_onnx

    if args.file == "-":
        raise CommandLineError("an ONNX model must be a file, not stdin")
    imported = import_onnx(args.file, dims=parse_defines(args.defines) or None)
    args.defines = []
    job = job_from_args(args, imported.source, args.file)
    job.weights = dict(imported.weights)
    return job


def _profile(args: argparse.Namespace, job: CompileJob) -> int:
    from ..profile.cli import plot_roofline, profile_report

    print(profile_report(job.text, job.filename, job.kernel,
                         {**job.weights, **parse_inputs(args.input)}, job.dims))
    if args.plot:
        print(plot_roofline(args.plot))
    return EXIT_OK


def _run(args: argparse.Namespace, job: CompileJob) -> int:
    from .run import print_run, run_kernel, save_outputs

    target = None if args.target in (None, "ptx") else args.target
    if args.target == "ptx":
        raise CommandLineError("--run --target ptx: PTX runs on a GPU; use --target cuda")
    outputs, stats = run_kernel(job, target, {**job.weights, **parse_inputs(args.input)})
    if args.output and args.output != "-":
        save_outputs(outputs, args.output)
        if stats:
            print_run({}, stats)
    else:
        print_run(outputs, stats)
    return EXIT_OK


def _write(artifact: Artifact, output: str | None) -> None:
    if output is None or output == "-":
        main = artifact.main
        if isinstance(main, bytes):
            sys.stdout.flush()
            sys.stdout.buffer.write(main)
        else:
            sys.stdout.write(main)
        sys.stdout.flush()
        return
    try:
        if isinstance(artifact.main, bytes):
            Path(output).write_bytes(artifact.main)
        else:
            Path(output).write_text(artifact.main, encoding="utf-8")
        for suffix, side in artifact.side.items():
            if isinstance(side, dict):  # arrays: an .npz
                np.savez(output + suffix, **side)
            else:
                Path(output + suffix).write_text(side, encoding="utf-8")
    except OSError as exc:
        raise WiaUsageError(f"cannot write '{output}': {exc.strerror}") from None


def _print_remarks(job: CompileJob) -> None:
    if job.remarks:
        from ..passes import format_remarks

        print(format_remarks(job.remarks), file=sys.stderr)


def _cache_command(argv: list[str]) -> int:
    """``wiac cache info | clear | prune [SIZE] | why KERNEL``."""
    from ..cache.cli import cache_clear, cache_info, cache_prune, cache_why

    if argv[:1] == ["info"] and len(argv) == 1:
        print(cache_info())
    elif argv[:1] == ["clear"] and len(argv) == 1:
        print(cache_clear())
    elif argv[:1] == ["prune"] and len(argv) <= 2:
        print(cache_prune(argv[1] if len(argv) == 2 else None))
    elif argv[:1] == ["why"] and len(argv) == 2:
        print(cache_why(argv[1]))
    else:
        raise CommandLineError("usage: wiac cache info | wiac cache clear | "
                               "wiac cache prune [SIZE] | wiac cache why KERNEL")
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    """The ``wiac`` entry point; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        from .repl import main as repl_main

        return guarded(lambda: repl_main([]), "wiac")
    if argv[0] == "check":
        from .check import main as check_main

        return check_main(argv[1:])
    if argv[0] == "cache":
        return guarded(lambda: _cache_command(argv[1:]))
    if argv[0] == "fuzz":
        from ..fuzz.cli import main as fuzz_main

        return fuzz_main(argv[1:], prog="wiac fuzz")
    args = build_arg_parser().parse_args(argv)
    if args.repl:
        from .repl import main as repl_main

        return guarded(lambda: repl_main(args), "wiac")
    return guarded(lambda: compile_command(args))


if __name__ == "__main__":
    sys.exit(main())
