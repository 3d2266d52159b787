"""Every error class of the command line: exit status, message, never a traceback.

1 = an error in the program or its inputs, 2 = a malformed command line,
3 = an internal compiler error (a banner; the traceback only with WIADSL_DEBUG=1).
"""

from __future__ import annotations

import sys

import pytest

from .conftest import ROOT, run_wiac


def test_source_error_has_location_and_caret(wiac):
    proc = wiac(str(ROOT / "tests" / "cli" / "data" / "bad_matmul.wia"))
    assert proc.returncode == 1 and proc.out == ""
    lines = proc.err.splitlines()
    assert lines[0].endswith("bad_matmul.wia:4:11: error: shape mismatch in '@': "
                             "A is f32[4, 3], x is f32[5]")
    assert lines[1] == "        y = A @ x;" and lines[2] == "              ^"


def test_several_errors_are_all_reported(wiac, tmp_path):
    path = tmp_path / "two.wia"
    path.write_text("kernel k(input x: f32, output y: f32) {\n  a = p;\n  y = q;\n}\n")
    proc = wiac(str(path))
    assert proc.returncode == 1
    assert "unknown name 'p'" in proc.err and "unknown name 'q'" in proc.err


def test_syntax_error(wiac):
    proc = wiac("-", stdin="kernel k(output y: f32) { y = 1.0 }\n")
    assert proc.returncode == 1 and "<stdin>:1:" in proc.err and "error:" in proc.err


def test_invalid_utf8_is_located(wiac, tmp_path):
    path = tmp_path / "bad.wia"
    path.write_bytes(b"kernel k(output y: f32) {\n  y = 1.0; // \xff\n}\n")
    proc = wiac(str(path))
    assert proc.returncode == 1 and "bad.wia:2:15: error: invalid UTF-8 byte 0xff" in proc.err


def test_missing_file(wiac):
    proc = wiac("no_such_file.wia")
    assert proc.returncode == 1
    assert proc.err.strip() == "wiac: error: cannot read 'no_such_file.wia': No such file or directory"


def test_directory_as_file(wiac, tmp_path):
    proc = wiac(str(tmp_path))
    assert proc.returncode == 1 and "is a directory" in proc.err


@pytest.mark.parametrize("args,message", [
    (["--frobnicate", "x.wia"], "unrecognized arguments"),
    (["x.wia", "--emit", "bogus"], "invalid choice"),
    (["x.wia", "-O7"], "invalid choice"),
    (["x.wia", "--target", "tpu"], "invalid choice"),
    (["--emit", "ir"], "no input file"),
    (["x.wia", "-D", "M"], "-D expects NAME=EXTENT"),
    (["x.wia", "-D", "M=abc"], "must be an integer"),
    (["x.wia", "-D", "M=1", "-D", "M=2"], "given twice"),
    (["x.wia", "--input", "A=a.npy"], "--input needs --run"),
    (["x.wia", "--run", "--emit", "ir"], "exclude each other"),
    (["x.wia", "--array", "12"], "--array expects ROWSxCOLS"),
    (["check"], "the following arguments are required"),
    (["check", "x.wia", "--targets", "interp,tpu"], "unknown tpu"),
])
def test_usage_errors_exit_2(capsys, example, args, message):
    # In-process (the same ``main`` the subprocess runs) to keep the suite fast.
    from wiadsl.tools.cli import main

    args = [example("matmul.wia") if a == "x.wia" else a for a in args]
    try:
        status = main(args)
    except SystemExit as exc:  # argparse's own errors
        status = exc.code
    err = capsys.readouterr().err
    assert status == 2, (status, err)
    assert message in err and "Traceback" not in err


def test_usage_error_as_a_subprocess(wiac, example):
    proc = wiac(example("matmul.wia"), "--emit", "bogus")
    assert proc.returncode == 2 and "wiac: error: argument --emit" in proc.err
    proc = wiac(example("matmul.wia"), "-D", "M")
    assert proc.returncode == 2 and "wiac: error: -D expects NAME=EXTENT" in proc.err


_BOOM = ("import sys\n"
         "from wiadsl.tools import emit\n"
         "def boom(job):\n"
         "    raise ZeroDivisionError('boom')\n"
         "emit.EMITTERS['ir'] = emit.Emitter('ir', boom, 'crash')\n"
         "from wiadsl.tools.cli import main\n"
         "sys.exit(main([sys.argv[1]]))\n")


def _crash(env: dict[str, str]):
    import os
    import subprocess

    full = {k: v for k, v in os.environ.items() if k != "WIADSL_DEBUG"}
    full.update({"PYTHONPATH": str(ROOT), **env})
    return subprocess.run([sys.executable, "-c", _BOOM, str(ROOT / "examples" / "matmul.wia")],
                          capture_output=True, text=True, env=full, timeout=60)


def test_internal_error_banner_without_traceback():
    proc = _crash({})
    assert proc.returncode == 3
    assert "wiac: internal compiler error: ZeroDivisionError: boom" in proc.stderr
    assert "WIADSL_DEBUG=1" in proc.stderr and "Traceback" not in proc.stderr


def test_internal_error_traceback_with_debug():
    proc = _crash({"WIADSL_DEBUG": "1"})
    assert proc.returncode == 3
    assert "internal compiler error" in proc.stderr and "Traceback" in proc.stderr


def test_python_m_wiadsl_is_wiac():
    proc = run_wiac("--version")
    assert proc.returncode == 0 and "wiac" in proc.out
