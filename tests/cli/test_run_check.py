"""``wiac --run`` (kernels on .npy files) and ``wiac check`` (backends against the
interpreter, ``--bisect``)."""

from __future__ import annotations

import numpy as np
import pytest

from wiadsl.tools.check import KernelReport, Row, compare, format_report
from wiadsl.tools.features import available

from .conftest import ROOT

SCALE = str(ROOT / "tests" / "cli" / "data" / "scale.wia")


@pytest.fixture
def arrays(tmp_path):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((4, 2)).astype(np.float32)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    return tmp_path, a, b


def test_run_prints_results(wiac, example, arrays):
    tmp, a, b = arrays
    proc = wiac(example("matmul.wia"), "--run", "--target", "interp", "--input", f"A={tmp / 'a.npy'}",
                "--input", f"B={tmp / 'b.npy'}")
    assert proc.returncode == 0, proc.err
    assert proc.out.startswith("C: f32[3, 2]\n[[")


def test_run_writes_npz(wiac, example, arrays):
    tmp, a, b = arrays
    out = tmp / "c.npz"
    proc = wiac(example("matmul.wia"), "--run", "--input", f"A={tmp / 'a.npy'}",
                "--input", f"B={tmp / 'b.npy'}", "-o", str(out))
    assert proc.returncode == 0, proc.err
    with np.load(out) as got:
        np.testing.assert_allclose(got["C"], a @ b, rtol=1e-5, atol=1e-6)


def test_run_scalar_input_and_two_outputs(wiac, arrays):
    tmp, a, _ = arrays
    out = tmp / "r.npz"
    proc = wiac(SCALE, "--run", "--input", f"X={tmp / 'a.npy'}", "--input", "alpha=0.5",
                "-o", str(out))
    assert proc.returncode == 0, proc.err
    with np.load(out) as got:
        np.testing.assert_allclose(got["Y"], a * 0.5, rtol=1e-6)
        np.testing.assert_allclose(got["S"], (a * 0.5).sum(), rtol=1e-4)


def test_run_two_outputs_to_npy_is_an_error(wiac, arrays):
    tmp, _, _ = arrays
    proc = wiac(SCALE, "--run", "--target", "interp", "--input", f"X={tmp / 'a.npy'}",
                "--input", "alpha=2",
                "-o", str(tmp / "r.npy"))
    assert proc.returncode == 1 and "write them to a .npz file" in proc.err


@pytest.mark.parametrize("inputs,message", [
    (["A=a.npy"], "missing input(s) 'B'"),
    (["A=a.npy", "B=a.npy"], "dim 'K' is 4"),
    (["A=a.npy", "B=missing.npy"], "cannot read"),
    (["A=a.npy", "B=b.npy", "Z=1.0"], "unknown argument 'Z'"),
])
def test_run_argument_errors(wiac, example, arrays, inputs, message):
    tmp, _, _ = arrays
    args = [x for item in inputs for x in ("--input", item)]
    proc = wiac(example("matmul.wia"), "--run", "--target", "interp", *args, cwd=tmp)
    assert proc.returncode == 1, proc.err
    assert message in proc.err


def test_run_runtime_error_is_reported(wiac, arrays):
    tmp, _, _ = arrays
    src = tmp / "idx.wia"
    src.write_text("kernel pick(input x: f32[N], input i: i64, output y: f32) { y = x[i]; }\n")
    np.save(tmp / "x.npy", np.zeros(3, np.float32))
    proc = wiac(str(src), "--run", "--target", "interp", "--input", f"x={tmp / 'x.npy'}", "--input", "i=7")
    assert proc.returncode == 1 and "error:" in proc.err


def test_check_reports_every_backend(wiac, example):
    proc = wiac("check", example("matmul.wia"))
    assert proc.returncode == 0, proc.out + proc.err
    assert "kernel matmul  (M=7 K=7 N=7)" in proc.out
    assert "no -D for M, K, N: using 7" in proc.out
    lines = proc.out.splitlines()
    assert any(line.split()[:2] == ["interp", "C"] and line.endswith("ok") for line in lines)
    for target in ("cpu", "systolic", "cuda"):
        assert any(line.strip().startswith(target) for line in lines), target


def test_check_with_defines_and_one_kernel(wiac, example):
    proc = wiac("check", example("layernorm_softmax.wia"), "-D", "T=5", "-D", "D=9",
                "--kernel", "ln_log_softmax", "--targets", "interp")
    assert proc.returncode == 0, proc.out + proc.err
    assert "kernel ln_log_softmax  (T=5 D=9)" in proc.out and "no -D" not in proc.out
    assert "ln_softmax " not in proc.out


def test_check_of_a_bad_file(wiac):
    proc = wiac("check", str(ROOT / "tests" / "cli" / "data" / "bad_matmul.wia"))
    assert proc.returncode == 1 and "shape mismatch" in proc.err


@pytest.mark.skipif(not available("optimize"), reason="the passes are not built yet")
def test_check_bisect(wiac, example):
    proc = wiac("check", example("conditional.wia"), "--bisect", "--targets", "interp")
    assert proc.returncode == 0, proc.out + proc.err
    assert "bisect:" in proc.out


@pytest.mark.skipif(available("optimize"), reason="the passes are built")
def test_check_bisect_without_passes(wiac, example):
    proc = wiac("check", example("matmul.wia"), "--bisect", "--targets", "interp")
    assert proc.returncode == 1 and "not available in this build" in proc.err


def test_compare_tolerances():
    ref = np.array([1.0, 2.0, np.nan], np.float32)
    assert compare(ref, ref.copy())[2]
    abs_err, rel_err, ok = compare(ref, np.array([1.0, 2.5, np.nan], np.float32))
    assert not ok and abs_err == pytest.approx(0.5) and rel_err == pytest.approx(0.25)
    assert compare(np.array([1, 2]), np.array([1, 2]))[2]
    assert not compare(np.array([1, 2]), np.array([1, 3]))[2]
    assert not compare(np.zeros(2), np.zeros(3))[2]


def test_format_report_table():
    report = KernelReport("k", {"N": 7}, ["N"], [Row("interp", "y", 0.0, 0.0),
                                                 Row("cpu", status="not available: x")])
    text = format_report(report)
    assert text.splitlines()[0] == "kernel k  (N=7)"
    assert "max abs err" in text and "not available: x" in text


def test_fuzz_subcommand_runs_programs_and_reports(wiac, tmp_path):
    proc = wiac("fuzz", "--seed", "5", "--count", "3", "--targets", "cpu-O3",
                "--out", str(tmp_path))
    assert proc.returncode == 0, proc.err + proc.out
    assert "mismatches: 0, crashes: 0" in proc.out + proc.err


def test_fuzz_bad_option_is_usage_error(wiac):
    proc = wiac("fuzz", "--count", "lots")
    assert proc.returncode == 2
