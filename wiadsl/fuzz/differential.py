"""One program through the oracle, every target, and the pipeline pass by pass.

The oracle is the interpreter on the IR as lowered (``target="interp"`` of the
jit, which runs no pass). Each target runs the same call through the jit API.

Verdicts per target (``Verdict.kind``):
- ``ok``: same outputs within tolerance (compare.py), or both raised a WiaError
  at run time (a runtime check, e.g. a reduction of an empty tensor);
- ``mismatch``: different outputs, or only one side raised;
- ``crash``: an exception that is not a ``WiaError``, or a ``WiaIRError`` (an
  internal error: the compiler built IR it then rejected);
- ``unsupported``: the target refused the program at compile time with a
  ``WiaError`` other than ``WiaRuntimeError`` (an op or dtype that target does
  not implement); counted per target with the reasons, never silently.
- ``ambiguous``: not the oracle's result, but the one another branch gives where a
  condition compared inexact floats within rounding of each other (the NumPy
  evaluator finds these choice points and evaluates every path): either is right;
  or the results differ only at elements the evaluator marks ``free`` (a float
  reduction that could overflow in some order of its terms, npvalues.py): any
  value is right there, and the rest must still agree.
The pseudo-target ``passes`` runs the -O3 pipeline one pass at a time and the
interpreter after each pass that changed the IR: its failure names that pass.
The pseudo-target ``numpy`` is the independent evaluator of the AST
(numpy_eval.py), judged against the interpreter like a backend, so a frontend
bug shows as its mismatch.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..diagnostics import WiaError, WiaIRError, WiaRuntimeError, WiaUsageError
from ..frontend import ast
from .compare import LANGUAGE_RTOL, compare_outputs
from .genprog import FuzzCase
from .reduce import walk

#: label -> (jit target, backend options)
TARGETS: dict[str, tuple[str, dict[str, Any]]] = {
    "cpu-O0": ("cpu", {"opt_level": 0}),
    "cpu-O3": ("cpu", {"opt_level": 3}),
    # shape-generic code (every extent read at run time; backends/llvm/shape_policy.py)
    "cpu-generic": ("cpu", {"opt_level": 3, "shapes": "generic"}),
    "systolic": ("systolic", {}),
    "ptxsim": ("ptxsim", {}),
    "cuda": ("cuda", {}),
}
ALL_TARGETS = ("passes", "numpy", *TARGETS)


@dataclass
class Outcome:
    """What one run produced: outputs, or the error it raised."""

    values: list[np.ndarray] | None = None
    error: str = ""
    crashed: bool = False
    unsupported: bool = False
    #: per output, elements with no single right value (the NumPy evaluator's only)
    free: list[np.ndarray | None] = field(default_factory=list)


@dataclass
class Verdict:
    target: str
    kind: str
    detail: str = ""


@dataclass
class CaseResult:
    """Everything the driver keeps about one program."""

    seed: int
    source: str
    dims: dict[str, int]
    valid: bool = True
    oracle_error: str = ""
    verdicts: list[Verdict] = field(default_factory=list)

    @property
    def failures(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.kind in ("mismatch", "crash")]


def register_targets() -> None:
    """Make sure the registry knows ``ptxsim`` (the lead is adding it)."""
    from ..runtime.backend import TARGETS as REGISTRY

    REGISTRY.setdefault("ptxsim", "wiadsl.backends.ptx.simbackend:BACKEND")


def run_jit(case: FuzzCase, target: str, options: dict[str, Any]) -> Outcome:
    """The case's call through ``wiadsl.jit`` on ``target``."""
    from ..runtime.jit import jit

    register_targets()
    try:
        fn = jit(case.source, kernel=case.kernel, target=target, **options)
        result = fn(**{k: v.copy() for k, v in case.inputs.items()})
    except WiaUsageError as err:
        return Outcome(error=err.message, unsupported=True)
    except WiaIRError as err:
        return Outcome(error=f"internal error: {err.message}", crashed=True)
    except WiaRuntimeError as err:
        return Outcome(error=f"{type(err).__name__}: {err.message}")
    except WiaError as err:  # refused at compile time: a limit of the target
        return Outcome(error=f"{type(err).__name__}: {err.message}", unsupported=True)
    except Exception as exc:  # noqa: BLE001 - any other exception is the finding
        return Outcome(error=_crash_text(exc), crashed=True)
    values = list(result) if isinstance(result, tuple) else [result]
    return Outcome(values=[np.asarray(v) for v in values])


def _crash_text(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)[-3:]
    where = "; ".join(f"{f.filename.rsplit('/wiadsl/', 1)[-1]}:{f.lineno}" for f in frames)
    return f"{type(exc).__name__}: {exc} [{where}]"


def run_numpy(case: FuzzCase, precision: str | None) -> list[Outcome]:
    """The NumPy evaluator's outcome on every path (the natural one first); one
    unsupported or crashed outcome when it cannot evaluate the program."""
    from .npvalues import Unsupported
    from .numpy_eval import evaluate_paths

    try:
        paths = evaluate_paths(case.program, case.kernel, case.inputs, precision, case.dims)
    except Unsupported as err:
        return [Outcome(error=f"numpy evaluator: {err}", unsupported=True)]
    except Exception as exc:  # noqa: BLE001 - a bug of the evaluator is a finding too
        return [Outcome(error=f"numpy evaluator: {_crash_text(exc)}", crashed=True)]
    return [Outcome(values=p.values, error=p.error, free=p.free) for p in paths]


