"""``wiac check FILE``: every kernel, on random inputs, through every available backend.

The reference is the interpreter running the IR as lowered (before any pass).
Every target of the runtime's registry is tried; one this build or machine lacks
is listed as not available (that is not a failure). For each backend and output
the table gives the max absolute and relative error against the reference and
whether it is within the dtype's tolerance. ``--bisect`` then runs the interpreter
after each pass of the pipeline and names the first pass that changes the results,
with the IR before and after it (``bisect.py``).

Exit status: 0 when every available backend agrees, 1 when one disagrees or fails
with a user-facing error (or the file does not compile), 3 when a backend crashes.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field

import numpy as np

from ..diagnostics import WiaError, WiaUsageError
from ..runtime.backend import TARGETS, get_backend
from ..signature import KernelSignature, ParamSpec
from .cli import UsageArgumentParser
from .emit import symbolic_dims
from .errors import EXIT_INTERNAL, EXIT_OK, EXIT_USER, guarded
from .source import CommandLineError, parse_defines, read_source

#: Extent given to a symbolic dim without ``-D``: small, odd, not a power of two.
DEFAULT_EXTENT = 7

#: (rtol, atol) per dtype name; integer and bool results must be exact.
TOLERANCE = {"float16": (2e-2, 2e-2), "float32": (1e-4, 1e-5), "float64": (1e-9, 1e-12)}


@dataclass
class Row:
    backend: str
    output: str = "-"
    abs_err: float | None = None
    rel_err: float | None = None
    status: str = "ok"


@dataclass
class KernelReport:
    name: str
    dims: dict[str, int]
    defaulted: list[str]
    rows: list[Row] = field(default_factory=list)
    note: str = ""


def random_input(param: ParamSpec, dims: dict[str, int], rng: np.random.Generator) -> object:
    """A random value of ``param``'s declared type (dims from ``dims``)."""
    assert param.dtype is not None and param.dims is not None
    shape = tuple(dims[d] if isinstance(d, str) else d for d in param.dims)
    dt = param.dtype.numpy
    if param.dtype.is_float:
        value = rng.standard_normal(shape).astype(dt)
    elif param.dtype.is_int:
        value = rng.integers(-5, 6, size=shape).astype(dt)
    else:
        value = rng.random(shape) < 0.5
    return value if shape else value[()]


def compare(ref: np.ndarray, got: np.ndarray) -> tuple[float, float, bool]:
    """(max abs error, max relative error, within tolerance) of ``got`` against ``ref``."""
    ref, got = np.asarray(ref), np.asarray(got)
    if ref.shape != got.shape:
        return float("inf"), float("inf"), False
    if ref.dtype.kind in "biu" or ref.size == 0:
        diff = np.abs(ref.astype(np.float64) - got.astype(np.float64)) if ref.size else ref
        exact = bool(np.array_equal(ref, got))
        err = float(diff.max()) if ref.size else 0.0
        return err, err / max(1.0, float(np.abs(ref).max()) if ref.size else 1.0), exact
    r, g = ref.astype(np.float64), got.astype(np.float64)
    both_nan = np.isnan(r) & np.isnan(g)
    diff = np.where(both_nan | (r == g), 0.0, np.abs(r - g))
    abs_err = float(np.nanmax(diff)) if diff.size else 0.0
    rel = diff / np.maximum(np.abs(r), np.finfo(np.float64).tiny)
    rel_err = float(np.nanmax(np.where(diff == 0, 0.0, rel))) if diff.size else 0.0
    rtol, atol = TOLERANCE.get(str(ref.dtype), (1e-4, 1e-5))
    ok = bool(np.allclose(g, r, rtol=rtol, atol=atol, equal_nan=True))
    return abs_err, rel_err, ok


def kernel_inputs(sig: KernelSignature, defines: dict[str, int], seed: int
                  ) -> tuple[dict[str, int], list[str], dict[str, object]]:
    dims = {d: defines.get(d, DEFAULT_EXTENT) for d in symbolic_dims(sig)}
    defaulted = [d for d in dims if d not in defines]
    rng = np.random.default_rng(seed)
    return dims, defaulted, {p.name: random_input(p, dims, rng) for p in sig.inputs}


def reference_outputs(text: str, filename: str, sig: KernelSignature,
                      inputs: dict[str, object]) -> list[np.ndarray]:
    """The interpreter on the unoptimized IR: the oracle."""
    from ..frontend.compile import compile_to_ir
    from ..ir import run_func

    module = compile_to_ir(text, filename, kernel=sig.name)
    return [np.asarray(v) for v in run_func(module, sig.name, [inputs[p.name]
                                                                for p in sig.inputs])]


def check_backend(target: str, text: str, filename: str, sig: KernelSignature,
                  inputs: dict[str, object], ref: list[np.ndarray]) -> list[Row]:
    from ..runtime.jit import jit

    try:
        get_backend(target)
    except WiaError as err:
        return [Row(target, status="not available: " + err.message.split(": ", 1)[-1])]
    try:
        result = jit(text, kernel=sig.name, target=target, filename=filename)(**inputs)
    except WiaUsageError as err:  # the target cannot run here (no GPU, no driver, ...)
        return [Row(target, status=f"not available: {err.message.splitlines()[0]}")]
    except WiaError as err:
        return [Row(target, status="error: " + err.message.splitlines()[0])]
    except Exception as exc:  # noqa: BLE001 - a crash is a finding, reported in the table
        return [Row(target, status=f"CRASH: {type(exc).__name__}: {exc}")]
    values = result if isinstance(result, tuple) else (result,)  # a tuple iff several outputs
    rows = []
    for p, want, got in zip(sig.outputs, ref, values):
        abs_err, rel_err, ok = compare(want, np.asarray(got))
        rows.append(Row(target, p.name, abs_err, rel_err, "ok" if ok else "MISMATCH"))
    return rows


