"""Materialized transposes go through shared-memory tiles (issue 22, ``kernels/transpose``).

An elementwise kernel whose input is a transposed view of its outputs (``y =
transpose(x)``, a transposed copy made dense for a reshape, ``x + transpose(x)``) stages
32 x 32 tiles of that input in shared memory: read along the input's contiguous axis,
written along the output's. 16-bit data moves as b32 pairs in 64 x 64 tiles when the
sizes are static and even. Values against NumPy on the simulator (odd sizes, batched
permutations, every dtype), FileCheck of the staged structure, every barrier needed
(deleting one is a ``SimRaceError``), ptxas clean.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import wiadsl.backends.ptx.kernels.transpose as transpose
from wiadsl.backends.ptx.emit import emit_ptx
from wiadsl.backends.ptx.executor import PlanRun
from wiadsl.backends.ptx.sim import SimRaceError
from wiadsl.backends.ptx.simbackend import SimDevice
from wiadsl.ir.interpreter import run_func
from wiadsl.testing.filecheck import filecheck

from ..ptxsim.test_races import OptDevice, _sync_lines, _without
from .helpers import assemble, corpus_module, spills

RNG = np.random.default_rng(2022)
T2 = "kernel k(input x: {t}[M, N], output y: {t}[N, M]) {{ y = transpose(x); }}"


def emit(src: str, shapes: dict | None, arch: str = "sm_80") -> tuple[str, dict]:
    return emit_ptx(corpus_module(src), "k", arch, shapes)


def kinds(plan: dict) -> list[str]:
    return [s["kind"] for b in plan["blocks"] for s in b["steps"] if s["op"] == "launch"]


def data(shape: tuple[int, ...], dtype) -> np.ndarray:
    x = RNG.standard_normal(shape) * 4
    return (x > 0) if np.dtype(dtype) == np.bool_ else x.astype(dtype)


def run(src: str, shapes: list[tuple[int, ...]], static: bool = True, arch: str = "sm_80"):
    module = corpus_module(src)
    args = module["k"].args
    xs = [data(s, a.type.dtype.numpy) for s, a in zip(shapes, args, strict=True)]
    names = {a.name_hint: s for a, s in zip(args, shapes, strict=True)}
    text, plan = emit_ptx(module, "k", arch, names if static else None)
    got = PlanRun(plan, SimDevice(text)).run(xs)
    want = run_func(module, "k", xs)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(np.asarray(g, np.float64), np.asarray(w, np.float64))
    return text, plan


@pytest.mark.parametrize("static", [True, False])
@pytest.mark.parametrize("m,n", [(1, 7), (7, 33), (33, 129), (129, 7)])
def test_f32_transpose(m: int, n: int, static: bool) -> None:
    _, plan = run(T2.format(t="f32"), [(m, n)], static)
    assert kinds(plan) == ["transpose(tile)"]


@pytest.mark.parametrize("shape,pairs", [((64, 130), True), ((2, 66), True), ((7, 33), False),
                                         ((66, 35), False)])
@pytest.mark.parametrize("t", ["f16", "bf16"])
def test_16_bit_pairs_when_even(t: str, shape: tuple[int, int], pairs: bool) -> None:
    _, plan = run(T2.format(t=t), [shape])
    assert kinds(plan) == ["transpose(tile,pairs)" if pairs else "transpose(tile)"]


@pytest.mark.parametrize("t", ["f64", "i8", "bool", "i64"])
def test_other_dtypes(t: str) -> None:
    _, plan = run(T2.format(t=t), [(40, 33)])
    assert kinds(plan) == ["transpose(tile)"]


@pytest.mark.parametrize("src,shapes,kind", [
    ("kernel k(input x: f32[B, M, N], output y: f32[N, B, M]) { y = transpose(x, [2, 0, 1]); }",
     [(3, 33, 40)], "transpose(tile)"),
    ("kernel k(input x: f16[B, M, N], input b: f16[M], output y: f16[B, N, M]) "
     "{ y = transpose(x, [0, 2, 1]) * 2.0 + b; }", [(3, 66, 130), (66,)], "transpose(tile,pairs)"),
    ("kernel k(input x: bf16[B, M, N], input b: f32[M], output y: bf16[B, N, M]) "
     "{ y = cast(cast(transpose(x, [0, 2, 1]), f32) + b, bf16); }", [(2, 66, 34), (66,)],
     "transpose(tile,pairs)"),
    ("kernel k(input x: f32[N, N], output y: f32[N, N]) { y = x + transpose(x); }", [(45, 45)],
     "transpose(tile)"),
    ("kernel k(input x: f16[M, N], input z: f16[N, M], output y: f16[N, M], output w: f16[N, M]) "
     "{ y = transpose(x) - z; w = max(transpose(x), z); }", [(64, 32), (32, 64)],
     "transpose(tile,pairs)"),
])
def test_fused_and_batched_transposes(src: str, shapes: list, kind: str) -> None:
    for static in (True, False):
        _, plan = run(src, shapes, static)
        assert kinds(plan)[0] == (kind if static else "transpose(tile)")


def test_transposed_copy_made_dense_for_a_reshape() -> None:
    src = ("kernel k(input x: f32[M, N], output y: f32[N, M]) "
           "{ y = reshape(reshape(transpose(x), [N * M]), [N, M]) * 2.0; }")
    _, plan = run(src, [(50, 37)])
    assert kinds(plan)[0] == "transpose(tile)"


def test_plain_elementwise_keeps_the_grid_stride_loop() -> None:
    _, plan = emit("kernel k(input x: f32[M, N], input b: f32[M, 1], output y: f32[M, N]) "
                   "{ y = x * b; }", {"x": (64, 64), "b": (64, 1)})
    assert kinds(plan) == ["elementwise"]


def test_element_tile_is_read_along_p_and_written_along_q() -> None:
    text, _ = emit(T2.format(t="f32"), {"x": (100, 200)})
    filecheck(text, """
    CHECK: .shared .align 4 .b32 tile0[1056];
    CHECK: and.b32 {{%r[0-9]+}}, {{%r[0-9]+}}, 31;
    CHECK-NEXT: shr.u32 {{%r[0-9]+}}, {{%r[0-9]+}}, 5;
    CHECK: $L_tile_1:
    CHECK: ld.global.f32
    CHECK: st.shared.b32
    CHECK: bar.sync 0;
    CHECK: ld.shared.b32
    CHECK: st.global.f32
    CHECK: bar.sync 0;
    CHECK: bra.uni $L_tile_1;
    """)
    # staging: lane tx reads x[q][p0 + tx] (N = 200 is x's contiguous axis) into tile word
    # ty * 33 + tx: a warp reads 32 consecutive floats and writes 32 banks
    lane, row = re.search(r"and\.b32 (%r\d+), %r\d+, 31;\n\s*shr\.u32 (%r\d+),", text).groups()
    stage = text[text.index("$L_tile_1:"):text.index("$L_stage_3:")]
    p = re.search(rf"add\.u32 (%r\d+), %r\d+, {lane};", stage).group(1)
    q = re.search(rf"add\.u32 (%r\d+), %r\d+, {row};", stage).group(1)
    q_row = re.search(rf"mul\.lo\.s32 (%r\d+), {q}, 200;", stage).group(1)
    assert re.search(rf"add\.s32 %r\d+, {p}, {q_row};", stage), stage
    assert re.search(rf"mad\.lo\.u32 %r\d+, {row}, 33, {lane};", stage), stage


def test_16_bit_pairs_are_words_both_ways() -> None:
    text, _ = emit(T2.format(t="f16"), {"x": (128, 256)})
    filecheck(text, """
    CHECK: .shared .align 4 .b32 tile0[2048];
    CHECK: $L_tile_1:
    CHECK: ld.global.b32
    CHECK: xor.b32
    CHECK: st.shared.b32
    CHECK: bar.sync 0;
    CHECK: mad.lo.u32 {{%r[0-9]+}}, {{%r[0-9]+}}, 8738, 21520;
    CHECK: ld.shared.b32
    CHECK: ld.shared.b32
    CHECK-NEXT: prmt.b32
    CHECK: st.global.b32
    CHECK: bar.sync 0;
    """)
    assert "ld.global.b16" not in text and "st.global.b16" not in text


@pytest.mark.parametrize("t,shape", [("f32", (40, 70)), ("f16", (66, 130))])
def test_every_barrier_is_needed(monkeypatch, t: str, shape: tuple[int, int]) -> None:
    """One block walks every tile (grid capped at 1): the second barrier guards the
    slots the next tile rewrites."""
    monkeypatch.setattr(transpose, "MAX_GRID", 1)
    x = data(shape, np.float16 if t == "f16" else np.float32)
    text, plan = emit(T2.format(t=t), {"x": shape})
    for schedule in ("lockstep", "reverse"):
        dev = OptDevice(text, schedule=schedule)
        (y,) = PlanRun(plan, dev).run([x])
        assert dev.found == [] and np.array_equal(y, x.T)
    syncs = _sync_lines(text)
    assert len(syncs) == 2
    for i in syncs:
        with pytest.raises(SimRaceError):
            PlanRun(plan, OptDevice(_without(text, i))).run([x])


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("src,shapes", [
    (T2.format(t="f32"), None), (T2.format(t="f16"), None), (T2.format(t="f16"), {"x": (4096, 4096)}),
    ("kernel k(input x: bf16[B, M, N], input b: f32[M], output y: bf16[B, N, M]) "
     "{ y = cast(cast(transpose(x, [0, 2, 1]), f32) + b, bf16); }", {"x": (8, 1024, 2048), "b": (1024,)}),
    ("kernel k(input x: f64[B, M, N], output y: f64[N, B, M]) { y = transpose(x, [2, 0, 1]); }", None),
])
def test_assembles_without_spills(ptxas: str, src: str, shapes, arch: str) -> None:
    text, _ = emit(src, shapes, arch)
    rc, log = assemble(ptxas, text, arch)
    assert rc == 0, log
    assert spills(log) and not any(spills(log).values()), log
