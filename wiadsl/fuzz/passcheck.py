"""Pass-by-pass checking: the interpreter after each pass of the -O3 pipeline.

The kernel's IR as lowered is optimized one pass at a time
(``tools.pipeline.pass_steps``: each step works on a copy through the IR's text
form, so the printer and parser are exercised too); after every pass that
changed the IR, the interpreter runs it on the case's inputs and its outputs are
compared with the unoptimized IR's. The verdict names the first pass whose
results differ, or that raised, with the size of its IR diff.

Invariant: the search is linear, so a pass that breaks results is named even
when a later pass happens to restore them.
"""

from __future__ import annotations

from ..diagnostics import WiaError, WiaIRError
from .compare import compare_outputs
from .differential import Outcome, Verdict, _crash_text, judge, working_precision
from .genprog import FuzzCase

LEVEL = 3


def _run(module: object, case: FuzzCase) -> Outcome:
    from ..ir import run_func

    args = [case.inputs[p.name] for p in _inputs(case)]
    try:
        values = run_func(module, case.kernel, [a.copy() for a in args])  # type: ignore[arg-type]
    except WiaIRError as err:
        return Outcome(error=f"internal error: {err.message}", crashed=True)
    except WiaError as err:
        return Outcome(error=err.message)
    except Exception as exc:  # noqa: BLE001
        return Outcome(error=_crash_text(exc), crashed=True)
    import numpy as np

    return Outcome(values=[np.asarray(v) for v in values])


def _inputs(case: FuzzCase) -> list:
    k = next(d for d in case.program.kernels if d.name == case.kernel)
    return [p for p in k.params if p.direction == "input"]


def check_passes(case: FuzzCase, oracle: Outcome | None = None,
                 paths: list[Outcome] | None = None) -> Verdict:
    """``ok``, or the first pass after which the interpreter disagrees; where the
    NumPy evaluator found several allowed ``paths`` (a near-threshold branch), a
    pass whose results match one of them is ``ambiguous`` instead."""
    from ..frontend.compile import compile_source
    from ..ir import parse_module
    from ..passes import default_pipeline
    from ..tools.pipeline import pass_steps, split_pipeline

    try:
        module = compile_source(case.source, "<fuzz>").lower_kernel(case.kernel, {})
        ref = _run(module, case)
        steps = pass_steps(module, split_pipeline(default_pipeline(LEVEL)))
    except WiaError as err:
        kind = "crash" if isinstance(err, WiaIRError) else "mismatch"
        return Verdict("passes", kind, f"the pipeline raised: {err.message.splitlines()[0]}")
    except Exception as exc:  # noqa: BLE001
        return Verdict("passes", "crash", f"the pipeline crashed: {_crash_text(exc)}")
    precision = working_precision(case)
    for step in steps:
        if not step.changed:
            continue
        try:
            got = _run(parse_module(step.after), case)
        except WiaError as err:
            return Verdict("passes", "crash", f"after pass '{step.spec}': the IR does not "
                           f"parse back: {err.message.splitlines()[0]}")
        what = f"after pass #{step.index + 1} '{step.spec}'"
        if got.crashed:
            return Verdict("passes", "crash", f"{what}: {got.error}")
        if (ref.values is None) != (got.values is None):
            side = ref.error if ref.values is None else got.error
            return Verdict("passes", "mismatch", f"{what}: only one side raised: {side}")
        if ref.values is not None:
            diff = compare_outputs(ref.values, got.values, precision)  # type: ignore[arg-type]
            if not diff.ok:
                verdict = judge("passes", ref, got, precision, paths)
                kind = "ambiguous" if verdict.kind == "ambiguous" else "mismatch"
                return Verdict("passes", kind, f"{what}: {diff.reason}")
    return Verdict("passes", "ok")
