"""Helpers of the lowering tests: source in, verified IR text out, CHECK lines matched."""

from __future__ import annotations

from wiadsl.frontend.compile import compile_to_ir
from wiadsl.ir import parse_module, print_module, verify
from wiadsl.testing.filecheck import filecheck

#: A numbered SSA value in CHECK patterns (``%12``).
NUM = "{{%[0-9]+}}"


def lower(src: str, kernel: str | None = None, filename: str = "<test>") -> str:
    """The printed IR of ``src`` (verified by ``compile_to_ir``); it must round-trip."""
    module = compile_to_ir(src, filename, kernel)
    text = print_module(module)
    reparsed = parse_module(text)
    verify(reparsed)
    assert print_module(reparsed) == text, "print -> parse -> print changed the IR"
    return text


def check(src: str, checks: str, kernel: str | None = None) -> str:
    """Lower ``src`` and match the IR against ``checks``; returns the IR text."""
    text = lower(src, kernel)
    filecheck(text, checks)
    return text
