"""Tile kernels in the simulator against NumPy on odd shapes: tensor-core (mma.sync) matmul,
conv2d as implicit GEMM (FMA and mma), and their fused epilogues; each assembles with ptxas."""

from __future__ import annotations

import numpy as np
import pytest

from wiadsl.backends.ptx.emit import emit_ptx
from wiadsl.backends.ptx.executor import PlanRun
from wiadsl.backends.ptx.simbackend import SimDevice
from wiadsl.ir.parser import parse_module

from .helpers import assemble, corpus_module, jit_kernel, spills

RNG = np.random.default_rng(7)
MM = "kernel k(input a: {t}[M, K], input b: {t}[K, N], output y: {t}[M, N]) {{ y = a @ b; }}"
MM_T = ("kernel k(input a: bf16[M, K], input b: bf16[N, K], input c: f32[N], output y: f32[M, N])"
        " { y = relu(cast(a @ transpose(b), f32) + c); }")
CONV = ("kernel k(input x: {t}[2, 3, H, W], input w: {t}[5, 3, 3, 3], output y: {t}[2, 5, {oh}, {ow}])"
        " {{ y = conv2d(x, w, stride={s}, padding={p}); }}")


def _bf16(x: np.ndarray) -> np.ndarray:
    """Round f32 to bf16 (nearest even), kept as f32."""
    bits = x.astype(np.float32).view(np.uint32)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.view(np.float32)


def _conv_ref(x: np.ndarray, w: np.ndarray, s: int, p: int) -> np.ndarray:
    x = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (p, p), (p, p)))
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    oh, ow = (h - kh) // s + 1, (wd - kw) // s + 1
    out = np.zeros((n, o, oh, ow))
    for i in range(kh):
        for j in range(kw):
            patch = x[:, :, i:i + s * (oh - 1) + 1:s, j:j + s * (ow - 1) + 1:s]
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j].astype(np.float64))
    return out


def _kinds(src: str, arch: str = "sm_80", shapes=None) -> list[str]:
    return [k["kind"] for k in emit_ptx(corpus_module(src), "k", arch, shapes)[1]["kernels"]]


@pytest.mark.parametrize("mkn", [(33, 47, 65), (64, 64, 64), (1, 9, 17)])
def test_f16_matmul_mma_matches_numpy(mkn) -> None:
    m, k, n = mkn
    a = RNG.standard_normal((m, k)).astype(np.float16)
    b = RNG.standard_normal((k, n)).astype(np.float16)
    got = jit_kernel(MM.format(t="f16"), "k", "ptxsim")(a, b)
    want = (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16)
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=2e-3, atol=2e-3)


def test_mma_path_selection() -> None:
    f16 = MM.format(t="f16")
    assert _kinds(f16) == ["matmul(mma)"]
    # sm_90, symbolic shapes: the Hopper kernel where the strides suit TMA, else mma.sync
    assert _kinds(f16, "sm_90") == ["matmul(wgmma)", "matmul(mma)"]
    assert _kinds(f16, "sm_75") == ["matmul"]          # no m16n8k16 f32-acc path before sm_80
    assert _kinds(MM.format(t="f32")) == ["matmul"]    # f32 keeps the FMA tiles
    text, _ = emit_ptx(corpus_module(f16), "k", "sm_80", {"a": (64, 64), "b": (64, 64)})
    assert "cp.async.cg.shared.global" in text and "ldmatrix.sync.aligned.m8n8.x4.trans" in text
    text, _ = emit_ptx(corpus_module(f16), "k", "sm_80", {"a": (33, 47), "b": (47, 65)})
    assert "cp.async" not in text and "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in text


