"""Run ``wiac`` as users do: a subprocess (``python -m wiadsl``), checked by exit status
and output. Every call also asserts that no Python traceback reached stderr unless
the test asks for one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def run_wiac(*args: str, stdin: bytes | str | None = None, cwd: Path | None = None,
             env: dict[str, str] | None = None, allow_traceback: bool = False
             ) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if k != "WIADSL_DEBUG"}
    full_env.update({"PYTHONPATH": str(ROOT), **(env or {})})
    data = stdin.encode() if isinstance(stdin, str) else stdin
    proc = subprocess.run([sys.executable, "-m", "wiadsl", *args], input=data,
                          capture_output=True, cwd=cwd or ROOT, env=full_env, timeout=120)
    proc.out = proc.stdout.decode("utf-8", "replace")  # type: ignore[attr-defined]
    proc.err = proc.stderr.decode("utf-8", "replace")  # type: ignore[attr-defined]
    if not allow_traceback:
        assert "Traceback" not in proc.err, proc.err
    return proc


@pytest.fixture
def wiac():
    return run_wiac


@pytest.fixture
def example():
    return lambda name: str(EXAMPLES / name)