def check_kernel(text: str, filename: str, sig: KernelSignature, defines: dict[str, int],
                 seed: int, targets: list[str]) -> KernelReport:
    if any(p.dims is None for p in sig.params):
        report = KernelReport(sig.name, {}, [])
        report.note = "takes 'tensor' parameters (typed at call time): not checked"
        return report
    dims, defaulted, inputs = kernel_inputs(sig, defines, seed)
    report = KernelReport(sig.name, dims, defaulted)
    try:
        ref = reference_outputs(text, filename, sig, inputs)
    except WiaError as err:
        report.note = f"the reference interpreter fails: {err.message}"
        report.rows.append(Row("reference", status="error"))
        return report
    for target in targets:
        report.rows.extend(check_backend(target, text, filename, sig, inputs, ref))
    return report


def format_report(report: KernelReport) -> str:
    dims = " ".join(f"{d}={n}" for d, n in report.dims.items())
    head = f"kernel {report.name}" + (f"  ({dims})" if dims else "")
    lines = [head]
    if report.defaulted:
        lines.append(f"  note: no -D for {', '.join(report.defaulted)}: using "
                     f"{DEFAULT_EXTENT} (fix them with -D NAME=N)")
    if report.note:
        lines.append(f"  note: {report.note}")
    if report.rows:
        table = [("backend", "output", "max abs err", "max rel err", "status")]
        table += [(r.backend, r.output, _num(r.abs_err), _num(r.rel_err), r.status)
                  for r in report.rows]
        widths = [max(len(row[i]) for row in table) for i in range(4)]
        for row in table:
            cells = [c.ljust(w) for c, w in zip(row, widths)]
            lines.append("  " + "  ".join([*cells, row[4]]).rstrip())
    return "\n".join(lines) + "\n"


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"


def build_parser() -> argparse.ArgumentParser:
    p = UsageArgumentParser(
        prog="wiac check", description="Run every kernel of FILE on random inputs through "
        "every available backend and compare each output with the reference interpreter.",
        epilog="exit status: 0 all agree, 1 a mismatch or an error, 3 a backend crashed")
    p.add_argument("file", metavar="FILE", help="a .wia source file ('-': stdin)")
    p.add_argument("-D", dest="defines", action="append", default=[], metavar="DIM=N",
                   help=f"extent of a symbolic dim (default {DEFAULT_EXTENT}); repeatable")
    p.add_argument("--kernel", metavar="NAME", help="check only this kernel")
    p.add_argument("--targets", metavar="T1,T2", default=",".join(TARGETS),
                   help=f"backends to try (default: {','.join(TARGETS)})")
    p.add_argument("--seed", type=int, default=0, help="random seed of the inputs")
    p.add_argument("--bisect", action="store_true",
                   help="find the first pass after which the interpreter's results change")
    p.add_argument("-O", dest="level", type=int, choices=range(4), default=3, metavar="N",
                   help="the pipeline --bisect steps through (default -O3)")
    p.add_argument("-p", "--passes", dest="pipeline", metavar="PIPELINE",
                   help="bisect this pipeline instead")
    return p


def run_check(args: argparse.Namespace) -> int:
    from ..frontend.compile import compile_source
    from ..signature import signature_of

    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    unknown = [t for t in targets if t not in TARGETS]
    if unknown:
        raise CommandLineError(f"--targets: unknown {', '.join(unknown)}; "
                               f"targets: {', '.join(TARGETS)}")
    defines = parse_defines(args.defines)
    text, filename = read_source(args.file)
    kernels = [signature_of(k) for k in compile_source(text, filename).kernels]
    if args.kernel is not None:
        names = [k.name for k in kernels]
        kernels = [k for k in kernels if k.name == args.kernel]
        if not kernels:
            from ..runtime.jit import unknown_kernel_message

            raise CommandLineError(unknown_kernel_message(args.kernel, names, filename))
    known = {d for sig in kernels for d in symbolic_dims(sig)}
    unknown_dims = [d for d in defines if d not in known]
    if unknown_dims:
        raise WiaUsageError(f"-D {', '.join(unknown_dims)}: no kernel checked here has such "
                            f"a dim (dims: {', '.join(sorted(known)) or 'none'})")
    status = EXIT_OK
    for sig in kernels:
        report = check_kernel(text, filename, sig, defines, args.seed, targets)
        sys.stdout.write(format_report(report))
        statuses = [r.status for r in report.rows]
        if any(s.startswith("CRASH") for s in statuses):
            status = EXIT_INTERNAL
        elif status == EXIT_OK and any(s == "MISMATCH" or s.startswith("error")
                                       for s in statuses):
            status = EXIT_USER
        if args.bisect and report.dims is not None and not report.note:
            from .bisect import bisect_kernel

            sys.stdout.write(bisect_kernel(text, filename, sig, defines, args))
    return status


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    return guarded(lambda: run_check(args), "wiac check")
