"""Issue 20, the command line: nothing is silently ignored, file-system errors name
the path (exit 1), and long or binary source lines are cut around the caret."""

from __future__ import annotations

import pytest

KERNEL = "kernel k(input x: f32[N], output y: f32[N]) {\n    y = x + 1.0;\n}\n"


def write(tmp_path, name: str, data: str | bytes):
    path = tmp_path / name
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data)
    return str(path)


def test_unknown_output_extension_lists_the_known_ones(wiac, example, tmp_path):
    out = tmp_path / "mm.txt"
    proc = wiac(example("matmul.wia"), "-o", str(out))
    assert proc.returncode == 1, proc.err
    assert "'.txt'" in proc.err and ".ll (llvm)" in proc.err and "--emit" in proc.err
    assert not out.exists()


def test_wia_extension_writes_canonical_source(wiac, example, tmp_path):
    out = tmp_path / "mm.wia"
    proc = wiac(example("matmul.wia"), "-o", str(out))
    assert proc.returncode == 0, proc.err
    assert out.read_text().startswith("kernel matmul(")



def test_plot_into_a_missing_directory_is_a_user_error(wiac, example, tmp_path):
    target = tmp_path / "missing" / "x.png"
    proc = wiac(example("matmul.wia"), "-D", "M=4", "-D", "K=4", "-D", "N=4", "--run",
                "--profile", "--plot", str(target))
    if "matplotlib" in proc.err:
        pytest.skip("matplotlib is not installed")
    assert proc.returncode == 1, proc.err
    assert "internal compiler error" not in proc.err
    assert str(tmp_path / "missing") in proc.err


def test_an_empty_file_is_an_error(wiac, tmp_path):
    for text in ("", "  \n\n"):
        proc = wiac(write(tmp_path, "empty.wia", text))
        assert proc.returncode == 1 and "is empty" in proc.err, proc.err


def test_an_error_on_a_long_line_shows_a_window(wiac, tmp_path):
    body = "x + " * 2500
    path = write(tmp_path, "long.wia",
                 f"kernel k(input x: f32[N], output y: f32[N]) {{\n  y = {body} @ ;\n}}\n")
    proc = wiac(path)
    assert proc.returncode == 1
    source_line, caret = proc.err.splitlines()[1:3]
    assert len(source_line) < 120 and source_line.strip().startswith("...")
    assert source_line[caret.index("^")] == "@"  # the caret still points at the error


def _widest_line(err: str, path) -> int:
    """The widest line of an error report, its file name counted as one character:
    the temporary folder's name (longer under pytest-xdist) is not what is bounded."""
    return max(len(line) for line in err.replace(str(path), "f").splitlines())


def test_a_binary_file_prints_no_raw_bytes(wiac, tmp_path):
    data = b"kernel k(input x: f32[N], output y: f32[N]) {\n  y = x \x01\x1b[31m" + b"q" * 500
    source = write(tmp_path, "bin.wia", data + b";\n}\n")
    proc = wiac(source)
    assert proc.returncode == 1
    assert "\x1b" not in proc.err and "\x01" not in proc.err
    assert _widest_line(proc.err, source) < 120
    garbage = write(tmp_path, "garbage.wia", bytes(range(256)) * 8)
    proc = wiac(garbage)
    assert proc.returncode == 1
    assert _widest_line(proc.err, garbage) < 120


def test_an_out_of_range_float_literal_is_an_error(wiac, tmp_path):
    proc = wiac(write(tmp_path, "inf.wia", KERNEL.replace("1.0", "1e999")))
    assert proc.returncode == 1
    assert "2:13: error: float literal out of range for f64" in proc.err
    assert "inf" not in proc.out
    assert wiac(write(tmp_path, "ok.wia", KERNEL.replace("1.0", "1e308"))).returncode == 0


def test_autotune_names_the_dims_it_tunes_at_and_prints_once(wiac, example):
    proc = wiac(example("matmul.wia"), "-D", "M=8", "--autotune")
    assert proc.returncode == 0, proc.err
    assert "no -D or --input fixes K, N: tuned at K=7, N=7" in proc.out
    assert (proc.out + proc.err).count("speedup over the default") == 1


def test_a_misspelled_kernel_suggests_the_closest(wiac, example):
    proc = wiac(example("matmul.wia"), "--kernel", "matmull", "--emit", "ptx")
    assert proc.returncode == 1
    assert "did you mean 'matmul'?" in proc.err and "(kernels: matmul)" in proc.err
    proc = wiac("check", example("matmul.wia"), "--kernel", "matmull")
    assert "did you mean 'matmul'?" in proc.err
