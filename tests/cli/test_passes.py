"""The optimization options: -O, -p, --print-ir-after*, --time-passes, --remarks, --patterns."""

from __future__ import annotations

import pytest

from wiadsl.tools.features import available

pytestmark = pytest.mark.skipif(not available("optimize"), reason="the passes are not built yet")


def test_time_passes_table_on_stderr(wiac, example):
    proc = wiac(example("cnn.wia"), "--emit", "opt-ir", "-O3", "--time-passes")
    assert proc.returncode == 0, proc.err
    assert "Pass execution timing report" in proc.err and "fuse" in proc.err
    assert "fused" in proc.out


def test_pipeline_with_print_ir_after_all_defaults_to_opt_ir(wiac, example):
    proc = wiac(example("mlp.wia"), "-p", "inline,canonicalize,cse,dce", "--print-ir-after-all")
    assert proc.returncode == 0, proc.err
    assert proc.err.count("IR Dump After") == 4


def test_print_ir_after_one_pass_and_after_change(wiac, example):
    proc = wiac(example("mlp.wia"), "-O2", "--print-ir-after", "fuse")
    assert proc.returncode == 0, proc.err
    assert proc.err.count("IR Dump After") == 1 and "IR Dump After fuse" in proc.err
    proc = wiac(example("mlp.wia"), "-O2", "--print-ir-after-change")
    assert proc.returncode == 0 and "IR Dump After inline" in proc.err


def test_remarks(wiac, example):
    proc = wiac(example("mlp.wia"), "--remarks")
    assert proc.returncode == 0, proc.err
    # file:line:col: remark: ... with the source line and a caret, like a diagnostic
    assert "mlp.wia:" in proc.err and ": remark: " in proc.err and "^" in proc.err


def test_unknown_pass_is_a_user_error(wiac, example):
    proc = wiac(example("mlp.wia"), "-p", "inline,frobnicate")
    assert proc.returncode == 1 and "unknown pass 'frobnicate'" in proc.err


def test_missing_patterns_file(wiac, example):
    proc = wiac(example("mlp.wia"), "--patterns", "no_such.pat")
    assert proc.returncode == 1 and "cannot read 'no_such.pat'" in proc.err


def test_pass_options_ignored_by_a_frontend_stage_warn(wiac, example):
    proc = wiac(example("matmul.wia"), "--emit", "ir", "--time-passes")
    assert proc.returncode == 0
    assert "warning: --time-passes has no effect with --emit ir" in proc.err


def test_O0_and_O3_differ(wiac, example):
    o0 = wiac(example("mlp.wia"), "-O0").out
    o3 = wiac(example("mlp.wia"), "-O3").out
    assert "func.call" in o0 and "fused_matmul" in o3
