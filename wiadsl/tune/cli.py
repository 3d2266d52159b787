"""The autotuner for ``wiac FILE --autotune`` (the CLI prints the returned summary).

``run_autotune(text, filename, kernel, inputs, defines, top_k, out)`` tunes one
kernel of a source on the given inputs (random ones, as ``wiac check`` makes
them, for any input not given; ``-D`` dims in ``defines``) and returns the
summary; the progress bar goes to ``out`` (stderr by default).
"""

from __future__ import annotations

import sys
from typing import TextIO

from ..diagnostics import WiaUsageError
from .tuner import TuneResult, autotune


def tune_source(text: str, filename: str = "<string>", kernel: str | None = None,
                inputs: dict[str, object] | None = None, defines: dict[str, int] | None = None,
                top_k: int = 8, out: TextIO | None = sys.stderr) -> TuneResult:
    from ..runtime.jit import jit
    from ..tools.check import kernel_inputs

    module = jit(text, filename=filename, target="cpu")
    names = list(module.kernels)
    name = kernel or (names[0] if len(names) == 1 else None)
    if name is None or name not in names:
        raise WiaUsageError(f"name the kernel to autotune; kernels: {', '.join(names)}")
    fn = module.kernels[name]
    _, _, random = kernel_inputs(fn.signature, defines or {}, seed=0)
    given = {**random, **(inputs or {})}
    return autotune(fn, *[given[p.name] for p in fn.signature.inputs], top_k=top_k, out=out)


def run_autotune(text: str, filename: str = "<string>", kernel: str | None = None,
                 inputs: dict[str, object] | None = None, defines: dict[str, int] | None = None,
                 top_k: int = 8, out: TextIO | None = sys.stderr) -> str:
    return tune_source(text, filename, kernel, inputs, defines, top_k, None if out is None else out
                       ).summary()
