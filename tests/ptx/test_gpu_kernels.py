"""On a GPU: the kernels of issue 22 against NumPy and the interpreter.

The Hopper GEMM (wgmma + TMA; asserted to run on an sm_90 device) with both operand
majors, bf16 epilogue, batches, wide tiles, i8 and tf32, and its fallbacks (a shape TMA
cannot take, the launch-time choice of a symbolic plan); flash attention (plain,
causal, batched; f16, bf16, f32); coalesced column reductions; tiled transposes; packed
f16x2/bf16x2 elementwise math bit-identical to the interpreter on special values; the
one-kernel softmax / layer_norm / rms_norm rows. Each case also runs on the simulator
(``WIADSL_GPU_TARGET=ptxsim``, at ``GPU_SIM_ARCH``) except those marked GPU-size, so the
simulator's model of these instructions is what the device is held to.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.reference import numpy_ref
from tests.reference.numpy_ref import round_to_bf16, truncate_to_tf32
from wiadsl.backends.ptx.executor import PlanRun
from wiadsl.backends.ptx.program import TargetOptions, ptx_program
from wiadsl.ir.interpreter import run_func

from .helpers import GPU_TARGET, corpus_module, gpu_arch, gpu_jit, gpu_kinds
from .test_attention_kernels import numpy_attention
from .test_attention_kernels import source as attention_source
from .test_packed_halves import SIGNLESS_ZERO, SOURCES
from .test_packed_halves import inputs as packed_inputs
from .test_wgmma_gemm import SRC as GEMM
from .test_wgmma_gemm import _inputs as gemm_inputs
from .test_wgmma_gemm import _want as gemm_want

pytestmark = pytest.mark.gpu
RNG = np.random.default_rng(2222)


def gpu_size() -> None:
    """Skip a case sized for a GPU when the tests run on the simulator."""
    if GPU_TARGET == "ptxsim":
        pytest.skip("GPU-size case: not run on the simulator")


def hopper() -> bool:
    return gpu_arch().startswith("sm_90")


def device_for(text: str):
    if GPU_TARGET == "ptxsim":
        from wiadsl.backends.ptx.simbackend import SimDevice
        return SimDevice(text)
    from wiadsl.backends.ptx.cuda import CudaDevice
    return CudaDevice(text)


# ---------------------------------------------------------------- Hopper GEMM


@pytest.mark.parametrize("kind, t, dims", [
    ("nn", "f16", {"M": 129, "K": 72, "N": 40}),
    ("nt", "f16", {"M": 129, "K": 72, "N": 65}),
    ("nn", "f16", {"M": 66, "K": 640, "N": 72}),       # the stage ring wraps
    ("tn", "f16", {"M": 72, "K": 136, "N": 24}),
    ("epi", "bf16", {"M": 33, "K": 72, "N": 65}),
    ("bmm", "f16", {"B": 3, "M": 17, "K": 64, "N": 24}),
    ("bcast", "f16", {"B": 2, "M": 9, "K": 64, "N": 16}),
    ("nn", "bf16", {"M": 1000, "K": 1024, "N": 1000}),  # GPU-size: many tiles
    ("nn", "f16", {"M": 4096, "K": 256, "N": 4096}),    # GPU-size: 128 x 256 tiles
])
def test_hopper_gemm(kind: str, t: str, dims: dict[str, int]) -> None:
    if dims["M"] >= 1000:
        gpu_size()
    xs = gemm_inputs(kind, t, dims)
    src = GEMM[kind].format(t=t)
    names = [a.name_hint for a in corpus_module(src)["k"].args]
    if hopper():
        assert gpu_kinds(src, dict(zip(names, (x.shape for x in xs)))) == ["matmul(wgmma)"]
    got = np.asarray(gpu_jit(src)(*xs), np.float64)
    np.testing.assert_allclose(got, gemm_want(kind, xs), rtol=2e-2, atol=2e-2)


def test_hopper_gemm_fallback_and_launch_time_choice() -> None:
    """K = 70 halves (140-byte rows) cannot be a TMA operand: the sm_80 kernel runs, for
    static shapes (its own plan) and in the symbolic plan (the launch's ``when``)."""
    src = GEMM["nn"].format(t="f16")
    text, plan = ptx_program(corpus_module(src), {"k": None}, TargetOptions(gpu_arch()))
    for k in (72, 70):
        xs = gemm_inputs("nn", "f16", {"M": 20, "K": k, "N": 24})
        if hopper():
            assert gpu_kinds(src, {"a": xs[0].shape, "b": xs[1].shape}) == \
                   ["matmul(wgmma)" if k == 72 else "matmul(mma)"]
        np.testing.assert_allclose(np.asarray(gpu_jit(src)(*xs), np.float64), gemm_want("nn", xs),
                                   rtol=2e-2, atol=2e-2)
        calls: list = []
        (got,) = PlanRun(plan, device_for(text), record=calls).run(xs)
        if hopper():
            assert [c.kernel for c in calls] == ["k_k1_matmul" if k == 72 else "k_k1_matmul_sm80"]
        np.testing.assert_allclose(np.asarray(got, np.float64), gemm_want("nn", xs),
                                   rtol=2e-2, atol=2e-2)


I8T = ("kernel k(input a: i8[M, K], input b: i8[N, K], output y: i32[M, N])"
       " { y = cast(a, i32) @ cast(transpose(b), i32); }")
F32T = "kernel k(input a: f32[M, K], input b: f32[N, K], output y: f32[M, N]) { y = a @ transpose(b); }"


@pytest.mark.parametrize("m, k, n", [(70, 144, 40), (256, 512, 384)])
def test_hopper_i8_and_tf32(m: int, k: int, n: int) -> None:
    """i8 is exact; tf32 operands keep their top 10 mantissa bits (the simulator's model of
    wgmma reading f32 from shared memory: truncated)."""
    a = RNG.integers(-128, 128, (m, k)).astype(np.int8)
    b = RNG.integers(-128, 128, (n, k)).astype(np.int8)
    if hopper():
        assert gpu_kinds(I8T, {"a": a.shape, "b": b.shape}) == ["matmul(wgmma)"]
        assert gpu_kinds(F32T, {"a": a.shape, "b": b.shape}, allow_tf32=True) == ["matmul(wgmma)"]
    np.testing.assert_array_equal(gpu_jit(I8T)(a, b), a.astype(np.int64) @ b.astype(np.int64).T)
    fa = RNG.standard_normal((m, k)).astype(np.float32)
    fb = RNG.standard_normal((n, k)).astype(np.float32)
    got = gpu_jit(F32T, allow_tf32=True)(fa, fb)
    trunc = [truncate_to_tf32(x).astype(np.float64) for x in (fa, fb)]
    np.testing.assert_allclose(got, trunc[0] @ trunc[1].T, rtol=1e-5, atol=1e-4)


# ---------------------------------------------------------------- flash attention



@pytest.mark.parametrize("form", ["attn", "causal", "attn_batched", "causal_batched"])
@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32"])
@pytest.mark.parametrize("t, s, d, e", [(1, 7, 16, 8), (33, 129, 64, 64), (257, 300, 128, 64),
                                        (2048, 2048, 64, 64)])
def test_flash_attention(form: str, dtype: str, t: int, s: int, d: int, e: int) -> None:
    if t >= 2048:
        gpu_size()
    lead = (2,) if form.endswith("batched") else ()
    raw = [RNG.standard_normal((*lead, n, m)) for n, m in ((t, d), (s, d), (s, e))]
    q, k, v = ([round_to_bf16(x) for x in raw] if dtype == "bf16" else
               [x.astype(np.float16 if dtype == "f16" else np.float32) for x in raw])
    src = attention_source("causal_batched" if form == "causal_batched" else form, dtype)
    kinds = gpu_kinds(src, {"q": q.shape, "k": k.shape, "v": v.shape})
    assert len(kinds) == 1 and kinds[0].startswith("attention(flash,"), kinds
    got = np.asarray(gpu_jit(src)(q, k, v), np.float64)
    tol = {"f16": 3e-3, "bf16": 2e-2, "f32": 2e-5}[dtype]
    np.testing.assert_allclose(got, numpy_attention(q, k, v, form.startswith("causal")),
                               rtol=tol, atol=tol)


# ---------------------------------------------------------------- rows and columns

COLUMNS = "kernel k(input x: {t}[R, C], output y: {t}[C]) {{ y = reduce_{kind}(x, axis=0); }}"


@pytest.mark.parametrize("kind, t", [("sum", "f32"), ("max", "f32"), ("mean", "f32"),
                                     ("sum", "f16")])
@pytest.mark.parametrize("rows, cols", [(1, 7), (129, 129), (1000, 7), (4096, 4095)])
def test_column_reductions(kind: str, t: str, rows: int, cols: int) -> None:
    if rows >= 4096:
        gpu_size()
    x = RNG.standard_normal((rows, cols)).astype(np.float16 if t == "f16" else np.float32)
    src = COLUMNS.format(t=t, kind=kind)
    assert gpu_kinds(src, {"x": x.shape})[0].startswith("reduce(cols")
    got = np.asarray(gpu_jit(src)(x), np.float64)
    want = {"sum": np.sum, "max": np.max, "mean": np.mean}[kind](x.astype(np.float64), axis=0)
    if kind == "max":
        np.testing.assert_array_equal(got, want)
    else:
        tol = 2e-3 if t == "f16" else 2e-6 * rows
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


TRANSPOSES = [
    ("kernel k(input x: {t}[M, N], output y: {t}[N, M]) {{ y = transpose(x); }}", [(129, 7)]),
    ("kernel k(input x: {t}[M, N], output y: {t}[N, M]) {{ y = transpose(x); }}", [(1000, 777)]),
    ("kernel k(input x: {t}[M, N], output y: {t}[N, M]) {{ y = transpose(x); }}", [(66, 130)]),
    ("kernel k(input x: {t}[B, M, N], output y: {t}[N, B, M]) {{ y = transpose(x, [2, 0, 1]); }}",
     [(3, 33, 40)]),
    ("kernel k(input x: {t}[M, N], output y: {t}[N, M]) {{ y = transpose(x); }}", [(4096, 4094)]),
]


@pytest.mark.parametrize("t", ["f32", "f16", "bf16", "i8", "bool", "f64"])
@pytest.mark.parametrize("case", range(len(TRANSPOSES)))
def test_tiled_transposes(t: str, case: int) -> None:
    src, shapes = TRANSPOSES[case]
    if shapes[0][0] >= 4096:
        gpu_size()
    module = corpus_module(src.format(t=t))
    dt = module["k"].args[0].type.dtype.numpy
    x = RNG.standard_normal(shapes[0]) * 4
    x = (x > 0) if np.dtype(dt) == np.bool_ else (round_to_bf16(x) if t == "bf16" else x.astype(dt))
    assert gpu_kinds(src.format(t=t), {"x": x.shape})[0].startswith("transpose(tile")
    got = gpu_jit(src.format(t=t))(x)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(run_func(module, "k", [x])[0]))