def test_bf16_transposed_mma_with_epilogue() -> None:
    m, k, n = 33, 47, 65
    a, b = _bf16(RNG.standard_normal((m, k))), _bf16(RNG.standard_normal((n, k)))
    c = RNG.standard_normal(n).astype(np.float32)
    text, _ = emit_ptx(corpus_module(MM_T), "k", "sm_80")
    assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in text  # Bs[n][k]: no .trans
    got = jit_kernel(MM_T, "k", "ptxsim")(a, b, c)
    want = np.maximum(_bf16(a.astype(np.float64) @ b.T.astype(np.float64)) + c, 0)
    np.testing.assert_allclose(got, want, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("t,hw,s,p", [("f32", (9, 11), 1, 1), ("f32", (10, 7), 2, 0),
                                      ("f16", (9, 11), 2, 1)])
def test_conv_implicit_gemm_matches_numpy(t: str, hw, s: int, p: int) -> None:
    h, w = hw
    oh, ow = (h + 2 * p - 3) // s + 1, (w + 2 * p - 3) // s + 1
    src = CONV.format(t=t, oh=oh, ow=ow, s=s, p=p)
    npt = np.float32 if t == "f32" else np.float16
    x = RNG.standard_normal((2, 3, h, w)).astype(npt)
    wt = RNG.standard_normal((5, 3, 3, 3)).astype(npt)
    assert _kinds(src, shapes={"x": x.shape, "w": wt.shape}) == [
        "conv(igemm)" if t == "f32" else "conv(igemm,mma)"]
    got = jit_kernel(src, "k", "ptxsim")(x, wt)
    tol = 2e-5 if t == "f32" else 2e-3
    np.testing.assert_allclose(got.astype(np.float64), _conv_ref(x, wt, s, p), rtol=tol, atol=tol * 4)


FUSED_CONV = """func @k(%x: tensor<?x3x?x?xf32>, %w: tensor<4x3x3x3xf32>, %bias: tensor<4x1x1xf32>) -> tensor<?x4x?x?xf32> attributes {kernel, outputs = ["y"]} {
^entry:
  %y = tensor.fused_conv2d %x, %w, %bias {stride = [1, 1], padding = [1, 1], kernel = "cbr"} : (tensor<?x3x?x?xf32>, tensor<4x3x3x3xf32>, tensor<4x1x1xf32>) -> tensor<?x4x?x?xf32> {
  ^bb0(%acc: f32, %bb: f32):
    %0 = arith.add %acc, %bb : f32
    %1 = arith.relu %0 : f32
    yield %1 : f32
  }
  return %y : tensor<?x4x?x?xf32>
}"""


def test_fused_conv_epilogue_dynamic_shapes() -> None:
    module = parse_module(FUSED_CONV)
    x = RNG.standard_normal((2, 3, 7, 9)).astype(np.float32)
    w = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
    bias = RNG.standard_normal((4, 1, 1)).astype(np.float32)
    text, plan = emit_ptx(module, "k")  # symbolic sizes: every extent is a kernel parameter
    assert [k["kind"] for k in plan["kernels"]] == ["conv(igemm)"]
    (got,) = PlanRun(plan, SimDevice(text)).run([x, w, bias])
    np.testing.assert_allclose(got, np.maximum(_conv_ref(x, w, 1, 1) + bias, 0), rtol=2e-5, atol=1e-4)


TILE_SOURCES = {"mma_f16": MM.format(t="f16"), "mma_bf16_t": MM_T,
                "conv_f32": CONV.format(t="f32", oh="H", ow="W", s=1, p=1),
                "conv_f16": CONV.format(t="f16", oh="H", ow="W", s=1, p=1)}


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("name", sorted(TILE_SOURCES))
def test_tile_kernels_assemble_without_spills(ptxas: str, name: str, arch: str) -> None:
    for shapes in (None, {"a": (64, 64), "b": (64, 64)} if name == "mma_f16" else None):
        text, plan = emit_ptx(corpus_module(TILE_SOURCES[name]), "k", arch, shapes)
        rc, log = assemble(ptxas, text, arch)
        assert rc == 0, log
        assert all(v == 0 for v in spills(log).values()), log
