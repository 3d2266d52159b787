"""The REPL's language in-process (fast): entries, values, declarations, commands."""

from __future__ import annotations

import numpy as np
import pytest

from wiadsl.diagnostics import WiaError
from wiadsl.tools.commands import ReplState, run_command
from wiadsl.tools.completion import Completer, history_path
from wiadsl.tools.evaluate import execute, split_args
from wiadsl.tools.repl import needs_more
from wiadsl.tools.session import Session


@pytest.fixture
def state():
    return ReplState(Session(target="interp"))


def run(state: ReplState, text: str) -> str:
    if text.startswith(":"):
        return run_command(state, text)
    return execute(state.session, text, "<in1>")


@pytest.mark.parametrize("text,more", [
    ("A @ B", False), ("kernel k(input x: f32,", True), ("kernel k(input x: f32)", True),
    ("func f(x) {\n return x;", True), ("func f(x) {\n return x;\n}", False),
    ("x = 1 +", False), ("x = 1 + \\", True), ("kernel k(input x: f32)\n", False), (":ir", False), ("/* open", True), ("x = [1.0, // c\n", True),
])
def test_needs_more(text, more):
    assert needs_more(text) is more


def test_values_and_weak_scalars(state):
    assert run(state, "A = randn(2, 3)") == "A: f32[2, 3]"
    assert run(state, "alpha = 0.5") == "alpha: f64 (weak)"
    assert run(state, "A * alpha").startswith("f32[2, 3]\n")  # weak: A keeps f32
    np.testing.assert_allclose(state.session.values["_"], state.session.values["A"] * 0.5)
    assert run(state, "A += 1.0") == "A: f32[2, 3]"
    assert run(state, "x = [1.0, 2.0]") == "x: f64[2]"


def test_kernel_declare_call_and_multiple_outputs(state):
    run(state, "kernel two(input x: f32[N], output a: f32[N], output s: f32) "
               "{ a = x + 1.0; s = reduce_sum(x); }")
    run(state, "v = cast(arange(3), f32)")
    out = run(state, "two(v)")
    assert out.startswith("a: f32[3]\n[1. 2. 3.]\ns: f32\n3.0")
    assert run(state, "p, q = two(x=v)") == "p: f32[3]\nq: f32"
    assert state.session.call_dims["two"] == {"N": 3}


def test_errors_leave_the_session_unchanged(state):
    run(state, "kernel k(input x: f32[N], output y: f32[N]) { y = x; }")
    with pytest.raises(WiaError) as info:
        run(state, "kernel k(input x: f32[N], output y: f32[N]) {\n  y = z;\n}")
    assert "<in1>:2:7: error: unknown name 'z'" in info.value.render()
    assert "y = x;" in run(state, ":source k")
    with pytest.raises(WiaError, match="cannot bind 'relu'"):
        run(state, "relu = 1.0")
    with pytest.raises(WiaError, match="is a kernel"):
        run(state, "k = 1.0")


def test_redefinition_replaces(state):
    run(state, "func f(x) { return x + 1.0; }")
    run(state, "func f(x) { return x * 10.0; }")
    assert run(state, "f(2.0)").endswith("20.0")
    assert "func" in run(state, ":decls")


def test_load_save_del_reset(state, tmp_path):
    np.save(tmp_path / "a.npy", np.arange(6, dtype=np.int32).reshape(2, 3))
    assert run(state, f":load A {tmp_path / 'a.npy'}") == "A: i32[2, 3]"
    assert run(state, "reduce_sum(A)").endswith("15")
    run(state, f":save A {tmp_path / 'b.npy'}")
    assert np.load(tmp_path / "b.npy").tolist() == [[0, 1, 2], [3, 4, 5]]
    run(state, f":save {tmp_path / 'all.npz'}")
    assert "A" in np.load(tmp_path / "all.npz").files
    assert run(state, ":del A") == "deleted value A"
    with pytest.raises(WiaError, match="unknown name 'A'"):
        run(state, "A + 1")
    run(state, ":reset")
    assert "no values" in run(state, ":vars")


def test_ir_commands(state):
    run(state, "kernel sq(input x: f32[N], output y: f32[N]) { y = x * x; }")
    assert "func @sq(" in run(state, ":ir")
    assert "func @sq(" in run(state, ":opt sq")
    run(state, "A = randn(4, 4)")
    assert "tensor<4x4xf32>" in run(state, ":ir A @ A")
    passes = run(state, ":passes A @ A + 1.0")
    assert "fuse" in passes
    assert "fused" in run(state, ":diff fuse") or "does not change" in run(state, ":diff fuse")
    assert "func @__wia_eval" in run(state, ":ir after fuse")
    with pytest.raises(WiaError, match="needs static shapes"):
        run(state, ":sasm sq")
    assert ".section" in run(state, ":sasm sq N=8")


def test_commands_misc(state):
    assert ":time EXPR" in run(state, ":help")
    assert "latency" in run(state, ":help time")
    assert "* interp" in run(state, ":target")
    assert run(state, ":O 3") == "optimization level: -O3"
    with pytest.raises(WiaError, match="did you mean :time"):
        run(state, ":tim A")
    with pytest.raises(WiaError, match="unknown target"):
        run(state, ":target tpu")


def test_completion(state):
    run(state, "my_value = randn(2)")
    c = Completer(state.session)
    assert c.candidates("my_") == ["my_value"]
    assert c.candidates(":ti") == [":time "]
    assert "nn.softmax" in c.candidates("nn.so")
    assert "reduce_sum" in c.candidates("reduce_")


def test_history_path_override(monkeypatch, tmp_path):
    monkeypatch.setenv("WIADSL_HISTORY", str(tmp_path / "h"))
    assert history_path() == tmp_path / "h"
    monkeypatch.delenv("WIADSL_HISTORY")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert history_path() == tmp_path / "wiadsl" / "history"


def test_split_args():
    assert split_args("A, f(B, C), x=[1, 2]") == ["A", "f(B, C)", "x=[1, 2]"]
    assert split_args("  ") == []