@pytest.mark.parametrize("name", sorted(SOURCES))
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("n", [69, 100_003])
def test_packed_halves_are_bit_identical(name: str, dtype: str, n: int) -> None:
    """f16x2 / bf16x2 math rounds exactly as the interpreter, specials included."""
    src = SOURCES[name].replace("T", dtype)
    module = corpus_module(src)
    xs = packed_inputs(module, dtype)
    xs = [x if np.ndim(x) == 0 else np.resize(x, n) for x in xs]
    got = gpu_jit(src)(*xs)
    want = run_func(module, "k", xs)
    for g, w in zip(got if isinstance(got, tuple) else (got,), want, strict=True):
        g, w = np.asarray(g, np.float64), np.asarray(w, np.float64)
        if name in SIGNLESS_ZERO:
            g, w = g + 0.0, w + 0.0  # -0 and +0 alike
        np.testing.assert_array_equal(g, w, err_msg=f"{name} {dtype}")


ROWS = {
    "softmax": "import nn;\nkernel k(input x: {t}[M, N], output y: {t}[M, N]) {{ y = nn.softmax(x); }}",
    "layer_norm": "import nn;\nkernel k(input x: {t}[M, N], input g: {t}[N], input b: {t}[N], "
                  "output y: {t}[M, N]) {{ y = nn.layer_norm(x, g, b); }}",
    "rms_norm": "import nn;\nkernel k(input x: {t}[M, N], input g: {t}[N], output y: {t}[M, N]) "
                "{{ y = nn.rms_norm(x, g); }}",
}


