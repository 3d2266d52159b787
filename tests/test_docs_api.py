"""docs/api.md covers every public name of ``wiadsl`` and its examples run."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
from pathlib import Path

import wiadsl

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")


def test_every_public_name_is_documented():
    for name in wiadsl.__all__:
        if name == "__version__" or name.startswith("Wia"):
            assert f"`{name}`" in DOC or f"wiadsl.{name}" in DOC, name
        else:
            assert f"## `wiadsl.{name}(" in DOC, f"wiadsl.{name} has no section in docs/api.md"


def test_the_documented_signatures_are_the_real_ones():
    for name in wiadsl.__all__:
        if name.startswith(("Wia", "__")):
            continue
        heading = re.search(rf"^## `wiadsl\.{name}\(([^)]*)\)`", DOC, re.M)
        assert heading, name
        documented = [a.split("=")[0].strip().lstrip("*") for a in heading.group(1).split(",")]
        real = list(inspect.signature(getattr(wiadsl, name)).parameters)
        assert set(real) <= set(documented) | {"options", "args"}, (name, real, documented)


def test_the_api_examples_run():
    program = "\n".join(re.findall(r"^```python\n(.*?)^```", DOC, re.S | re.M))
    assert program
    proc = subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
