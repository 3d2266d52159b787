"""Reductions over leading axes read coalesced (issue 22, ``kernels/column_reduce``).

``reduce_sum(x, axis=0)`` of a row-major [R, C] (axis 1 of [B, R, C]) gives lane l of
each warp output column 32t + l and splits the rows over the block's 8 warps (and over
blocks when the column tiles are few), folding partials in a fixed order through shared
memory (and a second pass): coalesced loads, results independent of scheduling.
Values against NumPy on the simulator at odd sizes, f32 and f16 (f32 accumulation, as
the row kernel), static and symbolic; FileCheck of the index pattern; every barrier
needed (deleting one is a ``SimRaceError``); ptxas clean.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import wiadsl
import wiadsl.backends.ptx.kernels.column_reduce as column_reduce
from wiadsl.backends.ptx.emit import emit_ptx
from wiadsl.backends.ptx.executor import PlanRun
from wiadsl.backends.ptx.sim import SimRaceError
from wiadsl.backends.ptx.simbackend import SimDevice
from wiadsl.testing.filecheck import filecheck

from ..ptxsim.test_races import OptDevice, _sync_lines, _without
from .helpers import assemble, corpus_module, spills

RNG = np.random.default_rng(220)
NP = {"sum": np.sum, "max": np.max, "min": np.min, "mean": np.mean}
REDUCE_2D = "kernel k(input x: {t}[R, C], output y: {t}[{out}]) {{ y = reduce_{kind}(x, axis=0{keep}); }}"


def src_2d(kind: str, t: str = "f32", keepdims: bool = False) -> str:
    return REDUCE_2D.format(t=t, kind=kind, out="1, C" if keepdims else "C",
                            keep=", keepdims=true" if keepdims else "")


def emit(src: str, shapes: dict | None, arch: str = "sm_80") -> tuple[str, dict]:
    return emit_ptx(corpus_module(src), "k", arch, shapes)


def kinds(plan: dict) -> list[str]:
    return [s["kind"] for b in plan["blocks"] for s in b["steps"] if s["op"] == "launch"]


def run(src: str, x: np.ndarray, static: bool = True, **device) -> tuple[np.ndarray, dict]:
    text, plan = emit(src, {"x": x.shape} if static else None)
    (y,) = PlanRun(plan, OptDevice(text, **device) if device else SimDevice(text)).run([x])
    return np.asarray(y), plan


def check(got: np.ndarray, want: np.ndarray, kind: str, dtype: str, rows: int) -> None:
    if kind in ("max", "min"):
        np.testing.assert_array_equal(got, want.astype(got.dtype))
    elif dtype == "f16":  # f32 accumulation, one rounding to f16
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=2e-3, atol=2e-3)
    else:
        np.testing.assert_allclose(got, want, rtol=2e-6 * rows, atol=2e-6 * rows)


@pytest.mark.parametrize("kind", ["sum", "max", "min", "mean"])
@pytest.mark.parametrize("rows,cols", [(1, 7), (7, 33), (33, 7), (129, 129)])
def test_f32_columns_match_numpy(kind: str, rows: int, cols: int) -> None:
    x = RNG.standard_normal((rows, cols)).astype(np.float32)
    got, plan = run(src_2d(kind), x)
    assert kinds(plan) == ["reduce(cols)"]
    check(got, NP[kind](x.astype(np.float64), axis=0), kind, "f32", rows)


@pytest.mark.parametrize("kind", ["sum", "mean", "max"])
@pytest.mark.parametrize("rows,cols", [(33, 129), (129, 7)])
def test_f16_columns_accumulate_in_f32(kind: str, rows: int, cols: int) -> None:
    x = (RNG.standard_normal((rows, cols)) * 4).astype(np.float16)
    got, _ = run(src_2d(kind, "f16"), x)
    assert got.dtype == np.float16
    check(got, NP[kind](x.astype(np.float64), axis=0), kind, "f16", rows)


@pytest.mark.parametrize("static", [True, False])
def test_keepdims_and_batched_middle_axis(static: bool) -> None:
    src = ("kernel k(input x: f32[B, R, C], output y: f32[B, 1, C]) "
           "{ y = reduce_mean(x, axis=1, keepdims=true); }")
    x = RNG.standard_normal((3, 33, 7)).astype(np.float32)
    got, plan = run(src, x, static)
    assert kinds(plan)[-1].startswith("reduce(cols")
    np.testing.assert_allclose(got, x.astype(np.float64).mean(axis=1, keepdims=True),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind,dtype", [("sum", "f32"), ("max", "f32"), ("sum", "f16"),
                                        ("mean", "f32")])
def test_rows_split_over_blocks_then_folded(kind: str, dtype: str) -> None:
    """7 columns are one tile: 1000 rows go to 4 blocks, a second pass folds them."""
    x = RNG.standard_normal((1000, 7)).astype(np.float16 if dtype == "f16" else np.float32)
    got, plan = run(src_2d(kind, dtype), x)
    assert kinds(plan) == ["reduce(cols,split)", "reduce(cols,final)"]
    split = next(s for b in plan["blocks"] for s in b["steps"] if s.get("kind") == "reduce(cols,split)")
    assert split["grid"] == [1, 4, 1]
    check(got, NP[kind](x.astype(np.float64), axis=0), kind, dtype, 1000)


def test_argmax_over_rows_picks_the_first_extreme() -> None:
    x = np.round(RNG.standard_normal((700, 5)) * 2).astype(np.float32)  # many ties
    x[3, 1] = np.nan
    src = "kernel k(input x: f32[R, C], output y: i64[C]) { y = argmax(x, axis=0); }"
    for static in (True, False):
        got, plan = run(src, x, static)
        assert kinds(plan) == ["reduce(cols,split)", "reduce(cols,final)"]
        np.testing.assert_array_equal(got, np.argmax(x, axis=0))


def test_symbolic_shapes_take_two_passes() -> None:
    x = RNG.standard_normal((129, 33)).astype(np.float32)
    got, plan = run(src_2d("sum"), x, static=False)
    assert kinds(plan) == ["reduce(cols,split)", "reduce(cols,final)"]
    check(got, x.astype(np.float64).sum(axis=0), "sum", "f32", 129)


def test_results_do_not_depend_on_the_schedule() -> None:
    x = RNG.standard_normal((1000, 40)).astype(np.float32)
    outs = [run(src_2d("sum"), x, schedule=s)[0] for s in ("lockstep", "reverse", "rotate")]
    for y in outs[1:]:
        np.testing.assert_array_equal(y, outs[0])


@pytest.mark.parametrize("src,kind", [
    ("kernel k(input x: f32[R, C], output y: f32[R]) { y = reduce_sum(x, axis=1); }", "row"),
    ("kernel k(input x: f32[C, R], output y: f32[C]) { y = reduce_sum(transpose(x), axis=0); }",
     "row"),
    ("kernel k(input x: f32[B, R, C], output y: f32[R]) { y = reduce_sum(x, axis=[0, 2]); }", "row"),
    ("kernel k(input x: f32[B, R, C], output y: f32[R, C]) { y = reduce_max(x, axis=0); }",
     "reduce(cols)"),
])
def test_only_strided_rows_take_the_column_kernel(src: str, kind: str) -> None:
    """Rows already contiguous (axis 1, a transposed view) keep the row kernel."""
    _, plan = emit(src, {"x": (64, 96, 128) if "B" in src else (64, 96)})
    assert kinds(plan)[0].startswith(kind), kinds(plan)


def test_lanes_own_consecutive_columns() -> None:
    text, _ = emit(src_2d("sum"), {"x": (33, 129)})
    filecheck(text, """
    CHECK: .shared .align 8 .b32 col_val0[256];
    CHECK: and.b32 {{%r[0-9]+}}, {{%r[0-9]+}}, 31;
    CHECK-NEXT: shr.u32 {{%r[0-9]+}}, {{%r[0-9]+}}, 5;
    CHECK: $L_tile_1:
    CHECK: mad.lo.u32 {{%r[0-9]+}}, {{%r[0-9]+}}, 32, {{%r[0-9]+}};
    CHECK: $L_rows_
    CHECK: ld.global.f32
    CHECK: add.u32 {{%r[0-9]+}}, {{%r[0-9]+}}, 8;
    CHECK: st.shared.b32
    CHECK-NEXT: bar.sync 0;
    CHECK: ld.shared.b32
    CHECK: st.global.f32
    CHECK: bar.sync 0;
    CHECK: bra.uni $L_tile_1;
    """)
    # the load address is column + row * C: consecutive lanes, consecutive words
    column = re.search(r"mad\.lo\.u32 (%r\d+), %r\d+, 32, %r\d+;", text).group(1)
    loop = text[text.index("$L_rows_"):text.index("ld.global.f32")]
    row_off = re.search(r"mul\.lo\.s32 (%r\d+), %r\d+, 129;", loop).group(1)
    assert re.search(rf"add\.s32 %r\d+, {column}, {row_off};", loop), loop


@pytest.mark.parametrize("static", [True, False])
def test_every_barrier_is_needed(monkeypatch, static: bool) -> None:
    """One block walks every tile (grid.x capped at 1), so the second barrier guards the
    slots the next tile rewrites; both passes' barriers are checked."""
    monkeypatch.setattr(column_reduce, "MAX_GRID", 1)
    x = RNG.standard_normal((300, 40)).astype(np.float32)
    text, plan = emit(src_2d("sum"), {"x": x.shape} if static else None)
    assert kinds(plan) == ["reduce(cols,split)", "reduce(cols,final)"]
    for schedule in ("lockstep", "reverse"):
        dev = OptDevice(text, schedule=schedule)
        (y,) = PlanRun(plan, dev).run([x])
        assert dev.found == []
        check(np.asarray(y), x.astype(np.float64).sum(axis=0), "sum", "f32", 300)
    syncs = _sync_lines(text)
    assert len(syncs) == 4
    for i in syncs:
        with pytest.raises(SimRaceError):
            PlanRun(plan, OptDevice(_without(text, i))).run([x])


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("src", [
    src_2d("sum"), src_2d("mean", "f16", keepdims=True),
    "kernel k(input x: f32[R, C], output y: i64[C]) { y = argmax(x, axis=0); }",
    "kernel k(input x: f64[B, R, C], output y: f64[B, C]) { y = reduce_min(x, axis=1); }",
])
def test_assembles_without_spills(ptxas: str, src: str, arch: str) -> None:
    text, _ = emit(src, None, arch)
    rc, log = assemble(ptxas, text, arch)
    assert rc == 0, log
    assert spills(log) and not any(spills(log).values()), log


