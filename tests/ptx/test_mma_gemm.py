"""The Ampere tensor-core GEMM (``kernels/mma*.py``, issue 22).

Values on the simulator against NumPy (odd and aligned shapes, static and symbolic, batched,
transposed B, fused epilogues; f16, bf16, exact i8, opt-in tf32), the structure of the PTX
(pipeline depth, one barrier per k tile, swizzle, 128-bit epilogue stores), shared-memory
bank conflicts measured on the simulator's addresses, the tile choice, and ptxas for sm_80
and sm_90 with no spills. The race tests (each sync deleted) are in tests/ptxsim/test_races.py.
"""

from __future__ import annotations

import re
from collections import defaultdict

import numpy as np
import pytest

from tests.reference.numpy_ref import round_to_bf16, round_to_tf32
from wiadsl.backends.ptx.emit import emit_ptx
from wiadsl.backends.ptx.executor import PlanRun
from wiadsl.backends.ptx.kernels import mma_config
from wiadsl.backends.ptx.kernels.mma_config import MmaConfig
from wiadsl.backends.ptx.sim.memory import BankedMemory
from wiadsl.backends.ptx.simbackend import SimDevice
from wiadsl.runtime.jit import jit
from wiadsl.testing.filecheck import filecheck

from .helpers import assemble, corpus_module, spills

RNG = np.random.default_rng(2022)
MM = "kernel k(input a: {t}[M, K], input b: {t}[K, N], output y: {t}[M, N]) {{ y = a @ b; }}"
MM_T = "kernel k(input a: {t}[M, K], input b: {t}[N, K], output y: {t}[M, N]) {{ y = a @ transpose(b); }}"
I8 = "kernel k(input a: i8[M, K], input b: i8[K, N], output y: i32[M, N]) { y = cast(a, i32) @ cast(b, i32); }"
I8_T = ("kernel k(input a: i8[M, K], input b: i8[N, K], output y: i32[M, N])"
        " { y = cast(a, i32) @ cast(transpose(b), i32); }")
BIAS_RELU = ("kernel k(input a: bf16[M, K], input b: bf16[N, K], input c: f32[N], output y: f32[M, N])"
             " { y = relu(cast(a @ transpose(b), f32) + c); }")
RESIDUAL = {"f16": "kernel k(input a: f16[M, K], input b: f16[K, N], input r: f16[M, N],"
                    " output y: f16[M, N]) { y = a @ b + r; }",
            "f32": "kernel k(input a: f16[M, K], input b: f16[K, N], input r: f32[M, N],"
                   " output y: f32[M, N]) { y = cast(a @ b, f32) * 0.5 + r; }"}
BATCHED = "kernel k(input a: f16[B, M, K], input b: f16[K, N], output y: f16[B, M, N]) { y = a @ b; }"
CONV = ("kernel k(input x: f16[N, C, H, W], input w: f16[O, C, 3, 3], input c: f16[O, 1, 1],"
        " output y: f16[N, O, H, W]) { y = relu(conv2d(x, w, padding=1) + c); }")


def _inputs(src: str, dims: dict[str, int]) -> list[np.ndarray]:
    out = []
    for _, t, shape in re.findall(r"input (\w+): (\w+)\[([^\]]*)\]", src):
        sh = tuple(dims[d.strip()] if d.strip().isalpha() else int(d) for d in shape.split(","))
        if t == "i8":
            out.append(RNG.integers(-128, 128, sh).astype(np.int8))
        else:
            x = RNG.standard_normal(sh).astype(np.float32)
            out.append(x.astype(np.float16) if t == "f16" else round_to_bf16(x) if t == "bf16" else x)
    return out


def _run(src: str, inputs: list[np.ndarray], static: bool, **options) -> tuple[list, dict, str]:
    names = re.findall(r"input (\w+):", src)
    shapes = {n: x.shape for n, x in zip(names, inputs, strict=True)} if static else None
    text, plan = emit_ptx(corpus_module(src), "k", options.pop("arch", "sm_80"), shapes, **options)
    return list(PlanRun(plan, SimDevice(text)).run(inputs)), plan, text


