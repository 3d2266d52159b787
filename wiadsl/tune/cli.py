"""The autotuner for ``wiac FILE --autotune`` (the CLI prints the returned summary).

``run_autotune(text, filename, kernel, inputs, defines, top_k, out)`` tunes one
kernel of a source on the given inputs (random ones, as ``wiac check`` makes
them, for any input not given; ``-D`` dims in ``defines``) and returns the
summary; the progress bar goes to ``out`` (stderr by default).
"""

from __future__ import annotations

import sys
from typing import TextIO

import numpy as np

from ..diagnostics import WiaUsageError
from ..signature import KernelSignature
from .tuner import TuneResult, autotune


def tune_source(text: str, filename: str = "<string>", kernel: str | None = None,
                inputs: dict[str, object] | None = None, defines: dict[str, int] | None = None,
                top_k: int = 8, out: TextIO | None = sys.stderr
                ) -> tuple[TuneResult, dict[str, int]]:
    """Tune one kernel; also return the dims that nothing fixed (neither ``defines``
    nor a given input) with the default extent they were tuned at."""
    from ..runtime.jit import jit
    from ..tools.check import kernel_inputs

    module = jit(text, filename=filename, target="cpu")
    names = list(module.kernels)
    name = kernel or (names[0] if len(names) == 1 else None)
    if name is None or name not in names:
        raise WiaUsageError(f"name the kernel to autotune; kernels: {', '.join(names)}")
    fn = module.kernels[name]
    # dims the given arrays fix: the random inputs for the rest must agree with them
    fixed = {**dims_of_inputs(fn.signature, inputs or {}), **(defines or {})}
    dims, defaulted, random = kernel_inputs(fn.signature, fixed, seed=0)
    given = {**random, **(inputs or {})}
    result = autotune(fn, *[given[p.name] for p in fn.signature.inputs], top_k=top_k, out=out,
                      summary=False)
    return result, {d: dims[d] for d in defaulted}


def dims_of_inputs(sig: KernelSignature, inputs: dict[str, object]) -> dict[str, int]:
    """The symbolic dims that the given input arrays bind, by their shapes."""
    dims: dict[str, int] = {}
    for param in sig.inputs:
        if param.name not in inputs or not param.dims:
            continue
        shape = np.shape(inputs[param.name])  # type: ignore[call-overload]
        if len(shape) == len(param.dims):
            for d, n in zip(param.dims, shape, strict=True):
                if isinstance(d, str):
                    dims.setdefault(d, n)
    return dims


def run_autotune(text: str, filename: str = "<string>", kernel: str | None = None,
                 inputs: dict[str, object] | None = None, defines: dict[str, int] | None = None,
                 top_k: int = 8, out: TextIO | None = sys.stderr) -> str:
    """The summary ``wiac --autotune`` prints, led by a note naming any dim it tuned at
    a default extent (a config tuned at 7x7x7 says little about 512x512x512)."""
    result, defaulted = tune_source(text, filename, kernel, inputs, defines, top_k, out)
    if not defaulted:
        return result.summary()
    at = ", ".join(f"{d}={n}" for d, n in defaulted.items())
    flags = " ".join(f"-D {d}=N" for d in defaulted)
    return (f"note: no -D or --input fixes {', '.join(defaulted)}: tuned at {at}; "
            f"give {flags} for the sizes you run\n" + result.summary())
