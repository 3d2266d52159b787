"""``wiac FILE --run``: run one kernel on NumPy files and print or save the results.

Inputs come from ``--input NAME=file.npy`` (or ``NAME=0.5`` for a scalar); the
results go to ``-o out.npz`` (every output by name), ``-o out.npy`` (a kernel with
one output), or are printed. The kernel runs through ``wiadsl.jit`` with the chosen
target, so every argument is checked exactly as a Python call checks it.

Invariant: backend statistics (cycles, utilization, ...) are printed after the
results whenever the backend reports any.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from ..diagnostics import WiaUsageError
from .emit import CompileJob, select_kernel
from .numfmt import format_value


def target_options(target: str, job: CompileJob) -> dict[str, Any]:
    """The jit options a target takes from the command line (none for the others)."""
    if target == "systolic":
        return {"array": job.array, "dataflow": job.dataflow}
    if target in ("ptxsim", "cuda"):  # the -O that 'wiac -o x.ptx' would compile at
        return {"opt_level": job.opt.level, "fast_math": job.fast_math,
                "allow_tf32": job.allow_tf32}
    return {}


def run_kernel(job: CompileJob, target: str | None, inputs: dict[str, object]
               ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Run the job's kernel on ``inputs``; the outputs by name and the backend's stats."""
    from ..runtime.jit import DEFAULT_TARGET, jit

    sig = select_kernel(job)
    chosen = target or DEFAULT_TARGET
    fn = jit(job.text, kernel=sig.name, target=chosen, filename=job.filename,
             **target_options(chosen, job))
    result = fn(**inputs)
    values = result if isinstance(result, tuple) else (result,)  # a tuple iff several outputs
    outputs = {p.name: np.asarray(v) for p, v in zip(sig.outputs, values)}
    return outputs, dict(fn.stats)


def save_outputs(outputs: dict[str, np.ndarray], path: str) -> None:
    """Write ``.npz`` (all outputs) or ``.npy`` (exactly one); other suffixes are errors."""
    suffix = Path(path).suffix
    try:
        if suffix == ".npz":
            # NumPy's stub types **kwds so a key could be allow_pickle: mypy rejects any dict
            np.savez(path, **outputs)  # type: ignore[arg-type]
        elif suffix == ".npy":
            if len(outputs) != 1:
                raise WiaUsageError(f"the kernel has {len(outputs)} outputs "
                                    f"({', '.join(outputs)}); write them to a .npz file")
            np.save(path, next(iter(outputs.values())))
        else:
            raise WiaUsageError(f"--run writes results to .npz or .npy files, not '{path}'")
    except OSError as exc:
        raise WiaUsageError(f"cannot write '{path}': {exc.strerror}") from None


def print_run(outputs: dict[str, np.ndarray], stats: dict[str, Any],
              out: TextIO = sys.stdout) -> None:
    for name, value in outputs.items():
        out.write(format_value(name, value))
    if stats:
        out.write("stats: " + ", ".join(f"{k}={_fmt(v)}" for k, v in stats.items()) + "\n")


def _fmt(value: object) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)
