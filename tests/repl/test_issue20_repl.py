"""Issue 20, the REPL: entries end when their brackets close, listings of kernels with
'tensor' parameters, carets under what was typed, randn in expressions, :target,
and the session under ``wiac --repl`` and a closed pipe."""

from __future__ import annotations

import subprocess
import sys

import pytest

from wiadsl.diagnostics import WiaError
from wiadsl.tools.commands import ReplState, run_command
from wiadsl.tools.evaluate import execute
from wiadsl.tools.repl import read_entry

from ..cli.conftest import ROOT, run_wiac

GENERIC = "kernel g(input X: tensor, output Y: tensor) { Y = X * 2.0; }"


@pytest.fixture
def state():
    from wiadsl.tools.session import Session

    return ReplState(Session(target="interp"))


def run(state: ReplState, text: str, label: str = "<in1>") -> str:
    state.label = label
    if text.startswith(":"):
        return run_command(state, text)
    return execute(state.session, text, label)


def error_of(state: ReplState, text: str) -> str:
    with pytest.raises(WiaError) as info:
        run(state, text)
    return info.value.render()


def feed(monkeypatch, lines: list[str]) -> None:
    it = iter(lines)

    def fake_input(prompt: str = "") -> str:
        try:
            return next(it)
        except StopIteration:
            raise EOFError from None
    monkeypatch.setattr("builtins.input", fake_input)


def test_a_trailing_operator_ends_the_entry(monkeypatch):
    feed(monkeypatch, ["y = x +", "z = 1"])
    assert read_entry(False) == "y = x +"
    assert read_entry(False) == "z = 1"


def test_a_trailing_backslash_continues_and_goes(monkeypatch):
    feed(monkeypatch, ["y = x + \\", "  1", "w = 2"])
    assert read_entry(False) == "y = x + \n  1"
    assert read_entry(False) == "w = 2"


def test_a_header_without_body_gives_up_at_a_blank_line(monkeypatch):
    feed(monkeypatch, ["kernel k(input x: f32)", "", "z = 1"])
    assert read_entry(False) == "kernel k(input x: f32)\n"
    assert read_entry(False) == "z = 1"


def test_open_brackets_still_continue_over_blank_lines(monkeypatch):
    feed(monkeypatch, ["v = [1.0,", "", "2.0]"])
    assert read_entry(False) == "v = [1.0,\n\n2.0]"


def test_carets_point_into_what_was_typed(state):
    run(state, "x = arange(4)")
    text = error_of(state, "y = x + qq")
    assert text.startswith("<in1>:1:9: error: unknown name 'qq'")
    assert text.splitlines()[1:] == ["    y = x + qq", "            ^^"]
    text = error_of(state, "   x * (1 +\n  qq)")
    assert text.startswith("<in1>:2:3: error: unknown name 'qq'")
    assert text.splitlines()[1:] == ["      qq)", "      ^^"]


def test_randn_and_rand_inside_expressions(state):
    assert run(state, "B = randn(2, 3) @ randn(3, 4)") == "B: f32[2, 4]"
    assert run(state, "reduce_min(rand(5)) >= 0.0").endswith("True")
    assert run(state, "C = randn(2, 2, dtype=f64) + 1.0") == "C: f64[2, 2]"
    assert not any(n.startswith("__wia") for n in state.session.values)


def test_listing_a_generic_kernel_says_what_to_do(state):
    run(state, GENERIC)
    for cmd in (":ir g", ":opt g", ":llvm g", ":ptx g"):
        text = error_of(state, cmd)
        assert "call it first" in text and ":ir g(x" in text, cmd


def test_listing_a_generic_kernel_after_a_call_uses_its_types(state):
    run(state, GENERIC)
    run(state, "x = cast(arange(6), f32)")
    run(state, "y = g(x)")
    assert "func @g(%X: tensor<?xf32>)" in run(state, ":ir g")
    assert "define" in run(state, ":llvm g")
    assert ".entry" in run(state, ":ptx g")
    assert "-O2 pipeline for kernel g" in run(state, ":passes g")


def test_listing_a_generic_kernel_for_given_arguments(state):
    run(state, GENERIC)
    run(state, "m = randn(2, 3)")
    assert "func @g(%X: tensor<?x?xf32>)" in run(state, ":ir g(m)")
    assert "func @g(%X: tensor<?xi64>)" in run(state, ":ir g(arange(3))")


def test_target_probes_the_device(state, monkeypatch):
    from wiadsl.backends.ptx import cuda
    from wiadsl.diagnostics import WiaRuntimeError

    def no_gpu():
        raise WiaRuntimeError("CUDA cuInit failed: CUDA_ERROR_NO_DEVICE")
    monkeypatch.setattr(cuda, "driver", no_gpu)
    rows = {line.split()[-2] if "*" in line else line.split()[0]: line
            for line in run(state, ":target").splitlines()[1:]}
    assert "not available" in rows["cuda"] and "CUDA_ERROR_NO_DEVICE" in rows["cuda"]
    with pytest.raises(WiaError, match="no usable GPU"):
        run(state, ":target cuda")


def test_passes_and_diff_under_wiac_repl_without_O():
    proc = run_wiac("--repl", stdin="x = randn(4, 4)\n:passes x @ x\n:diff cse\n")
    assert proc.returncode == 0, proc.err
    assert "-O2 pipeline for x @ x" in proc.out
    assert "optimization level" not in proc.err


def test_a_closed_pipe_ends_the_session_quietly():
    # far more output than a pipe buffers, and a reader that leaves after one line
    entries = ":help\n" * 400
    proc = subprocess.run(f"{sys.executable} -m wiadsl | head -1", shell=True, cwd=ROOT,
                          input=entries.encode(), capture_output=True, timeout=300)
    err = proc.stderr.decode()
    assert "internal compiler error" not in err and "Traceback" not in err, err
    assert "BrokenPipe" not in err
