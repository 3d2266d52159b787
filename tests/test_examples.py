"""Every examples/*.py script runs as a user would run it and reports success."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "examples").glob("*.py"))


def test_every_wia_example_has_a_script():
    wia = {p.stem for p in (ROOT / "examples").glob("*.wia")}
    assert wia <= {p.stem for p in SCRIPTS}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_example_script_prints_ok(script):
    proc = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"{script.stem} OK" in proc.stdout.splitlines(), proc.stdout[-2000:]