def _f16_close(got: np.ndarray, exact: np.ndarray) -> None:
    """Within one f16 ulp of the exact result (f32 accumulation, one rounding to f16)."""
    want = exact.astype(np.float16)
    ulp = np.spacing(np.abs(want)).astype(np.float64)
    assert (np.abs(got.astype(np.float64) - exact) <= ulp + 1e-6).all()


# ---------------------------------------------------------------- values


@pytest.mark.parametrize("static", [True, False])
@pytest.mark.parametrize("mkn", [(1, 7, 33), (7, 33, 1), (33, 129, 7), (129, 64, 136)])
def test_f16_values(mkn, static: bool) -> None:
    m, k, n = mkn
    a, b = _inputs(MM.format(t="f16"), {"M": m, "K": k, "N": n})
    (got,), plan, _ = _run(MM.format(t="f16"), [a, b], static)
    assert plan["kernels"][0]["kind"] == "matmul(mma)"
    _f16_close(got, a.astype(np.float64) @ b.astype(np.float64))


@pytest.mark.parametrize("static", [True, False])
def test_bf16_transposed_b_with_bias_relu(static: bool) -> None:
    a, b, c = _inputs(BIAS_RELU, {"M": 40, "K": 72, "N": 33})
    (got,), _, text = _run(BIAS_RELU, [a, b, c], static)
    assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in text and ".trans" not in text
    want = np.maximum(round_to_bf16(a.astype(np.float64) @ b.T.astype(np.float64)) + c, 0)
    np.testing.assert_allclose(got, want, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("static", [True, False])
@pytest.mark.parametrize("out", ["f16", "f32"])
def test_residual_epilogue(out: str, static: bool) -> None:
    src = RESIDUAL[out]
    a, b, r = _inputs(src, {"M": 33, "K": 48, "N": 72})
    (y,), plan, _ = _run(src, [a, b, r], static)
    assert [k["kind"] for k in plan["kernels"]] == ["matmul(mma)"]
    h = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float16).astype(np.float64)
    want = (h + r).astype(np.float16) if out == "f16" else h * 0.5 + r
    np.testing.assert_allclose(y.astype(np.float64), want.astype(np.float64), rtol=2e-3, atol=2e-2)


QUANT = ("kernel k(input a: f16[M, K], input b: f16[K, N], output q: i8[M, N])"
         " { q = quantize(cast(a @ b, f32), 0.25, 3); }")


@pytest.mark.parametrize("static", [True, False])
def test_quantize_epilogue_stores_from_registers(static: bool) -> None:
    """An i8 output has no 16-byte vector form here: the register epilogue stores it."""
    a, b = _inputs(QUANT, {"M": 33, "K": 40, "N": 20})
    (q,), plan, text = _run(QUANT, [a, b], static)
    assert [k["kind"] for k in plan["kernels"]] == ["matmul(mma)"] and "st.global.v4" not in text
    h = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float16).astype(np.float32)
    want = np.clip(np.rint(h / np.float32(0.25)) + 3, -128, 127)
    assert np.abs(q.astype(np.int64) - want).max() <= 1  # f16 rounding of the product may differ


@pytest.mark.parametrize("static", [True, False])
def test_batched_with_broadcast_b(static: bool) -> None:
    a, b = _inputs(BATCHED, {"B": 3, "M": 17, "K": 40, "N": 24})
    (got,), _, _ = _run(BATCHED, [a, b], static)
    _f16_close(got, a.astype(np.float64) @ b.astype(np.float64))


@pytest.mark.parametrize("static", [True, False])
def test_conv_implicit_gemm_on_tensor_cores(static: bool) -> None:
    x, w, c = _inputs(CONV, {"N": 2, "C": 5, "H": 7, "W": 9, "O": 6})
    (got,), plan, _ = _run(CONV, [x, w, c], static)
    assert plan["kernels"][0]["kind"] == "conv(igemm,mma)"
    win = np.lib.stride_tricks.sliding_window_view(
        np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1))), (3, 3), axis=(2, 3))
    conv = np.einsum("nchwij,ocij->nohw", win, w.astype(np.float64)).astype(np.float16)
    want = np.maximum(conv.astype(np.float64) + c, 0)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=2e-3, atol=2e-2)