def judge(target: str, ref: Outcome, got: Outcome, precision: str | None,
          paths: list[Outcome] | None = None) -> Verdict:
    """``got`` against ``ref``; where the evaluator found several allowed paths
    (``paths``, a near-threshold branch), a mismatch that matches one of them is
    ``ambiguous``. ``got`` is itself ``paths[0]`` for the ``numpy`` target."""
    verdict = _judge(target, ref, got, precision)
    if verdict.kind != "mismatch" or not paths:
        return verdict
    for p in paths:
        n = _free_count(p.free)
        if n and _judge(target, _masked(ref, p.free), _masked(got, p.free),
                        precision).kind == "ok":
            return Verdict(target, "ambiguous", f"differs only at {n} elements whose float "
                           f"reduction may overflow in some order; against the oracle: "
                           f"{verdict.detail}")
    if len(paths) < 2:
        return verdict
    if got is paths[0]:  # the evaluator: does the oracle follow another path?
        others = [_judge(target, p, ref, precision) for p in paths[1:]]
    else:
        others = [_judge(target, p, got, precision) for p in paths]
    if any(v.kind == "ok" for v in others):
        return Verdict(target, "ambiguous", f"another branch of a near-threshold condition "
                       f"({len(paths)} paths); against the oracle: {verdict.detail}")
    return verdict


def _free_count(free: list[np.ndarray | None]) -> int:
    return sum(int(np.count_nonzero(m)) for m in free if m is not None)


def _masked(o: Outcome, free: list[np.ndarray | None]) -> Outcome:
    """``o`` with its ``free`` elements (same shape only) set to 0, so that neither
    side's value there counts, nor sets the comparison's scale."""
    if o.values is None or len(free) != len(o.values):
        return o
    values = []
    for v, m in zip(o.values, free, strict=True):
        a = np.asarray(v)
        if m is not None and m.shape == a.shape:
            a = np.where(m, np.zeros((), a.dtype), a)
        values.append(a)
    return Outcome(values=values, error=o.error, crashed=o.crashed, unsupported=o.unsupported)


def _judge(target: str, ref: Outcome, got: Outcome, precision: str | None) -> Verdict:
    if got.crashed:
        return Verdict(target, "crash", got.error)
    if got.unsupported:
        return Verdict(target, "unsupported", got.error)
    if ref.values is None and got.values is None:
        return Verdict(target, "ok", "both raised")
    if ref.values is None:
        return Verdict(target, "mismatch", f"the oracle raised ({ref.error}), the target did not")
    if got.values is None:
        return Verdict(target, "mismatch", f"only the target raised: {got.error}")
    diff = compare_outputs(ref.values, got.values, precision)  # type: ignore[arg-type]
    return Verdict(target, "ok" if diff.ok else "mismatch", diff.reason)


#: builtins whose float result has a dtype of its own, whatever their arguments'
#: (LANGUAGE.md: ``dequantize`` -> f32, and ``fake_quant`` is dequantize(quantize(x)))
IMPLICIT_FLOAT = {"dequantize": "f32", "fake_quant": "f32"}


def working_precision(case: FuzzCase) -> str | None:
    """The least precise float dtype the program names (a parameter type or a cast
    target) or computes implicitly (``IMPLICIT_FLOAT``: an f64 output of ``x *
    rsqrt(dequantize(q))`` is only as exact as the f32 rsqrt, fuzz seed 10300000000918):
    every float it computes is at best that exact (compare.py)."""
    names = {getattr(node, "dtype", None) for _, node in walk(case.program)}
    names |= {node.id for _, node in walk(case.program) if isinstance(node, ast.Name)}
    names |= {IMPLICIT_FLOAT[node.name] for _, node in walk(case.program)
              if isinstance(node, ast.Call) and node.name in IMPLICIT_FLOAT}
    return next((d for d in LANGUAGE_RTOL if d in names), None)


def check_case(case: FuzzCase, targets: tuple[str, ...]) -> CaseResult:
    """Run ``case`` through the oracle and each of ``targets``."""
    from ..frontend.compile import compile_source

    result = CaseResult(case.seed, case.source, dict(case.dims))
    try:
        compile_source(case.source, "<fuzz>")
    except WiaError as err:
        result.valid = False
        result.oracle_error = err.message.splitlines()[0]
        return result
    ref = run_jit(case, "interp", {})
    if ref.crashed:
        result.oracle_error = ref.error
        result.verdicts.append(Verdict("interp", "crash", ref.error))
        return result
    result.oracle_error = ref.error
    precision = working_precision(case)
    # the evaluator runs for every check: its paths decide near-threshold branches
    paths = run_numpy(case, precision) if targets else []
    usable = [p for p in paths if not (p.crashed or p.unsupported)]
    for t in targets:
        if t == "passes":
            from .passcheck import check_passes

            result.verdicts.append(check_passes(case, ref, usable))
        elif t == "numpy":
            result.verdicts.append(judge(t, ref, paths[0], precision, usable))
        else:
            backend, options = TARGETS[t]
            result.verdicts.append(judge(t, ref, run_jit(case, backend, options), precision,
                                         usable))
    return result
