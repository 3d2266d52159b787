"""The REPL on a real pseudo-terminal: multi-line kernels, calls, errors that do not
end the session, :ir, :time, completion, history, Ctrl-C."""

from __future__ import annotations

import pytest

from .ptyproc import PtyProcess

PROMPT = r"wia> $"
MORE = r"\.\.\.> $"


@pytest.fixture
def repl(tmp_path):
    proc = PtyProcess(["--repl"], env={"WIADSL_HISTORY": str(tmp_path / "history")})
    proc.expect(r"Type :help")
    proc.expect(PROMPT)
    yield proc
    proc.close()


def test_kernel_over_several_lines_then_call(repl):
    repl.sendline("kernel double(input x: f32[N],")
    repl.expect(MORE)
    repl.sendline("              output y: f32[N]) {")
    repl.expect(MORE)
    repl.sendline("    y = x * 2.0;")
    repl.expect(MORE)
    repl.sendline("}")
    repl.expect(r"^kernel double\(x: f32\[N\]\) -> \(y: f32\[N\]\)")
    repl.expect(PROMPT)
    repl.sendline("v = cast([1.0, 2.0, 3.0], f32)")
    repl.expect(r"^v: f32\[3\]")
    repl.sendline("double(v)")
    repl.expect(r"^y: f32\[3\]\n\[2\. 4\. 6\.\]")
    repl.expect(PROMPT)


def test_error_with_caret_and_the_session_goes_on(repl):
    repl.sendline("A = randn(2, 3)")
    repl.expect(r"^A: f32\[2, 3\]")
    repl.sendline("A @ A")
    repl.expect(r"<in2>:1:3: error: shape mismatch in '@': A is f32\[2, 3\], A is f32\[2, 3\]")
    repl.expect(r"^\s+A @ A\n\s+\^")  # the line as typed, not the rewritten "A @ A;"
    repl.expect(PROMPT)
    repl.sendline("reduce_sum(A * 0.0)")
    repl.expect(r"^f32\n0\.0")
    repl.sendline("nope(A)")
    repl.expect(r"<in4>:1:1: error: unknown function 'nope'")
    repl.sendline(":frob")
    repl.expect(r"unknown command ':frob'")
    repl.sendline("A.shape_is_not_python")
    repl.expect(r"error:")
    repl.sendline("B = A + 1.0")
    repl.expect(r"^B: f32\[2, 3\]")
    repl.expect(PROMPT)


def test_ir_and_time(repl):
    repl.sendline("kernel sq(input x: f32[N], output y: f32[N]) { y = x * x; }")
    repl.expect(r"^kernel sq")
    repl.sendline(":ir sq")
    repl.expect(r"func @sq\(%x: tensor<\?xf32>\)")
    repl.expect(r"tensor\.mul %x, %x")
    repl.sendline("A = randn(16, 16)")
    repl.expect(r"^A: f32\[16, 16\]")
    repl.sendline(":ir A + A")
    repl.expect(r"func @__wia_eval\(%A: tensor<16x16xf32>\)")
    repl.sendline(":time A + A")
    repl.expect(r"runs\s+min\s+p50\s+p99\s+mean")
    repl.expect(r"interp \(eager\)\s+\d+")
    repl.expect(PROMPT)


def test_tab_completion(repl):
    repl.sendline("my_long_value = randn(3)")
    repl.expect(r"^my_long_value: f32\[3\]")
    repl.send("reduce_sum(my_lo\t")
    repl.expect(r"my_long_value")
    repl.sendline(")")
    repl.expect(r"^f32\n")
    repl.send(":ti\t")
    repl.expect(r"wia> :time")
    repl.sendline("my_long_value")
    repl.expect(r"p50")
    repl.send("import nn;\r")
    repl.expect(r"^import nn")
    repl.send("nn.soft\t")
    repl.expect(r"nn\.softmax")
    repl.sendline("(my_long_value)")
    repl.expect(r"^f32\[3\]")
    repl.expect(PROMPT)


def test_history_is_saved(tmp_path):
    history = tmp_path / "hist"
    proc = PtyProcess(["--repl"], env={"WIADSL_HISTORY": str(history)})
    proc.expect(PROMPT)
    proc.sendline("x = arange(4)")
    proc.expect(r"^x: i64\[4\]")
    proc.sendline(":quit")
    assert proc.proc.wait(timeout=120) == 0
    proc.close()
    assert "x = arange(4)" in history.read_text()


def test_ctrl_c_cancels_an_unfinished_entry(repl):
    repl.sendline("kernel broken(input x: f32[N], output y: f32[N]) {")
    repl.expect(MORE)
    # not a fixed pause: Ctrl-C once the REPL is blocked reading the next line
    repl.interrupt(r"\(cancelled\)")
    repl.expect(PROMPT)
    repl.sendline("1 + 2")
    repl.expect(r"^i64 \(weak\)\n3")
    repl.expect(PROMPT)


def test_python_m_wiadsl_without_arguments_is_the_repl(tmp_path):
    proc = PtyProcess([], env={"WIADSL_HISTORY": str(tmp_path / "h")})
    proc.expect(PROMPT)
    proc.sendline(":help")
    proc.expect(r":passes")
    assert proc.close() == 0