@pytest.mark.parametrize("src", [I8, I8_T], ids=["b_kn", "b_nk"])
@pytest.mark.parametrize("static", [True, False])
@pytest.mark.parametrize("mkn", [(7, 33, 129), (64, 128, 40)])
def test_i8_products_are_exact(src: str, static: bool, mkn) -> None:
    m, k, n = mkn
    a, b = _inputs(src, {"M": m, "K": k, "N": n})
    (got,), _, text = _run(src, [a, b], static)
    assert "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32" in text and "mad.lo.s32" not in text
    bb = b if src is I8 else b.T
    np.testing.assert_array_equal(got, a.astype(np.int64) @ bb.astype(np.int64))


@pytest.mark.parametrize("src", [MM, MM_T], ids=["b_kn", "b_nk"])
@pytest.mark.parametrize("static", [True, False])
@pytest.mark.parametrize("mkn", [(33, 47, 65), (64, 64, 64)])
def test_tf32_when_allowed(src: str, static: bool, mkn) -> None:
    m, k, n = mkn
    s = src.format(t="f32")
    a, b = _inputs(s, {"M": m, "K": k, "N": n})
    (got,), plan, text = _run(s, [a, b], static, allow_tf32=True)
    assert plan["kernels"][0]["kind"] == "matmul(mma)"
    assert "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in text
    assert "cvt.rna.tf32.f32" in text
    bb = (b if src is MM else b.T).astype(np.float64)
    # tf32 inputs, f32 accumulation: near the product of the rounded inputs...
    np.testing.assert_allclose(got, round_to_tf32(a).astype(np.float64) @ round_to_tf32(bb), rtol=1e-5, atol=1e-5)
    # ...which is visibly not the f32 product (10-bit mantissas)
    assert np.abs(got - a.astype(np.float64) @ bb).max() > 1e-4


def test_f32_stays_exact_by_default() -> None:
    a, b = _inputs(MM.format(t="f32"), {"M": 33, "K": 47, "N": 65})
    (got,), plan, text = _run(MM.format(t="f32"), [a, b], True)
    assert plan["kernels"][0]["kind"] == "matmul" and "tf32" not in text and "mma" not in text
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


