"""Remarks carry source spans and render like diagnostics; passes keep ``loc``."""

from __future__ import annotations

import pathlib

import pytest

from wiadsl.diagnostics import SourceFile, Span
from wiadsl.frontend.compile import compile_to_ir
from wiadsl.ir import parse_module
from wiadsl.ir.core import walk_nested
from wiadsl.passes import Remark, format_remarks, optimize

ROOT = pathlib.Path(__file__).resolve().parents[2]

SOURCE = """kernel dense(input x: f32[4, 8], input w: f32[8, 3], input b: f32[3],
             output y: f32[4, 3]) {
    h = x @ w + b;
    y = relu(h);
}
"""


def test_remarks_point_at_source_with_a_caret() -> None:
    module = compile_to_ir(SOURCE, "dense.wia")
    remarks: list[Remark] = []
    optimize(module, 2, remarks=remarks)
    text = format_remarks(remarks)
    lines = text.splitlines()
    head = next(i for i, ln in enumerate(lines) if "remark: fused" in ln)
    assert lines[head].startswith("dense.wia:3:9: remark: fused ")
    assert lines[head].endswith("into matmul_bias_relu_fused")
    assert lines[head + 1] == "        h = x @ w + b;"
    assert lines[head + 2] == "            ^^^^^"  # the span of 'x @ w' (the product, the root)


def test_format_remarks_orders_by_position_and_drops_repeats() -> None:
    src = SourceFile("k.wia", "a = 1;\nbb = 2;\n")
    late, early = Span(src, 2, 1, 2, 3), Span(src, 1, 1, 1, 2)
    rs = [Remark("missed", "two", "fuse", late), Remark("fused", "one", "fuse", early),
          Remark("missed", "two", "fuse", late), Remark("analysis", "no loc", "plan-memory", None, "%0 = x")]
    text = format_remarks(rs)
    assert text == ("k.wia:1:1: remark: one\n    a = 1;\n    ^\n"
                    "k.wia:2:1: remark: two\n    bb = 2;\n    ^^\n"
                    "remark: no loc\n    at: %0 = x\n")


def test_hand_set_loc_survives_fusion() -> None:
    m = parse_module("""func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
^entry:
  %a = tensor.exp %x : tensor<4xf32>
  %b = tensor.neg %a : tensor<4xf32>
  return %b : tensor<4xf32>
}""")
    src = SourceFile("h.wia", "y = -exp(x);\n")
    span_exp, span_neg = Span(src, 1, 6, 1, 12), Span(src, 1, 5, 1, 12)
    ops = m["f"].entry.ops
    ops[0].loc, ops[1].loc = span_exp, span_neg
    remarks: list[Remark] = []
    optimize(m, pipeline="fuse", remarks=remarks)
    fused = m["f"].entry.ops[0]
    assert fused.name == "tensor.fused_elementwise" and fused.loc is span_neg  # the root's
    body = fused.regions[0].blocks[0].ops
    assert [o.loc for o in body] == [span_exp, span_neg, span_neg]  # exp, neg, yield
    assert format_remarks(remarks).startswith("h.wia:1:5: remark: fused %a, %b into exp_neg_fused")


# -O3 runs every pass; the second pipeline lets passes that -O3 runs late act first.
PIPELINES = ["-O3", "inline,sccp,licm,patterns,fuse,simplify-cfg,bn-fold,cse"]


@pytest.mark.parametrize("path", sorted((ROOT / "examples").glob("*.wia")), ids=lambda p: p.stem)
def test_every_pass_keeps_locations(path: pathlib.Path) -> None:
    for pipeline in PIPELINES:
        module = compile_to_ir(path.read_text(), str(path))
        for f in module:  # the lowering leaves a few ops (returns) unlocated: stamp them
            for op in walk_nested(f.blocks):
                op.loc = op.loc if op.loc is not None else "stamped"
        if pipeline.startswith("-O"):
            optimize(module, int(pipeline[2:]))
        else:
            optimize(module, pipeline=pipeline)
        lost = [op.name for f in module for op in walk_nested(f.blocks) if op.loc is None]
        assert not lost, f"{pipeline} dropped the loc of {lost}"
