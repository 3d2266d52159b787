"""README.md runs as written: every command of its ``sh`` blocks, its Python blocks
and its REPL transcript, in a fresh directory holding what they read (the
examples, and a small model.onnx), and its links stay inside the repository."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from .conftest import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
#: the set-up commands: they install the package and run the whole suite
NOT_RUN = ("python3 -m pip install", "python3 -m pytest")


def fenced(text: str) -> list[tuple[str, str]]:
    """Every fenced block of ``text``: (its language tag, its text)."""
    found, lang, body = [], None, []
    for line in text.splitlines():
        if line.startswith("```"):
            if lang is None:
                lang, body = line[3:].strip(), []
            else:
                found.append((lang, "\n".join(body) + "\n"))
                lang = None
        elif lang is not None:
            body.append(line)
    return found


def blocks(lang: str) -> list[str]:
    return [body for tag, body in fenced(README) if tag == lang]


def commands(block: str) -> list[str]:
    """The block's command lines, without the set-up ones (``a && b`` keeps ``b``)."""
    out = []
    for line in block.splitlines():
        parts = [p.strip() for p in line.split(" && ") if p.strip()]
        out += [p for p in parts if not p.startswith(NOT_RUN)]
    return out


def write_model(path: Path) -> None:
    """x[batch, 4] @ W[4, 8] -> relu, the kind of model the README's commands take."""
    from onnx import TensorProto, helper, numpy_helper, save

    w = np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
        "net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8])],
        [numpy_helper.from_array(w, "W")])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


@pytest.fixture
def workdir(tmp_path):
    pytest.importorskip("onnx", reason="the README's ONNX commands need the onnx extra")
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    write_model(tmp_path / "model.onnx")
    return tmp_path


def shell(command: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "WIADSL_DEBUG"}
    env.update(PYTHONPATH=str(ROOT), WIADSL_CACHE_DIR=str(cwd / "cache"), MPLBACKEND="Agg")
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True,
                          text=True, input=stdin, timeout=900)


def test_the_readme_has_commands():
    assert len(blocks("sh")) == 3
    assert sum(len(commands(b)) for b in blocks("sh")) >= 15


@pytest.mark.parametrize("index", range(len(blocks("sh"))))
def test_every_readme_command_runs_as_written(workdir, index):
    for command in commands(blocks("sh")[index]):
        proc = shell(command, workdir)
        assert proc.returncode == 0, f"{command}\n{proc.stderr}"
        assert "Traceback" not in proc.stderr, f"{command}\n{proc.stderr}"


def test_the_readme_python_runs(workdir):
    program = "\n".join(blocks("python"))
    proc = shell(f"{sys.executable} -", workdir, stdin=program)
    assert proc.returncode == 0, proc.stderr
    assert "<wiadsl kernel matmul(A: f32[M, K], B: f32[K, N]) -> (C: f32[M, N]) target=cpu>" \
        in proc.stdout


def test_the_readme_repl_transcript(workdir):
    transcript = next(b for b in blocks("") if "wia> " in b)
    rows = transcript.splitlines()
    typed = [r[5:] for r in rows if r.startswith(("wia> ", "...> "))]
    shown = [r for r in rows if not r.startswith(("wia> ", "...> "))]
    proc = shell("wiac --repl", workdir, stdin="\n".join(typed) + "\n")
    assert proc.returncode == 0, proc.stderr
    for line in shown:
        assert line in proc.stdout, f"the README shows {line!r}; the session printed\n{proc.stdout}"


def test_readme_links_stay_in_the_repository():
    for target in re.findall(r"\]\(([^)]+)\)", README):
        assert not target.startswith(("../", "/")), target
        if not target.startswith(("http://", "https://", "#")):
            assert (ROOT / target).exists(), target
    assert "../" not in README
