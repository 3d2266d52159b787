"""Attention is one flash-attention kernel on the PTX targets at every -O level (issue 22).

``nn.attention``, ``nn.attention_batched``, the explicit form and the causal ones
(``nn.causal_attention``: key j is kept for query i iff j <= i) were 3 kernels that
stored the T x S scores; the planner now recognizes the pattern on the IR
(``lower/attention.py``) and emits one kernel (``kernels/flash*.py``): tensor cores
for f16/bf16 on sm_80+, FMA for f32. Values against NumPy (float64) on ptxsim;
patterns that must not fuse stay correct; ptxas without spills.
The race tests of the new kernels are in tests/ptxsim/test_flash_races.py."""

from __future__ import annotations

import functools
import itertools

import numpy as np
import pytest

from tests.reference.numpy_ref import round_to_bf16
from wiadsl.backends.ptx.executor import PlanRun
from wiadsl.backends.ptx.program import TargetOptions, ptx_program
from wiadsl.backends.ptx.simbackend import SimDevice
from wiadsl.frontend.compile import compile_to_ir

from .helpers import assemble, spills

RNG = np.random.default_rng(7)
DTYPES = {"f32": np.float32, "f16": np.float16}
TOL = {"f32": {"rtol": 2e-5, "atol": 2e-6}, "f16": {"rtol": 3e-3, "atol": 3e-3}}

HEAD = "import nn;\nkernel k(input q: {t}[{b}T, D], input k: {t}[{b}S, D], input v: {t}[{b}S, E], " \
       "output o: {t}[{b}T, E]) {{ {body} }}"
EXPLICIT = "s = (q @ transpose(k)) / sqrt(D); {mask} o = nn.softmax(s) @ v;"
MASK = "s = where(reshape(arange(T), [T, 1]) >= arange(S), s, -1.0 / 0.0);"
FORMS = {  # name -> (body, batched, causal)
    "attn": ("o = nn.attention(q, k, v);", False, False),
    "attn_explicit": (EXPLICIT.format(mask=""), False, False),
    "attn_batched": ("o = nn.attention_batched(q, k, v);", True, False),
    "causal": ("o = nn.causal_attention(q, k, v);", False, True),
    "causal_explicit": (EXPLICIT.format(mask=MASK), False, True),
    "causal_batched": ("o = nn.causal_attention_batched(q, k, v);", True, True),
}
SIDES = (1, 7, 33)


def numpy_attention(q, k, v, causal: bool = False, offset: int = 0) -> np.ndarray:
    """softmax(q k^T / sqrt(d), keys j <= i + offset kept when ``causal``) @ v in float64."""
    s = np.einsum("...td,...sd->...ts", q.astype(np.float64), k.astype(np.float64))
    s = s / np.sqrt(q.shape[-1])
    if causal:
        t, n = s.shape[-2:]
        s = np.where(np.arange(n) <= np.arange(t)[:, None] + offset, s, -np.inf)
    with np.errstate(invalid="ignore"):
        e = np.exp(s - s.max(-1, keepdims=True))
        return (e / e.sum(-1, keepdims=True)) @ v.astype(np.float64)


def source(form: str, dtype: str) -> str:
    body, batched, _ = FORMS[form]
    return HEAD.format(t=dtype, b="B, " if batched else "", body=body)


@functools.cache
def _module(src: str):
    return compile_to_ir(src, "<attention-test>")


def run(src: str, inputs: list[np.ndarray], level: int = 2,
        arch: str = "sm_80") -> tuple[list, dict, str, int]:
    """(outputs, plan, PTX, thread instructions executed) of kernel ``k`` (inputs q, k, v)
    of ``src`` on the simulator."""
    shapes = {n: x.shape for n, x in zip("qkv", inputs, strict=True)}
    text, plan = ptx_program(_module(src), {"k": shapes}, TargetOptions(arch, level))
    dev = SimDevice(text)
    out = list(PlanRun(plan, dev).run(inputs))
    return out, plan, text, dev.thread_instructions


