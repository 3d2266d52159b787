"""Correct at any size: 64-bit index arithmetic past 2^31 and grids folded to the y/z limits.

Sizes beyond what the simulator can hold are checked as emitted PTX (64-bit
arithmetic, ptxas-clean, grid shapes in the plan); the code paths they take are run
on the simulator against NumPy with small stand-ins, by lowering the limits the
backend decides with (``index_width.INDEX32_LIMIT``, ``common.GRID_YZ_MAX``).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import wiadsl.backends.ptx.index_width as index_width
import wiadsl.backends.ptx.kernels.common as common
from wiadsl.backends.ptx.emit import emit_ptx
from wiadsl.backends.ptx.executor import PlanRun, check_grid
from wiadsl.backends.ptx.simbackend import SimDevice
from wiadsl.diagnostics import WiaRuntimeError

from .helpers import assemble, corpus_module

pytest.importorskip("wiadsl.backends.ptx.sim")

RNG = np.random.default_rng(22)
BIG = 5_000_000_000  # > 2^32


def emit(src: str, shapes: dict | None, arch: str = "sm_80") -> tuple[str, dict]:
    return emit_ptx(corpus_module(src), "k", arch, shapes)


def run(src: str, *inputs: np.ndarray, static: bool = True) -> list:
    names = re.findall(r"input (\w+):", src)
    shapes = {n: x.shape for n, x in zip(names, inputs, strict=True)} if static else None
    text, plan = emit(src, shapes)
    return PlanRun(plan, SimDevice(text)).run(list(inputs))


def launches(plan: dict) -> list[dict]:
    return [s for b in plan["blocks"] for s in b["steps"] if s["op"] == "launch"]


def wide_index_ops(text: str) -> list[str]:
    """64-bit index arithmetic (the address additions ``base + offset`` are always 64-bit)."""
    return [ln for ln in text.splitlines()
            if re.search(r"\b(rem|div|setp\.[a-z]+|shr|shl|mad\.lo|mul\.lo)\.[usb]64\b", ln)]


def scales_64_bit(text: str) -> bool:
    """Some element offset is scaled in 64 bits (a power-of-two stride is a shift)."""
    return re.search(r"\b(mul\.lo\.s64|mad\.lo\.s64|shl\.b64)\b", text) is not None


def narrow_ops_with(text: str, value: int) -> list[str]:
    """Instructions of a 32-bit type that take ``value`` as an immediate."""
    return [ln for ln in text.splitlines()
            if re.search(r"\.[usb]32\b", ln) and re.search(rf"\b{value}\b", ln)]


# ---------------------------------------------------------------- 64-bit indexing
EW = "kernel k(input x: f32[N], output y: f32[N]) { y = exp(x) * 2.0; }"
BMM = "kernel k(input a: {t}[Z, M, K], input b: {t}[Z, K, N], output c: f32[Z, M, N]) {{ c = {e}; }}"


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_static_extent_past_2_32_emits_64_bit_index_math(ptxas: str, arch: str) -> None:
    text, _ = emit(EW, {"x": (BIG,)}, arch)
    assert not narrow_ops_with(text, BIG), narrow_ops_with(text, BIG)[:3]
    assert "setp.ge.u64" in text and "shl.b64" in text
    rc, log = assemble(ptxas, text, arch)
    assert rc == 0, log
    assert "spill" not in log or "0 bytes spill stores, 0 bytes spill loads" in log


def test_static_shapes_that_fit_keep_32_bit_indices() -> None:
    text, plan = emit("kernel k(input x: f32[M, N], input b: f32[N], output y: f32[M, N])"
                      " { y = x + b; }", {"x": (4096, 4096), "b": (4096,)})
    assert not wide_index_ops(text), wide_index_ops(text)[:3]
    assert plan["kernels"][0]["params"] == ["u64"] * 3  # the three buffers only


def test_a_broadcast_view_past_2_31_elements_is_64_bit() -> None:
    # 2^16 x 2^16 elements: every extent and stride fits 32 bits, their product does not
    text, _ = emit("kernel k(input x: f16[M, N], input b: f16[N], output y: f16[M, N])"
                   " { y = x * b; }", {"x": (65536, 65536), "b": (65536,)})
    assert "rem.u64" in text and scales_64_bit(text)


def test_symbolic_sizes_are_u64_parameters() -> None:
    _, plan = emit(EW, None)
    (launch,) = launches(plan)
    sizes = [a for a in launch["args"] if "expr" in a]
    assert sizes and all(a["type"] in ("u64", "s64") for a in sizes)


WIDE_CASES = {
    # source, inputs: every index path of the loop kernels (dense and vector loops,
    # broadcasting, transposed and reversed views, slices, iota, row kernels)
    "dense_v4": (EW, [RNG.standard_normal(1031).astype(np.float32)]),
    "broadcast": ("kernel k(input x: f32[A, B, C], input b: f32[B, 1], output y: f32[A, B, C])"
                  " { y = x * b + 1.0; }",
                  [RNG.standard_normal((3, 5, 7)).astype(np.float32),
                   RNG.standard_normal((5, 1)).astype(np.float32)]),
    "transpose": ("kernel k(input x: f64[M, N], output y: f64[N, M]) { y = transpose(x) * 3.0; }",
                  [RNG.standard_normal((9, 13))]),
    "reverse_slice": ("kernel k(input x: f32[N], output y: f32[M]) { y = x[10:2:-3] + 1.0; }",
                      [RNG.standard_normal(17).astype(np.float32)]),
    "iota": ("kernel k(input x: f32[N], output y: f32[N]) { y = x + cast(arange(N), f32); }",
             [RNG.standard_normal(77).astype(np.float32)]),
    "rows": ("import nn; kernel k(input x: f32[M, N], output y: f32[M, N]) { y = nn.softmax(x); }",
             [RNG.standard_normal((6, 45)).astype(np.float32)]),
    "full_reduce": ("kernel k(input x: f32[N], output s: f32) { s = reduce_sum(x, axis=0); }",
                    [RNG.standard_normal(9000).astype(np.float32)]),
}


@pytest.mark.parametrize("name", sorted(WIDE_CASES))
@pytest.mark.parametrize("static", [True, False])
def test_64_bit_paths_match_the_interpreter(monkeypatch, name: str, static: bool) -> None:
    src, inputs = WIDE_CASES[name]
    from wiadsl.runtime.jit import jit
    want = jit(src, kernel="k", target="interp")(*inputs)
    monkeypatch.setattr(index_width, "INDEX32_LIMIT", 8)  # every kernel here is then 64-bit
    text, _ = emit(src, {n: x.shape for n, x in zip(re.findall(r"input (\w+):", src), inputs,
                                                    strict=True)} if static else None)
    assert wide_index_ops(text)
    got = run(src, *inputs, static=static)
    want = want if isinstance(want, tuple | list) else [want]
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


GEMM_CASES = {
    "f32_batched": (BMM.format(t="f32", e="a @ b"), [RNG.standard_normal((2, 70, 19)).astype(np.float32),
                                                     RNG.standard_normal((2, 19, 67)).astype(np.float32)]),
    "f16_mma_async": ("kernel k(input a: f16[M, K], input b: f16[K, N], output c: f32[M, N])"
                      " { c = cast(a @ b, f32); }",
                      [RNG.standard_normal((72, 64)).astype(np.float16),
                       RNG.standard_normal((64, 80)).astype(np.float16)]),
    "f16_mma_transposed": ("kernel k(input a: f16[M, K], input b: f16[N, K], output c: f32[M, N])"
                           " { c = cast(a @ transpose(b), f32) + 1.0; }",
                           [RNG.standard_normal((33, 40)).astype(np.float16),
                            RNG.standard_normal((17, 40)).astype(np.float16)]),
    "conv": ("kernel k(input x: f32[N, C, H, W], input w: f32[O, C, 3, 3], output y: f32[N, O, H, W])"
             " { y = conv2d(x, w, padding=1); }",
             [RNG.standard_normal((2, 3, 9, 11)).astype(np.float32),
              RNG.standard_normal((5, 3, 3, 3)).astype(np.float32)]),
}


@pytest.mark.parametrize("name", sorted(GEMM_CASES))
@pytest.mark.parametrize("static", [True, False])
def test_64_bit_tile_kernels_match_the_interpreter(monkeypatch, name: str, static: bool) -> None:
    src, inputs = GEMM_CASES[name]
    from wiadsl.runtime.jit import jit
    want = jit(src, kernel="k", target="interp")(*inputs)
    monkeypatch.setattr(index_width, "INDEX32_LIMIT", 8)  # operands and epilogues 64-bit
    (got,) = run(src, *inputs, static=static)
    tol = 2e-2 if "f16" in name else 1e-4
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_f16_matmul_with_k_65536_uses_64_bit_offsets(ptxas: str, arch: str) -> None:
    # row 32768 of a K = 65536 matrix starts at element 2^31: 32-bit offsets overflow there
    src = GEMM_CASES["f16_mma_async"][0]
    text, plan = emit(src, {"a": (40000, 65536), "b": (65536, 256)}, arch)
    if arch == "sm_90":  # the Hopper kernel: TMA addresses the operands, no offsets in the PTX
        assert plan["kernels"][0]["kind"] == "matmul(wgmma)"
        launch = next(s for s in plan["blocks"][0]["steps"] if s["op"] == "launch")
        assert [a["dims"] for a in launch["args"] if "tmap" in a] == [[65536, 40000], [256, 65536]]
    else:
        assert plan["kernels"][0]["kind"].startswith("matmul(mma")
        assert scales_64_bit(text)
    rc, log = assemble(ptxas, text, arch)
    assert rc == 0 and "0 bytes spill stores" in log, log


def test_a_size_its_parameter_cannot_hold_is_an_error_not_an_overflow() -> None:
    from wiadsl.backends.ptx.executor import _size_arg
    assert _size_arg(BIG, "u64", "k") == BIG
    with pytest.raises(WiaRuntimeError, match="does not fit its u32 parameter"):
        _size_arg(BIG, "u32", "k")


# ---------------------------------------------------------------- grid limits


def test_batch_70000_matmul_grid_is_folded_into_x() -> None:
    src = BMM.format(t="f32", e="a @ b")
    _, plan = emit(src, {"a": (70000, 8, 8), "b": (70000, 8, 8)})
    (launch,) = launches(plan)
    assert launch["grid"] == [70000, 1, 1]


def test_1x3x2048x2048_conv_grid_respects_the_y_limit() -> None:
    src = "kernel k(input x: f32[N, C, H, W], input w: f32[O, C, 3, 3], output y: f32[N, O, H, W])" \
          " { y = conv2d(x, w, padding=1); }"
    _, plan = emit(src, {"x": (1, 3, 2048, 2048), "w": (8, 3, 3, 3)})
    for launch in launches(plan):
        gx, gy, gz = launch["grid"]
        assert gy <= 65535 and gz <= 65535 and gx <= 2**31 - 1


@pytest.mark.parametrize("dtype,expr", [("f32", "a @ b"), ("f16", "cast(a @ b, f32)")])
@pytest.mark.parametrize("static", [True, False])
def test_folded_tile_grid_matches_numpy(monkeypatch, dtype: str, expr: str, static: bool) -> None:
    monkeypatch.setattr(common, "GRID_YZ_MAX", 2)  # 3 row tiles and a batch of 3 fold
    np_t = np.float16 if dtype == "f16" else np.float32
    a = RNG.standard_normal((3, 130, 20)).astype(np_t)
    b = RNG.standard_normal((3, 20, 70)).astype(np_t)
    src = BMM.format(t=dtype, e=expr)
    text, plan = emit(src, {"a": a.shape, "b": b.shape} if static else None)
    (launch,) = launches(plan)
    assert launch["grid"][1:] == [1, 1]
    (got,) = PlanRun(plan, SimDevice(text)).run([a, b])
    want = np.matmul(a.astype(np.float32), b.astype(np.float32))
    tol = 1e-2 if dtype == "f16" else 1e-5
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_unfolded_grid_keeps_the_y_and_z_axes() -> None:
    _, plan = emit(BMM.format(t="f32", e="a @ b"), {"a": (3, 130, 20), "b": (3, 20, 70)})
    (launch,) = launches(plan)
    assert launch["grid"] == [2, 3, 3]


def test_a_grid_past_the_device_limits_is_an_error_before_launch() -> None:
    check_grid("k", (2**31 - 1, 65535, 65535))
    with pytest.raises(WiaRuntimeError, match="along y"):
        check_grid("k", (1, 65536, 1))


def test_a_static_size_a_32_bit_kernel_cannot_hold_is_a_usage_error() -> None:
    # row kernels count rows in 32 bits: 5e9 rows is refused, not wrapped
    from wiadsl.diagnostics import WiaUsageError
    with pytest.raises(WiaUsageError, match="does not fit the u32 arithmetic"):
        emit("kernel k(input x: f32[M, N], output y: f32[M]) { y = reduce_sum(x, axis=1); }",
             {"x": (BIG, 2)})