def test_allow_tf32_reaches_jit_and_wiac(tmp_path) -> None:
    from wiadsl.tools.cli import main

    src = MM.format(t="f32")
    a, b = _inputs(src, {"M": 20, "K": 24, "N": 16})
    tf = jit(src, "k", target="ptxsim", allow_tf32=True)(a, b)
    exact = jit(src, "k", target="ptxsim")(a, b)
    np.testing.assert_allclose(tf, round_to_tf32(a).astype(np.float64) @ round_to_tf32(b), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(exact, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    path = tmp_path / "k.wia"
    path.write_text(src)
    for flags, has in (([], False), (["--allow-tf32"], True)):
        out = tmp_path / f"k{len(flags)}.ptx"
        assert main([str(path), "-o", str(out), *flags]) == 0
        assert ("m16n8k8.row.col.f32.tf32" in out.read_text()) is has


def test_big_tiles_on_small_static_shapes(monkeypatch) -> None:
    """The 128x128, 3-stage configuration with static sizes (picked when the grid fills
    the GPU; here forced by claiming a one-SM GPU), odd and aligned extents."""
    monkeypatch.setattr(mma_config, "SM_COUNT", {80: 1, 90: 1})
    for m, k, n in ((129, 40, 130), (64, 96, 64)):
        a, b = _inputs(MM.format(t="f16"), {"M": m, "K": k, "N": n})
        (got,), plan, text = _run(MM.format(t="f16"), [a, b], True)
        assert plan["kernels"][0]["shared_bytes"] == 49152 and "cp.async.wait_group 1;" in text
        _f16_close(got, a.astype(np.float64) @ b.astype(np.float64))


# ---------------------------------------------------------------- selection and structure


def _cfg(src: str, shapes, arch: str = "sm_80", **options) -> tuple[str, dict]:
    return emit_ptx(corpus_module(src), "k", arch, shapes, **options)


@pytest.mark.parametrize("shapes,smem,block", [
    ({"a": (4096, 4096), "b": (4096, 4096)}, 49152, 128),   # 1024 tiles of 128x128
    ({"a": (512, 512), "b": (512, 512)}, 32768, 128),       # 16 tiles would idle SMs: 64x64
    (None, 49152, 128),                                     # symbolic: 128x128
])
def test_tile_choice(shapes, smem: int, block: int) -> None:
    _, plan = _cfg(MM.format(t="f16"), shapes)
    assert plan["kernels"][0]["shared_bytes"] == smem
    launch = [s for b in plan["blocks"] for s in b["steps"] if s["op"] == "launch"][0]
    assert launch["block"] == [block, 1, 1]


def test_selection() -> None:
    from wiadsl.backends.ptx.kernels.matmul import ProductSpec  # noqa: F401  (the spec type)

    kinds = {}
    for name, src, arch, opts in [("f16_sm75", MM.format(t="f16"), "sm_75", {}),
                                  ("f32", MM.format(t="f32"), "sm_80", {}),
                                  ("f32_tf32_sm75", MM.format(t="f32"), "sm_75", {"allow_tf32": True}),
                                  ("i8", I8, "sm_80", {}), ("i8_sm75", I8, "sm_75", {}),
                                  ("i8_by_i32", "kernel k(input a: i8[M, K], input b: i32[K, N],"
                                   " output y: i32[M, N]) { y = cast(a, i32) @ b; }", "sm_80", {})]:
        kinds[name] = _cfg(src, None, arch, **opts)[1]["kernels"][0]["kind"]
    assert kinds == {"f16_sm75": "matmul", "f32": "matmul", "f32_tf32_sm75": "matmul",
                     "i8": "matmul(mma)", "i8_sm75": "matmul", "i8_by_i32": "matmul"}


def test_pipeline_structure_small_tiles() -> None:
    """64x64, 4 stages: the prologue issues tiles 0..2 (k < 3*32), the loop waits for all
    but the newest 2 groups, one barrier, issues the next tile, then 2 k steps of 2x4 mma."""
    text, plan = _cfg(MM.format(t="f16"), {"a": (64, 160), "b": (160, 64)})
    assert plan["kernels"][0]["shared_bytes"] == 4 * (64 + 64) * 64  # no padding
    filecheck(text, """
    CHECK: .shared .align 128 .b8 gemm_smem[32768];
    CHECK: $L_prologue_{{[0-9]+}}:
    CHECK-NEXT: setp.ge.u32 {{%p[0-9]+}}, {{%r[0-9]+}}, 96;
    CHECK: cp.async.cg.shared.global [{{%r[0-9]+}}], [{{%rd[0-9]+}}], 16, {{%r[0-9]+}};
    CHECK: cp.async.commit_group;
    CHECK: $L_ktile_{{[0-9]+}}:
    CHECK: cp.async.wait_group 2;
    CHECK-NEXT: bar.sync 0;
    CHECK: cp.async.cg.shared.global
    CHECK: cp.async.commit_group;
    CHECK: ldmatrix.sync.aligned.m8n8.x4.shared.b16
    CHECK: ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16
    CHECK: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
    CHECK: $L_ktile_end_{{[0-9]+}}:
    CHECK-NOT: ld.shared
    CHECK: bar.sync 0;
    CHECK-NEXT: st.shared.v2.f32
    """)
    loop = _k_loop(text)
    assert loop.count("mma.sync") == 2 * 2 * 4 and loop.count("ldmatrix") == 2 * (2 + 2)
    assert loop.count("bar.sync") == 1 and loop.count("cp.async.cg") == 4
    assert loop.count("cp.async.wait_group") == 1 and text.count("cp.async.wait") == 1


def _k_loop(text: str) -> str:
    """The k loop's body: from its label to its end label."""
    start = re.search(r"^\$L_ktile_\d+:$", text, re.M)
    end = re.search(r"^\$L_ktile_end_\d+:$", text, re.M)
    assert start and end
    return text[start.end():end.start()]


def test_pipeline_structure_symbolic_big_tiles() -> None:
    """128x128, 3 stages (48 KiB); symbolic strides: a uniform run-time choice between the
    16-byte cp.async path and element loads; 2 k steps of 4x8 mma per warp."""
    text, plan = _cfg(MM.format(t="f16"), None)
    assert plan["kernels"][0]["shared_bytes"] == 3 * (128 + 128) * 64
    filecheck(text, """
    CHECK: and.b64 {{%rd[0-9]+}}, {{%rd[0-9]+}}, 7;
    CHECK-NEXT: setp.eq.s64 {{%p[0-9]+}}, {{%rd[0-9]+}}, 0;
    CHECK: $L_ktile_{{[0-9]+}}:
    CHECK: cp.async.wait_group 1;
    CHECK-NEXT: bar.sync 0;
    CHECK: @!{{%p[0-9]+}} bra $L_elem_tile_{{[0-9]+}};
    CHECK: cp.async.cg.shared.global
    CHECK: $L_elem_tile_{{[0-9]+}}:
    CHECK: @{{%p[0-9]+}} ld.global.b16
    CHECK-NEXT: st.shared.b16
    CHECK: cp.async.commit_group;
    CHECK: $L_ktile_end_{{[0-9]+}}:
    """)
    loop = _k_loop(text)
    assert loop.count("mma.sync") == 2 * 4 * 8 and loop.count("bar.sync") == 1


def test_swizzle_replaces_padding() -> None:
    """Lane offsets XOR the 16-byte chunk with x(row): (row >> 1) & 3 for 64-byte rows
    (bfe 1, 2), ((row & 3) << 1) | ((row >> 2) & 1) for B's 128-byte [k][n] rows."""
    text, _ = _cfg(MM.format(t="f16"), {"a": (64, 64), "b": (64, 64)})
    filecheck(text, """
    CHECK: bfe.u32 [[X:%r[0-9]+]], {{%r[0-9]+}}, 1, 2;
    CHECK-NEXT: xor.b32 {{%r[0-9]+}}, {{%r[0-9]+}}, {{%r[0-9]+}};
    CHECK: bfe.u32 {{%r[0-9]+}}, {{%r[0-9]+}}, 2, 1;
    CHECK-NEXT: or.b32
    CHECK-NEXT: xor.b32
    """.replace("[[X:%r[0-9]+]]", "{{%r[0-9]+}}"))
    assert not re.search(r"mad\.lo\.u32 %r\d+, %r\d+, (80|144),", text)  # no padded pitch


def test_vector_epilogue_converts_once() -> None:
    text, _ = _cfg(MM.format(t="f16"), {"a": (64, 64), "b": (64, 64)})
    epi = text[text.index("$L_ktile_end_"):]
    filecheck(epi, """
    CHECK: st.shared.v2.f32
    CHECK: bar.sync 0;
    CHECK: $L_runs_{{[0-9]+}}:
    CHECK: ld.shared.v4.f32
    CHECK: cvt.rn.f16x2.f32
    CHECK: st.global.v4.b32
    """)
    assert "cvt.f32.f16" not in text  # no f16 -> f32 -> f16 round trip


# ---------------------------------------------------------------- bank conflicts


def _bank_degrees(monkeypatch) -> dict[int, int]:
    """Record every shared access of >= 4 bytes per lane; return the worst bank-conflict
    degree seen per access size (1 = conflict free). A warp's access is served in phases
    of 8 (16-byte), 16 (8-byte) or 32 (4-byte) lanes; lanes of a phase reading the same
    word share it."""
    worst: dict[int, int] = defaultdict(int)
    locate = BankedMemory.locate

    def spy(self, addr, lanes, nbytes, write):
        rows, off = locate(self, addr, lanes, nbytes, write)
        if self.space == "shared" and nbytes >= 4:
            per = {16: 8, 8: 16}.get(nbytes, 32)
            key = (rows.astype(np.int64) << 32) | (lanes.astype(np.int64) // 32) << 8 | \
                (lanes.astype(np.int64) % 32) // per
            for k in np.unique(key):
                sel = key == k
                words = np.unique((off[sel][:, None] // 4 + np.arange(nbytes // 4)).reshape(-1))
                worst[nbytes] = max(worst[nbytes], int(np.bincount(words % 32).max()))
        return rows, off

    monkeypatch.setattr(BankedMemory, "locate", spy)
    return worst


@pytest.mark.parametrize("src,dims,opts", [
    (MM.format(t="f16"), {"M": 64, "K": 96, "N": 64}, {}),        # cp.async + ldmatrix(.trans)
    (MM_T.format(t="bf16"), {"M": 64, "K": 96, "N": 64}, {}),     # B [n][k]
    (I8_T, {"M": 64, "K": 128, "N": 64}, {}),                     # s8 [n][k]
    (MM.format(t="f32"), {"M": 64, "K": 32, "N": 64}, {"allow_tf32": True}),  # tf32 B words
], ids=["f16", "bf16_t", "i8_t", "tf32"])
def test_shared_accesses_are_bank_conflict_free(monkeypatch, src: str, dims, opts) -> None:
    worst = _bank_degrees(monkeypatch)
    _run(src, _inputs(src, dims), True, **opts)
    assert worst[16] == 1 and worst[8] == 1, dict(worst)
    assert worst.get(4, 1) == 1, dict(worst)


def test_bank_conflict_probe_sees_padding_conflicts(monkeypatch) -> None:
    """The probe itself: 8 lanes reading 16 bytes at a 64-byte pitch hit 2 bank lines."""
    worst = _bank_degrees(monkeypatch)
    mem = BankedMemory("shared", {"s": (0, 4096)}, 4096, 1, np.zeros(32, np.int64), False)
    mem.locate(np.arange(32, dtype=np.uint64) * 64 % 4096, np.arange(32), 16, False)
    assert worst[16] == 4


# ---------------------------------------------------------------- ptxas

PTXAS_CASES = {
    "f16_big": (MM.format(t="f16"), {"a": (4096, 4096), "b": (4096, 4096)}, {}),
    "f16_small": (MM.format(t="f16"), {"a": (512, 512), "b": (512, 512)}, {}),
    "f16_symbolic": (MM.format(t="f16"), None, {}),
    "bf16_bias_relu_symbolic": (BIAS_RELU, None, {}),
    "residual_f16": (RESIDUAL["f16"], {"a": (4096, 512), "b": (512, 4096), "r": (4096, 4096)}, {}),
    "i8_symbolic": (I8, None, {}),
    "i8_t_big": (I8_T, {"a": (4096, 4096), "b": (4096, 4096)}, {}),
    "tf32_symbolic": (MM.format(t="f32"), None, {"allow_tf32": True}),
    "tf32_t_big": (MM_T.format(t="f32"), {"a": (4096, 4096), "b": (4096, 4096)}, {"allow_tf32": True}),
    "conv_f16_symbolic": (CONV, None, {}),
}


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("name", sorted(PTXAS_CASES))
def test_assembles_without_spills(ptxas: str, name: str, arch: str) -> None:
    src, shapes, opts = PTXAS_CASES[name]
    text, plan = _cfg(src, shapes, arch, **opts)
    assert "mma)" in plan["kernels"][0]["kind"]
    rc, log = assemble(ptxas, text, arch)
    assert rc == 0, log
    assert all(v == 0 for v in spills(log).values()), log


def test_config_invariants() -> None:
    """Every configuration's stages fit the 48 KiB static shared limit and its epilogue's
    staging tile fits in them (at most one pass per warp row)."""
    for bm, bn, wm, wn, stages in (mma_config.BIG, mma_config.SMALL):
        for op in mma_config.OPS.values():
            cfg = MmaConfig(op, bm, bn, wm, wn, stages, True)
            assert cfg.smem_bytes <= 48 * 1024 and stages >= 3
            assert bm * bn * 4 // wm <= cfg.smem_bytes
            assert cfg.bk * op.elem == 64 and cfg.mi * 16 == cfg.wtm and cfg.ni * 8 == cfg.wtn
