"""The profiler for ``wiac --run --profile [--plot roofline.png]`` (the CLI prints).

``profile_report(text, filename, kernel, inputs, defines)`` profiles one kernel
of a source on the given inputs (random ones, as ``wiac check`` makes them, for
any input not given) and returns the report; ``plot_roofline(path)`` draws the
most recent profile's roofline to ``path`` and its eager vs compiled latency
histograms next to it (``<stem>_latency.png``), returning what it wrote.
"""

from __future__ import annotations

from pathlib import Path

from ..diagnostics import WiaUsageError
from . import plot
from .profiler import LAST, Profile, profile


def profile_source(text: str, filename: str = "<string>", kernel: str | None = None,
                   inputs: dict[str, object] | None = None,
                   defines: dict[str, int] | None = None, runs: int = 100) -> Profile:
    from ..runtime.jit import jit
    from ..tools.check import kernel_inputs

    module = jit(text, filename=filename, target="cpu")
    names = list(module.kernels)
    name = kernel or (names[0] if len(names) == 1 else None)
    if name is None or name not in names:
        raise WiaUsageError(f"name the kernel to profile; kernels: {', '.join(names)}")
    fn = module.kernels[name]
    _, _, random = kernel_inputs(fn.signature, defines or {}, seed=0)
    given = {**random, **(inputs or {})}
    return profile(fn, *[given[p.name] for p in fn.signature.inputs], runs=runs)


def profile_report(text: str, filename: str = "<string>", kernel: str | None = None,
                   inputs: dict[str, object] | None = None,
                   defines: dict[str, int] | None = None, runs: int = 100) -> str:
    return profile_source(text, filename, kernel, inputs, defines, runs).report()


def plot_roofline(path: str | Path) -> str:
    """Draw the last profile; returns the files written, one line each."""
    if not LAST:
        raise WiaUsageError("--plot needs a profile: run with --profile")
    out = Path(path)
    try:
        written = [plot.roofline(LAST[0], out)]
        if LAST[0].latency:
            latency = out.with_name(f"{out.stem}_latency{out.suffix or '.png'}")
            written.append(plot.latency(LAST[0], latency))
    except OSError as exc:
        raise WiaUsageError(f"--plot: cannot write '{exc.filename or out}': "
                            f"{exc.strerror or exc}") from None
    return "\n".join(f"wrote {p}" for p in written)
