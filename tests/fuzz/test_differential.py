"""The bounded CI fuzz run, and checks that the differential machinery can fail.

The run's size is a budget: ``WIADSL_FUZZ_COUNT`` programs (default 60) and at most
``WIADSL_FUZZ_BUDGET`` seconds (default 40) of starting new ones; the CPU JIT at
-O3 and the NumPy evaluator see every program, the others a fixed share (``EVERY``).
"""

import os
import signal

import numpy as np
import pytest

from wiadsl.fuzz import run_fuzz
from wiadsl.fuzz.differential import Outcome, check_case, judge
from wiadsl.fuzz.genprog import generate
from wiadsl.fuzz.worker import run_forked

COUNT = int(os.environ.get("WIADSL_FUZZ_COUNT", "60"))
BUDGET = float(os.environ.get("WIADSL_FUZZ_BUDGET", "40"))
EVERY = {"passes": 2, "cpu-O0": 4, "cpu-generic": 4, "systolic": 3, "ptxsim": 6}


def test_bounded_fuzz_run(tmp_path) -> None:
    report = run_fuzz(11, COUNT, ("passes", "numpy", "cpu-O0", "cpu-O3", "cpu-generic", "systolic",
                                  "ptxsim"),
                      tmp_path, budget_s=BUDGET, every=EVERY, reduce_s=20)
    print(report.summary())
    assert report.ok, report.summary()
    assert report.programs >= min(COUNT, 20), "too few programs ran to mean anything"
    assert report.invalid <= report.programs // 20, report.summary()
    assert report.checks["cpu-O3"] == report.programs - report.invalid
    assert report.checks["numpy"] == report.programs - report.invalid


def test_judge_verdicts() -> None:
    ref = Outcome(values=[np.array([1.0, 2.0], np.float32)])
    same = Outcome(values=[np.array([1.0, 2.0], np.float32)])
    off = Outcome(values=[np.array([1.0, 2.5], np.float32)])
    raised = Outcome(error="WiaRuntimeError: index out of range")
    assert judge("t", ref, same, "f32").kind == "ok"
    assert judge("t", ref, off, "f32").kind == "mismatch"
    assert judge("t", ref, raised, "f32").kind == "mismatch"
    assert judge("t", raised, ref, "f32").kind == "mismatch"
    assert judge("t", raised, raised, "f32").kind == "ok"
    assert judge("t", ref, Outcome(error="boom", crashed=True), "f32").kind == "crash"


def test_a_dying_child_is_detected() -> None:
    died, _ = run_forked(lambda: os.kill(os.getpid(), signal.SIGSEGV))
    assert died
    assert run_forked(lambda: 41 + 1) == (False, 42)


def test_pass_check_names_the_pass_that_changes_results(monkeypatch) -> None:
    import wiadsl.tools.pipeline as pipeline

    real = pipeline.pass_steps

    def broken(module, specs):  # the first pass that changes the IR also breaks a constant
        steps = real(module, specs)
        for k, s in enumerate(steps):
            if s.changed:
                bad = s.after.replace("2.0 : f32", "3.0 : f32")
                steps[k] = pipeline.PassStep(s.index, s.spec, s.before, bad)
                return steps
        return steps

    monkeypatch.setattr(pipeline, "pass_steps", broken)
    from wiadsl.frontend.parser import parse_source
    from wiadsl.fuzz.genprog import FuzzCase, make_inputs

    src = ("kernel fz(input x: f32[4], output y: f32[4]) "
           "{ a = x * 2.0; b = a + 0.0; y = b * 1.0; }")
    p = parse_source(src)
    case = FuzzCase(0, p, "fz", {}, make_inputs(p, "fz", {}, 0))
    verdict = check_case(case, ("passes",)).verdicts[0]
    assert verdict.kind == "mismatch" and "after pass #" in verdict.detail, verdict


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_generated_cases_agree_on_the_interpreter_twice(seed: int) -> None:
    result = check_case(generate(seed), ())
    assert result.valid
