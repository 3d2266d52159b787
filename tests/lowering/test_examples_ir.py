"""Every example's IR verifies and round-trips through the IR printer and parser."""

from __future__ import annotations

from pathlib import Path

import pytest

from wiadsl.frontend.compile import compile_source, compile_to_ir
from wiadsl.ir import parse_module, print_module, verify

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.wia"))


def test_there_are_examples():
    assert len(EXAMPLES) >= 8


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_ir_verifies_and_round_trips(path):
    module = compile_to_ir(path.read_text(), str(path))  # verifies
    text = print_module(module)
    reparsed = parse_module(text, filename=f"{path.stem}.ir")
    verify(reparsed)
    assert print_module(reparsed) == text
    kernels = [f for f in reparsed if f.attributes.get("kernel")]
    assert {f.name for f in kernels} == {k.name for k in compile_source(
        path.read_text(), str(path)).kernels}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_each_kernel_lowers_alone(path):
    compiled = compile_source(path.read_text(), str(path))
    for k in compiled.kernels:
        module = compiled.lower_kernel(k.name)
        assert module[k.name].attributes["kernel"] is True
        text = print_module(module)
        assert print_module(parse_module(text)) == text
