"""The assembler: listings print and parse back unchanged; bad text fails with the line."""

from __future__ import annotations

import pytest

import wiadsl
from wiadsl.backends.systolic import SasmError, emit_sasm, parse_listing
from wiadsl.backends.systolic.check import check_section
from wiadsl.backends.systolic.config import ArrayConfig

SRC = """
import nn;
kernel mlp(input x: f32[B, I], input w1: f32[I, H], input b1: f32[H], input w2: f32[H, O],
           output y: f32[B, O]) {
    h = nn.gelu(x @ w1 + b1);
    y = nn.softmax(h @ w2);
}
kernel conv(input x: i8[N, C, H, W], input w: i8[O, C, 3, 3], output y: i32[N, O, P, Q]) {
    y = conv2d(cast(x, i32), cast(w, i32), stride=2, padding=1);
}
"""
SHAPES = {"mlp": {"x": (7, 33), "w1": (33, 129), "b1": (129,), "w2": (129, 9)},
          "conv": {"x": (1, 3, 9, 9), "w": (8, 3, 3, 3)}}


def _ir(kernel: str):
    return wiadsl.jit(SRC, kernel).ir_for()


@pytest.mark.parametrize("kernel", ["mlp", "conv"])
@pytest.mark.parametrize("dataflow", ["ws", "os", "is"])
def test_round_trip(kernel, dataflow):
    text = emit_sasm(_ir(kernel), kernel, array=(8, 8), dataflow=dataflow, shapes=SHAPES[kernel])
    listing = parse_listing(text)
    assert listing.text() == text
    assert parse_listing(listing.text()) == listing
    assert listing.config == ArrayConfig(8, 8, dataflow, vec_lanes=8)
    for section in listing.sections:
        check_section(section, listing.config)


def test_listing_says_where_ops_run():
    text = emit_sasm(_ir("mlp"), "mlp", array=(8, 8), shapes=SHAPES["mlp"])
    placements = [s.placement for s in parse_listing(text).sections]
    assert placements.count("array") == 2 and "host" not in placements
    assert 'vector "tensor.reduce_max' in text and "vec.rmax" in text  # softmax's row max
    assert "vec.tanh" in text                 # gelu runs on the vector unit


GOOD = """.target rows=4 cols=4 dataflow=ws timing=overlap spad=4096 acc=4096 dma_bw=8 dma_latency=0 vec_lanes=4
.section s0 array "tensor.matmul %C"
.dram A i8 [2, 3] in
.dram B i8 [3, 2] in
.dram C i32 [2, 2] out
.view A.l = mat A target=[2, 3] shape=[1, 2, 3]
.view B.r = mat B target=[3, 2] shape=[1, 3, 2]
.view C.o = mat C target=[2, 2] shape=[1, 2, 2]
.spad a0 i8 [2, 4]
.spad w0buf i8 [4, 4]
.acc c0 [2, 4]
  mvin a0[0:2, 0:3], A.l[0, 0:2, 0:3]   ; a comment
  mvin w0buf[0:3, 0:2], B.r[0, 0:3, 0:2]
fold:
  preload w0, w0buf[0:3, 0:2]
  matmul.ws c0[0:2, 0:2], a0[0:2, 0:3], w0
  mvout C.o[0, 0:2, 0:2], c0[0:2, 0:2]:i32
.end
"""


def test_hand_written_listing_assembles_and_runs():
    import numpy as np

    from wiadsl.backends.systolic import run_section

    listing = parse_listing(GOOD)
    a = np.array([[1, 2, 3], [4, 5, -6]], np.int8)
    b = np.array([[1, 0], [0, 1], [2, -3]], np.int8)
    out, stats = run_section(listing.sections[0], listing.config, {"A": a, "B": b})
    assert np.array_equal(out["C"], a.astype(np.int32) @ b)
    # DMA: 6 + 6 + 16 bytes at 8 B/cycle; preload 4; stream 2 + fill/drain 4 + 4 - 2
    assert stats.dram_bytes == 28 and stats.weight_load_cycles == 4
    assert stats.cycles == 1 + 1 + 4 + (2 + 4 + 4 - 2) + 2


@pytest.mark.parametrize("bad, message", [
    ("  frob a0[0:2, 0:3]", "unknown instruction 'frob'"),
    ("  mvin a0[0:2, 0:3]", "takes 2 operands"),
    ("  preload w2, w0buf[0:3, 0:2]", "weight slot"),
    ("  mvin a0[2:2, 0:3], A.l[0, 0:2, 0:3]", "empty range"),
    ("  vec.add c0[0:2, 0:2]:q7, c0[0:2, 0:2]:i32", "unknown dtype"),
])
def test_syntax_errors_name_the_line(bad, message):
    lines = GOOD.splitlines()
    lines.insert(12, bad)
    with pytest.raises(SasmError, match=rf"line 13: .*{message}"):
        parse_listing("\n".join(lines))


@pytest.mark.parametrize("edit, message", [
    (("c0[0:2, 0:2]:i32", "c0[0:9, 0:2]:i32"), "outside c0"),
    ((".acc c0 [2, 4]", ".acc c0 [2000, 4]"), "acc buffers need"),
    (("A.l[0, 0:2, 0:3]", "Z.l[0, 0:2, 0:3]"), "unknown view 'Z.l'"),
    (("mvout C.o[0, 0:2, 0:2], c0[0:2, 0:2]:i32", "mvout C.o[0, 0:2, 0:2], c0[0:2, 0:2]:f32"),
     "not an output of that dtype"),
    (("rows=4 cols=4", "rows=2 cols=4"), "preload of a 3x2 tile on a 2x4"),
])
def test_semantic_errors(edit, message):
    listing = parse_listing(GOOD.replace(*edit))
    with pytest.raises(SasmError, match=message):
        check_section(listing.sections[0], listing.config)


def test_structure_errors():
    with pytest.raises(SasmError, match="missing .target"):
        parse_listing(GOOD.split("\n", 1)[1])
    with pytest.raises(SasmError, match="missing .end"):
        parse_listing(GOOD.replace(".end", ""))
