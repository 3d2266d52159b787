"""PassManager, pipeline strings, options, statistics and printing."""

from __future__ import annotations

import io

import pytest

from wiadsl.diagnostics import WiaUsageError
from wiadsl.passes import PASSES, default_pipeline, parse_pipeline
from wiadsl.passes.fuse import Fuse

from .helpers import run_pipeline

IR = """func @f(%x: f32) -> f32 {
^entry:
  %a = arith.neg %x : f32
  %b = arith.neg %a : f32
  %c = arith.exp %x : f32
  return %b : f32
}"""


def test_parse_pipeline_with_options() -> None:
    passes = parse_pipeline("inline, fuse{max_inputs=4,row_limit=128}, shape-specialize{shapes=3x5,7}")
    assert [p.name for p in passes] == ["inline", "fuse", "shape-specialize"]
    assert passes[1] == Fuse(max_inputs=4, row_limit=128)
    assert passes[2].shapes == "3x5,7"  # type: ignore[attr-defined]
    assert passes[1].spec() == "fuse{max_inputs=4,row_limit=128}"


@pytest.mark.parametrize("text, message", [
    ("inline,frobnicate", "unknown pass 'frobnicate'"),
    ("fuse{max_input=3}", "has no option 'max_input'"),
    ("fuse{max_inputs=x}", "must be int"),
    ("fuse{horizontal=maybe}", "true or false"),
    ("fuse{max_inputs=3", "unbalanced"),
])
def test_pipeline_errors(text: str, message: str) -> None:
    with pytest.raises(WiaUsageError, match=message):
        parse_pipeline(text)


def test_default_pipelines_parse() -> None:
    for level in range(4):
        parse_pipeline(default_pipeline(level))
    with pytest.raises(WiaUsageError):
        default_pipeline(4)
    assert set(PASSES) >= {"inline", "canonicalize", "sccp", "cse", "dce", "simplify-cfg", "licm",
                           "shape-specialize", "bn-fold", "fuse", "patterns", "plan-memory"}


def test_print_after_and_statistics_and_timing() -> None:
    stream = io.StringIO()
    _, pm = run_pipeline(IR, "canonicalize,dce", print_ir_after={"dce"}, time_passes=True,
                         stream=stream)
    text = stream.getvalue()
    assert "IR Dump After dce" in text and "IR Dump After canonicalize" not in text
    assert "Pass execution timing report" in text and "canonicalize" in pm.timing_report()
    stats = pm.statistics()
    assert stats["canonicalize"]["ops removed"] == 3


def test_print_after_change_only_prints_changes() -> None:
    stream = io.StringIO()
    run_pipeline(IR, "cse,canonicalize", print_ir_after_change=True, stream=stream)
    assert "After canonicalize" in stream.getvalue() and "After cse" not in stream.getvalue()


def _break_simplify_cfg(monkeypatch) -> None:
    """``simplify-cfg`` (-O1's last pass) leaves a use before its definition (the
    verifier's dominance check)."""
    cls = PASSES["simplify-cfg"]
    original = cls.run

    def broken(self, module, ctx) -> None:
        original(self, module, ctx)
        ops = module.funcs[0].body.blocks[0].ops
        ops.insert(0, ops.pop(len(ops) - 2))  # the op before the return moves to the front
    monkeypatch.setattr(cls, "run", broken)


BROKEN = """
func @f(%a: tensor<4xf32>) -> tensor<4xf32> attributes {kernel, outputs = ["y"]} {
^entry:
  %b = tensor.add %a, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %c = tensor.mul %b, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %c : tensor<4xf32>
}
"""


def test_the_jit_verifies_its_passes_once_and_names_the_pass_on_request(monkeypatch) -> None:
    from wiadsl.backends.llvm.compile import tensor_passes
    from wiadsl.diagnostics import WiaIRError
    from wiadsl.ir import parse_module

    _break_simplify_cfg(monkeypatch)
    monkeypatch.delenv("WIADSL_VERIFY_EACH", raising=False)
    with pytest.raises(WiaIRError, match="after the -O1 passes"):
        tensor_passes(parse_module(BROKEN), 1)
    monkeypatch.setenv("WIADSL_VERIFY_EACH", "1")
    with pytest.raises(WiaIRError, match="after pass 'simplify-cfg'"):
        tensor_passes(parse_module(BROKEN), 1)
