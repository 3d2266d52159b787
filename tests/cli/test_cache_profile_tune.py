"""`wiac cache ...`, `--run --profile [--plot]` and `--autotune` (issue 9's command line)."""

from __future__ import annotations

import pytest


def test_cache_info_and_clear_use_the_given_folder(wiac, tmp_path):
    env = {"WIADSL_CACHE_DIR": str(tmp_path / "c")}
    proc = wiac("cache", "info", env=env)
    assert proc.returncode == 0, proc.err
    assert str(tmp_path / "c") in proc.out
    proc = wiac("cache", "clear", env=env)
    assert proc.returncode == 0, proc.err


def test_cache_without_a_verb_is_a_usage_error(wiac):
    proc = wiac("cache", "frobnicate")
    assert proc.returncode == 2 and "wiac cache info" in proc.err


def test_profile_prints_a_roofline_table_and_latencies(wiac, example, tmp_path):
    proc = wiac(example("matmul.wia"), "-D", "M=33", "-D", "K=17", "-D", "N=9", "--run",
                "--profile", env={"WIADSL_CACHE_DIR": str(tmp_path)})
    assert proc.returncode == 0, proc.err
    assert "eager (interpreter, op by op) vs compiled" in proc.out
    assert "matmul" in proc.out and ("memory" in proc.out or "compute" in proc.out)


def test_profile_plot_writes_pngs(wiac, example, tmp_path):
    pytest.importorskip("matplotlib", reason="the plot extra is not installed")
    png = tmp_path / "roof.png"
    proc = wiac(example("matmul.wia"), "-D", "M=16", "-D", "K=16", "-D", "N=16", "--run",
                "--profile", "--plot", str(png), env={"WIADSL_CACHE_DIR": str(tmp_path)})
    assert proc.returncode == 0, proc.err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_profile_is_a_usage_error(wiac, example):
    proc = wiac(example("matmul.wia"), "--plot", "x.png")
    assert proc.returncode == 2


def test_autotune_reports_the_best_config(wiac, example, tmp_path):
    proc = wiac(example("matmul.wia"), "-D", "M=48", "-D", "K=48", "-D", "N=48",
                "--autotune", env={"WIADSL_CACHE_DIR": str(tmp_path)})
    assert proc.returncode == 0, proc.err
    assert "speedup" in (proc.out + proc.err).lower()