def kinds(plan: dict) -> list[str]:
    return [k["kind"] for k in plan["kernels"]]


def _cases() -> list[tuple[str, int, str, int, int, int, int]]:
    """Every form at every -O level, f32 and f16 in turn (each form gets both); T and S
    run through {1, 7, 33}, D through {16, 64} and E through {8, 16, 24} across the cases."""
    out = []
    for i, (form, level) in enumerate(itertools.product(FORMS, range(4))):
        t, s = SIDES[i % 3], SIDES[(i // 3) % 3]
        out.append((form, level, ("f32", "f16")[i % 2], t, s, (16, 64)[(i // 9) % 2],
                    (8, 16, 24)[(i // 2) % 3]))
    return out


@pytest.mark.parametrize("form,level,dtype,t,s,d,e", _cases(),
                         ids=lambda v: str(v))
def test_attention_is_one_flash_kernel(form: str, level: int, dtype: str, t: int, s: int,
                                       d: int, e: int) -> None:
    _, batched, causal = FORMS[form]
    lead = (2,) if batched else ()
    q, k, v = (RNG.standard_normal((*lead, n, m)).astype(DTYPES[dtype])
               for n, m in ((t, d), (s, d), (s, e)))
    (got,), plan, _, _ = run(source(form, dtype), [q, k, v], level)
    engine = "mma" if dtype == "f16" else "fma"
    assert len(kinds(plan)) == 1 and kinds(plan)[0].startswith(f"attention(flash,{engine},"), plan
    assert got.dtype == q.dtype and got.shape == (*lead, t, e)
    np.testing.assert_allclose(got.astype(np.float64), numpy_attention(q, k, v, causal), **TOL[dtype])


def test_scores_are_never_stored() -> None:
    """The plan's only device buffer is the output (the 3-kernel plan had T x S ones)."""
    q, k, v = (RNG.standard_normal(sh).astype(np.float16) for sh in ((33, 64), (129, 64), (129, 16)))
    (got,), plan, text, _ = run(source("attn", "f16"), [q, k, v])
    assert [t["shape"] for t in plan["temporaries"].values()] == [[33, 16]], plan["temporaries"]
    for needle in ("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
                   "ldmatrix.sync.aligned.m8n8.x4.shared.b16",        # Q and K fragments
                   "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16",  # V fragments
                   "cvt.rn.f16x2.f32",                               # P stays in registers
                   "cp.async.cg.shared.global", "cp.async.wait_group 1", "shfl.sync.bfly.b32"):
        assert needle in text, needle
    # global stores: the 8 output elements a thread holds (rows g, g + 8; 4 of 16 columns)
    assert text.count("st.global") == text.count("st.global.b16") == 8
    np.testing.assert_allclose(got.astype(np.float64), numpy_attention(q, k, v), **TOL["f16"])


@pytest.mark.parametrize("dtype,arch,engine", [("bf16", "sm_80", "mma"), ("f16", "sm_75", "fma")])
def test_bf16_and_pre_ampere_f16(dtype: str, arch: str, engine: str) -> None:
    """bf16 runs on tensor cores (P as bf16x2); f16 below sm_80 on the FMA kernel."""
    raw = [RNG.standard_normal(sh) for sh in ((7, 32), (33, 32), (33, 16))]
    q, k, v = [round_to_bf16(x) for x in raw] if dtype == "bf16" else [x.astype(np.float16) for x in raw]
    (got,), plan, text, _ = run(source("causal", dtype), [q, k, v], arch=arch)
    assert kinds(plan)[0].startswith(f"attention(flash,{engine},")
    assert (dtype == "bf16") == ("cvt.rn.bf16x2.f32" in text)
    tol = 2e-2 if dtype == "bf16" else 3e-3
    np.testing.assert_allclose(np.asarray(got, np.float64), numpy_attention(q, k, v, True),
                               rtol=tol, atol=tol)


FUSED_VARIANTS = {  # body -> the NumPy value of o
    # scale by a multiplication, on either side
    "o = nn.softmax((q @ transpose(k)) * 0.125) @ v;":
        lambda q, k, v: numpy_attention(q * np.sqrt(q.shape[-1]) * 0.125, k, v),
    "o = nn.softmax(0.5 * (q @ transpose(k))) @ v;":
        lambda q, k, v: numpy_attention(q * np.sqrt(q.shape[-1]) * 0.5, k, v),
    # no scale
    "o = nn.softmax(q @ transpose(k)) @ v;":
        lambda q, k, v: numpy_attention(q * np.sqrt(q.shape[-1]), k, v),
    # bottom-right aligned causal mask: j <= i + (S - T); T > S leaves rows with no key (NaN)
    "s = (q @ transpose(k)) / sqrt(D); "
    "s = where(arange(S) - (S - T) <= reshape(arange(T), [T, 1]), s, -1.0 / 0.0); "
    "o = nn.softmax(s) @ v;":
        lambda q, k, v: numpy_attention(q, k, v, True, k.shape[0] - q.shape[0]),
    # the same mask written as a drop condition (where(drop, -inf, s)), strict
    "s = (q @ transpose(k)) / sqrt(D); "
    "s = where(arange(S) > reshape(arange(T), [T, 1]) + 2, -1.0 / 0.0, s); "
    "o = nn.softmax(s) @ v;":
        lambda q, k, v: numpy_attention(q, k, v, True, 2),
    # an elementwise consumer becomes the flash kernel's epilogue
    "o = nn.attention(q, k, v) * 2.0 + 1.0;":
        lambda q, k, v: numpy_attention(q, k, v) * 2.0 + 1.0,
}


@pytest.mark.parametrize("level", [0, 2])
@pytest.mark.parametrize("body", sorted(FUSED_VARIANTS), ids=range(len(FUSED_VARIANTS)))
def test_other_forms_fuse(body: str, level: int) -> None:
    t, s = (7, 33) if level else (33, 7)
    q, k, v = (RNG.standard_normal(sh).astype(np.float32) for sh in ((t, 16), (s, 16), (s, 8)))
    (got,), plan, _, _ = run(HEAD.format(t="f32", b="", body=body), [q, k, v], level)
    assert len(kinds(plan)) == 1 and kinds(plan)[0].startswith("attention(flash,fma,"), plan
    np.testing.assert_allclose(got, FUSED_VARIANTS[body](q, k, v), rtol=2e-5, atol=2e-6)


SCORES_OUT = ("import nn;\nkernel k(input q: f32[T, D], input k: f32[S, D], input v: f32[S, E], "
              "output o: f32[T, E], output s: f32[T, S]) { s = (q @ transpose(k)) / sqrt(D); "
              "o = nn.softmax(s) @ v; }")
NOT_FUSED = {  # body -> the NumPy value of o
    # the softmax over the other axis
    "o = nn.softmax((q @ transpose(k)) / sqrt(D), axis=0) @ v;":
        lambda q, k, v: _softmax0(q @ k.T / np.sqrt(q.shape[1])) @ v,
    # the probabilities used twice
    "p = nn.softmax(q @ transpose(k)); o = p @ v + reduce_sum(p, axis=1, keepdims=true);":
        lambda q, k, v: _softmax1(q @ k.T) @ v + 1.0,
    # the row max of the scores read again (at -O2 the softmax's own max, in P @ V's epilogue)
    "s = q @ transpose(k); o = nn.softmax(s) @ v + reduce_max(s, axis=1, keepdims=true);":
        lambda q, k, v: _softmax1(q @ k.T) @ v + (q @ k.T).max(1, keepdims=True),
    # a mask keeping keys j >= i (not causal)
    "s = where(arange(S) >= reshape(arange(T), [T, 1]), q @ transpose(k), -1.0 / 0.0); "
    "o = nn.softmax(s) @ v;":
        lambda q, k, v: _softmax1(np.where(np.arange(k.shape[0]) >= np.arange(q.shape[0])[:, None],
                                           q @ k.T, -np.inf)) @ v,
    # arange(1) broadcast over the keys is 0, not the key index: no mask the kernel knows
    "s = where(arange(1) <= reshape(arange(T), [T, 1]) - 3, q @ transpose(k), -1.0 / 0.0); "
    "o = nn.softmax(s) @ v;":
        lambda q, k, v: _softmax1(np.where(np.arange(q.shape[0])[:, None] >= 3, q @ k.T,
                                           -np.inf)) @ v,
    # a finite mask value is no -inf: a fully masked row is a uniform average, not NaN
    "s = where(arange(S) <= reshape(arange(T), [T, 1]), q @ transpose(k), -1e30); "
    "o = nn.softmax(s) @ v;":
        lambda q, k, v: _softmax1(np.where(np.arange(k.shape[0]) <= np.arange(q.shape[0])[:, None],
                                           q @ k.T, -1e30)) @ v,
}


def _softmax0(s):
    e = np.exp(s - s.max(0, keepdims=True))
    return e / e.sum(0, keepdims=True)


def _softmax1(s):
    with np.errstate(invalid="ignore"):
        e = np.exp(s - s.max(1, keepdims=True))
        return e / e.sum(1, keepdims=True)


@pytest.mark.parametrize("level", [0, 2])
@pytest.mark.parametrize("body", sorted(NOT_FUSED), ids=range(len(NOT_FUSED)))
def test_patterns_that_must_not_fuse_stay_correct(body: str, level: int) -> None:
    q, k, v = (RNG.standard_normal(sh).astype(np.float32) for sh in ((7, 16), (7, 16), (7, 8)))
    (got,), plan, _, _ = run(HEAD.format(t="f32", b="", body=body), [q, k, v], level)
    assert not any(x.startswith("attention") for x in kinds(plan)), plan
    np.testing.assert_allclose(got, NOT_FUSED[body](q, k, v), rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("level", [0, 2])
def test_returned_scores_keep_three_kernels(level: int) -> None:
    q, k, v = (RNG.standard_normal(sh).astype(np.float32) for sh in ((7, 16), (33, 16), (33, 8)))
    (o, s), plan, _, _ = run(SCORES_OUT, [q, k, v], level)
    assert len(kinds(plan)) == 3 and not any(x.startswith("attention") for x in kinds(plan)), plan
    np.testing.assert_allclose(s, q @ k.T / 4.0, rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(o, numpy_attention(q, k, v), rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("dtype", ["f16", "f32"])
def test_transposed_views(dtype: str) -> None:
    """Q and V read through transposes (strided columns): element copies, K still by chunks."""
    src = (f"import nn;\nkernel k(input q: {dtype}[D, T], input k: {dtype}[S, D], "
           f"input v: {dtype}[E, S], output o: {dtype}[T, E]) "
           "{ o = nn.attention(transpose(q), k, transpose(v)); }")
    q, k, v = (RNG.standard_normal(sh).astype(DTYPES[dtype]) for sh in ((16, 9), (33, 16), (8, 33)))
    (got,), plan, text, _ = run(src, [q, k, v])
    assert len(kinds(plan)) == 1 and kinds(plan)[0].startswith("attention(flash,")
    assert "cp.async.cg" in text and "ld.global" in text
    np.testing.assert_allclose(got.astype(np.float64), numpy_attention(q.T, k, v.T), **TOL[dtype])


def test_head_dim_past_128_keeps_three_kernels() -> None:
    q, k, v = (RNG.standard_normal(sh).astype(np.float32) for sh in ((5, 136), (7, 136), (7, 8)))
    (got,), plan, _, _ = run(source("attn", "f32"), [q, k, v])
    assert len(kinds(plan)) == 3, plan
    np.testing.assert_allclose(got, numpy_attention(q, k, v), rtol=2e-5, atol=2e-5)


def test_causal_skips_masked_key_tiles() -> None:
    """T = S = 192 with 64-row query tiles and 64-key tiles: 9 tiles of work unmasked, 1 + 2 + 3
    causal (a tile past the block's last row is never loaded)."""
    q, k, v = (RNG.standard_normal((192, 16)).astype(np.float16) for _ in range(3))
    counts = {}
    for form in ("attn", "causal"):
        (got,), _, _, counts[form] = run(source(form, "f16"), [q, k, v])
        np.testing.assert_allclose(got.astype(np.float64),
                                   numpy_attention(q, k, v, form == "causal"), **TOL["f16"])
    assert counts["causal"] < 0.75 * counts["attn"], counts


@pytest.mark.parametrize("dtype", ["f16", "f32"])
def test_64_bit_offsets(monkeypatch: pytest.MonkeyPatch, dtype: str) -> None:
    """Operands whose offsets pass the (lowered) 32-bit limit use s64 address arithmetic."""
    from wiadsl.backends.ptx import index_width

    monkeypatch.setattr(index_width, "INDEX32_LIMIT", 100)
    q, k, v = (RNG.standard_normal(sh).astype(DTYPES[dtype])
               for sh in ((2, 9, 32), (2, 70, 32), (2, 70, 16)))
    (got,), plan, text, _ = run(source("causal_batched", dtype), [q, k, v])
    assert kinds(plan)[0].startswith("attention(flash,") and "mul.lo.s64" in text
    np.testing.assert_allclose(got.astype(np.float64), numpy_attention(q, k, v, True), **TOL[dtype])


@pytest.mark.parametrize("dtype", ["f16", "f32"])
def test_symbolic_sizes(dtype: str) -> None:
    """B, T, S symbolic (what ``wiac -o`` writes with -D for the head dims only): one kernel
    for any sizes; the batch stride ``T * 64`` is a multiple of the 16-byte chunk, so the
    tiles still move by cp.async."""
    shapes = {n: (None, None, x) for n, x in (("q", 64), ("k", 64), ("v", 16))}
    text, plan = ptx_program(_module(source("causal_batched", dtype)), {"k": shapes},
                             TargetOptions("sm_80", 2))
    assert len(kinds(plan)) == 1 and "cp.async.cg.shared.global" in text
    for b, t, n in ((2, 7, 70), (1, 33, 5)):
        q, k, v = (RNG.standard_normal(sh).astype(DTYPES[dtype])
                   for sh in ((b, t, 64), (b, n, 64), (b, n, 16)))
        (got,) = PlanRun(plan, SimDevice(text)).run([q, k, v])
        np.testing.assert_allclose(got.astype(np.float64), numpy_attention(q, k, v, True),
                                   **TOL[dtype])


def test_fast_math_exp() -> None:
    """Under fast_math the exps are ex2.approx (the accurate polynomial otherwise)."""
    q, k, v = (RNG.standard_normal(sh).astype(np.float16) for sh in ((9, 16), (33, 16), (33, 8)))
    shapes = {"q": q.shape, "k": k.shape, "v": v.shape}
    for fast in (False, True):
        text, plan = ptx_program(_module(source("attn", "f16")), {"k": shapes},
                                 TargetOptions("sm_80", 2, fast))
        assert ("ex2.approx" in text) == fast
        (got,) = PlanRun(plan, SimDevice(text)).run([q, k, v])
        np.testing.assert_allclose(got.astype(np.float64), numpy_attention(q, k, v), **TOL["f16"])


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("dtype", ["f16", "f32"])
@pytest.mark.parametrize("d", [64, 128])
def test_flash_kernels_assemble_without_spills(ptxas: str, dtype: str, d: int, arch: str) -> None:
    """Symbolic T, S (and B): the PTX wiac writes; head dims static."""
    src = source("causal_batched", dtype)
    shapes = {n: (None, None, x) for n, x in (("q", d), ("k", d), ("v", d))}
    text, plan = ptx_program(_module(src), {"k": shapes}, TargetOptions(arch, 2))
    assert kinds(plan)[0].startswith(f"attention(flash,{'mma' if dtype == 'f16' else 'fma'},")
    rc, log = assemble(ptxas, text, arch)
    assert rc == 0, log
    assert all(n == 0 for n in spills(log).values()), log