@pytest.mark.parametrize("op", sorted(ROWS))
@pytest.mark.parametrize("t", ["f32", "f16"])
@pytest.mark.parametrize("m, n", [(7, 33), (129, 8192), (4096, 4096)])
def test_one_kernel_rows(op: str, t: str, m: int, n: int) -> None:
    if m >= 4096:
        gpu_size()
    dt = np.float16 if t == "f16" else np.float32
    src = ROWS[op].format(t=t)
    module = corpus_module(src)
    xs = [RNG.standard_normal((m, n) if a.name_hint == "x" else (n,)).astype(dt)
          for a in module["k"].args if a.name_hint in ("x", "g", "b")]
    kinds = gpu_kinds(src, {a: x.shape for a, x in zip("xgb", xs)})
    assert len(kinds) == 1 and kinds[0].startswith("row("), kinds
    got = np.asarray(gpu_jit(src)(*xs), np.float64)
    if t == "f32":  # the interpreter's f32 arithmetic
        want = np.asarray(run_func(module, "k", xs)[0], np.float64)
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
    else:  # f16: sums in f32, each elementwise op rounded to f16 (values up to ~8: 4e-3 each)
        want = getattr(numpy_ref, op)(*[x.astype(np.float64) for x in xs])
        np.testing.assert_allclose(got, want, rtol=1e-2, atol=1e-2)
