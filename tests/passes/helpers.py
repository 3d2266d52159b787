"""Run one pipeline on IR text and FileCheck the printed result."""

from __future__ import annotations

from wiadsl.ir import parse_module, print_module, verify
from wiadsl.passes import PassManager
from wiadsl.testing.filecheck import filecheck


def run_pipeline(ir: str, pipeline: str, **options) -> tuple[str, PassManager]:
    module = parse_module(ir)
    verify(module)
    pm = PassManager(pipeline, **options)
    pm.run(module)
    return print_module(module), pm


def check(ir: str, pipeline: str, checks: str) -> str:
    out, _ = run_pipeline(ir, pipeline)
    filecheck(out, checks)
    return out