@pytest.mark.parametrize("name,shape", [("argmin", (1, 0)), ("prod", (0, 0)), ("sum", (0, 3)),
                                        ("sum", (3, 0)), ("max3", (0, 4, 5)), ("max3", (2, 4, 0))])
def test_empty_extents_give_numpy_shapes(name: str, shape: tuple[int, ...]) -> None:
    # Zero kept columns made the split count divide by zero tiles (fuzz seeds
    # 5300000000042 and 5300000001103: a ZeroDivisionError while planning the launch).
    src = """
    kernel argmin(input x: f64[1, M], output y: i64[M]) { y = argmin(x, axis=-2); }
    kernel prod(input x: f32[K, K], output y: f32[K]) { y = reduce_prod(x, axis=-2); }
    kernel sum(input x: f32[R, C], output y: f32[C]) { y = reduce_sum(x, axis=0); }
    kernel max3(input x: f16[B, R, C], output y: f16[B, C]) { y = reduce_max(x, axis=1); }
    """
    x = np.zeros(shape, {"argmin": np.float64, "max3": np.float16}.get(name, np.float32))
    got = getattr(wiadsl.jit(src, target="ptxsim"), name)(x)
    want = getattr(wiadsl.jit(src, target="interp"), name)(x)
    assert got.shape == want.shape and np.array_equal(got, want)
