"""``wiac FILE [--emit STAGE] [-o OUT]``: stages, files, stdin/stdout, backends."""

from __future__ import annotations

import json

import pytest

from wiadsl.tools.features import available

MATMUL_IR_HEAD = "func @matmul(%A: tensor<?x?xf32>, %B: tensor<?x?xf32>)"


def test_version(wiac):
    proc = wiac("--version")
    assert proc.returncode == 0 and proc.out.startswith("wiac 0.1.0")


def test_help_shows_usage_examples_and_exit_statuses(wiac):
    proc = wiac("--help")
    assert proc.returncode == 0
    for text in ("wiac check", "--emit", "-O N", "--print-ir-after-all", "--run", "-D DIM=N",
                 "examples:", "exit status", "internal compiler error"):
        assert text in proc.out, text


def test_default_emit_is_ir(wiac, example):
    proc = wiac(example("matmul.wia"))
    assert proc.returncode == 0, proc.err
    assert proc.out.startswith(MATMUL_IR_HEAD) and proc.err == ""


def test_emit_tokens(wiac, example):
    proc = wiac(example("matmul.wia"), "--emit", "tokens")
    assert proc.returncode == 0
    assert "4:1\tKERNEL\t'kernel'" in proc.out


def test_emit_ast(wiac, example):
    proc = wiac(example("block.wia"), "--emit", "ast")
    assert proc.returncode == 0
    assert "Import module='nn' @5:1" in proc.out and "Kernel name='block'" in proc.out


def test_kernel_selects_one(wiac, example):
    proc = wiac(example("layernorm_softmax.wia"), "--kernel", "ln_log_softmax")
    assert proc.returncode == 0
    assert "@ln_log_softmax" in proc.out and "func @ln_softmax(" not in proc.out


def test_unknown_kernel_lists_kernels(wiac, example):
    proc = wiac(example("matmul.wia"), "--kernel", "nope")
    assert proc.returncode == 1
    assert "no kernel named 'nope'" in proc.err and "matmul" in proc.err


def test_stdin_and_stdout_dash(wiac, example):
    text = open(example("matmul.wia"), encoding="utf-8").read()
    proc = wiac("-", "-o", "-", stdin=text)
    assert proc.returncode == 0 and proc.out.startswith(MATMUL_IR_HEAD)


def test_stdin_errors_name_stdin(wiac):
    proc = wiac("-", stdin="kernel k(output y: f32) { y = z; }\n")
    assert proc.returncode == 1
    assert proc.err.startswith("<stdin>:1:31: error: unknown name 'z'")


def test_output_file(wiac, example, tmp_path):
    out = tmp_path / "matmul.txt"
    proc = wiac(example("matmul.wia"), "--emit", "ir", "-o", str(out))
    assert proc.returncode == 0 and proc.out == ""
    assert out.read_text().startswith(MATMUL_IR_HEAD)


def test_unwritable_output_is_a_user_error(wiac, example, tmp_path):
    proc = wiac(example("matmul.wia"), "-o", str(tmp_path / "no" / "such" / "dir.ir"))
    assert proc.returncode == 1 and "cannot write" in proc.err


@pytest.mark.skipif(not available("optimize"), reason="the passes are not built yet")
def test_opt_ir_from_extension(wiac, example, tmp_path):
    out = tmp_path / "k.ir"
    proc = wiac(example("matmul.wia"), "-o", str(out), "-O3")
    assert proc.returncode == 0, proc.err
    assert "func @matmul" in out.read_text()


@pytest.mark.skipif(available("optimize"), reason="the passes are built")
def test_opt_ir_without_passes_says_not_available(wiac, example):
    proc = wiac(example("matmul.wia"), "--emit", "opt-ir")
    assert proc.returncode == 1
    assert "not available in this build: the optimization passes" in proc.err


def test_O0_opt_ir_equals_lowered_ir(wiac, example):
    lowered = wiac(example("conditional.wia")).out
    proc = wiac(example("conditional.wia"), "--emit", "opt-ir", "-O0")
    assert proc.returncode == 0, proc.err
    assert proc.out == lowered


def test_static_target_names_missing_dims(wiac, example):
    proc = wiac(example("matmul.wia"), "-D", "M=64", "--emit", "sasm")
    assert proc.returncode == 1
    assert "needs static shapes" in proc.err and "K, N" in proc.err and "-D K=128" in proc.err


def test_define_of_unknown_dim_is_an_error(wiac, example, tmp_path):
    proc = wiac(example("matmul.wia"), "-D", "Q=3", "-o", str(tmp_path / "m.sasm"))
    assert proc.returncode == 1 and "has no such dim" in proc.err and "M, K, N" in proc.err


def test_backend_emit_writes_every_kernel(wiac, example):
    proc = wiac(example("layernorm_softmax.wia"), "--emit", "ptx")
    assert proc.returncode == 0, proc.err
    assert "kernels 'ln_softmax', 'ln_log_softmax'" in proc.out.splitlines()[0]


@pytest.mark.skipif(not available("ptx") or not available("optimize"),
                    reason="the PTX backend or the passes are not built yet")
def test_ptx_file_and_launch_plan(wiac, example, tmp_path):
    out = tmp_path / "matmul.ptx"
    proc = wiac(example("matmul.wia"), "-o", str(out))
    assert proc.returncode == 0, proc.err
    assert ".target sm_80" in out.read_text()
    json.loads((tmp_path / "matmul.ptx.json").read_text())


@pytest.mark.skipif(available("ptx"), reason="the PTX backend is built")
def test_ptx_not_available(wiac, example):
    proc = wiac(example("matmul.wia"), "--emit", "ptx", "-O0")
    assert proc.returncode == 1 and "not available in this build: the PTX backend" in proc.err


@pytest.mark.skipif(not available("sasm") or not available("optimize"),
                    reason="the systolic backend or the passes are not built yet")
def test_sasm_with_static_dims(wiac, example, tmp_path):
    out = tmp_path / "m.sasm"
    proc = wiac(example("matmul.wia"), "-D", "M=16", "-D", "K=16", "-D", "N=16",
                "--array", "8x8", "-o", str(out))
    assert proc.returncode == 0, proc.err
    assert out.read_text().strip()


@pytest.mark.skipif(not available("llvm") or not available("optimize"),
                    reason="the LLVM backend or the passes are not built yet")
@pytest.mark.parametrize("suffix,marker", [(".ll", "define"), (".s", "")])
def test_llvm_and_asm(wiac, example, tmp_path, suffix, marker):
    out = tmp_path / f"m{suffix}"
    proc = wiac(example("matmul.wia"), "-D", "M=8", "-D", "K=8", "-D", "N=8", "-o", str(out))
    assert proc.returncode == 0, proc.err
    assert marker in out.read_text()
