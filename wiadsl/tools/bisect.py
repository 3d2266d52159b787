"""``wiac check --bisect``: the first pass after which a kernel computes something else.

The kernel's IR as lowered is run by the interpreter (the reference); then the
pipeline runs one pass at a time and the interpreter runs again after each. The
first pass whose results differ beyond tolerance (or that makes the interpreter
fail) is printed with a unified diff of the IR before and after it.

Invariant: the search is linear over the pipeline, not a binary search, so a pass
that breaks results and a later one that happens to restore them is still found.
"""

from __future__ import annotations

import argparse

from ..diagnostics import WiaError
from ..ir import parse_module, run_func
from ..signature import KernelSignature
from .check import compare, kernel_inputs, reference_outputs
from .pipeline import PassStep, pass_steps, pipeline_passes


def _outputs(ir_text: str, sig: KernelSignature, inputs: dict[str, object]) -> list:
    module = parse_module(ir_text)
    return run_func(module, sig.name, [inputs[p.name] for p in sig.inputs])


def first_bad_step(steps: list[PassStep], sig: KernelSignature, inputs: dict[str, object],
                   ref: list) -> tuple[PassStep, str] | None:
    """The first step whose results differ from ``ref`` (and how), or None."""
    for step in steps:
        if not step.changed:
            continue
        try:
            got = _outputs(step.after, sig, inputs)
        except WiaError as err:
            return step, f"the interpreter fails after it: {err.message}"
        for p, want, have in zip(sig.outputs, ref, got):
            abs_err, rel_err, ok = compare(want, have)
            if not ok:
                return step, (f"output '{p.name}' changes: max abs err {abs_err:.3g}, "
                              f"max rel err {rel_err:.3g}")
    return None


def bisect_kernel(text: str, filename: str, sig: KernelSignature, defines: dict[str, int],
                  args: argparse.Namespace) -> str:
    """The bisect report for one kernel (the caller prints it)."""
    from ..frontend.compile import compile_to_ir

    _, _, inputs = kernel_inputs(sig, defines, args.seed)
    ref = reference_outputs(text, filename, sig, inputs)
    specs = pipeline_passes(args.level, args.pipeline)
    steps = pass_steps(compile_to_ir(text, filename, kernel=sig.name), specs)
    pipeline = args.pipeline or f"-O{args.level}"
    found = first_bad_step(steps, sig, inputs, ref)
    if found is None:
        changed = sum(s.changed for s in steps)
        return (f"  bisect: the interpreter's results agree after every pass of {pipeline} "
                f"({len(steps)} passes, {changed} changed the IR)\n")
    step, how = found
    return (f"  bisect: first bad pass: #{step.index + 1} '{step.spec}' of {pipeline}: {how}\n"
            f"{step.diff(f' (kernel {sig.name})')}")
