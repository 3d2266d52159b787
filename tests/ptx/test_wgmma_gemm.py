"""The Hopper GEMM (wgmma + TMA + mbarrier, ``kernels/wgmma_gemm.py``): selection on sm_90,
the plan's tensor maps and launch-time choice, results on the simulator against NumPy
(odd shapes, both operand majors, bf16 epilogue, batches, 128x256 tiles), ptxas for
sm_90a with 0 spills, and every needed synchronisation deleted in turn being reported."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tests.reference.numpy_ref import round_to_bf16, truncate_to_tf32
from wiadsl.backends.ptx.emit import emit_ptx
from wiadsl.backends.ptx.executor import PlanRun
from wiadsl.backends.ptx.kernels import wgmma_gemm
from wiadsl.backends.ptx.sim import PtxSimError, SimRaceError
from wiadsl.backends.ptx.simbackend import SimDevice

from .helpers import assemble, corpus_module, spills

SRC = {
    "nn": "kernel k(input a: {t}[M, K], input b: {t}[K, N], output y: {t}[M, N]) {{ y = a @ b; }}",
    "nt": "kernel k(input a: {t}[M, K], input b: {t}[N, K], output y: {t}[M, N]) "
          "{{ y = a @ transpose(b); }}",
    "tn": "kernel k(input a: {t}[K, M], input b: {t}[K, N], output y: {t}[M, N]) "
          "{{ y = transpose(a) @ b; }}",
    "epi": "kernel k(input a: {t}[M, K], input b: {t}[N, K], input c: f32[N], output y: f32[M, N])"
           " {{ y = relu(cast(a @ transpose(b), f32) + c); }}",
    "bmm": "kernel k(input a: {t}[B, M, K], input b: {t}[B, K, N], output y: {t}[B, M, N]) "
           "{{ y = a @ b; }}",
    "bcast": "kernel k(input a: {t}[B, M, K], input b: {t}[K, N], output y: {t}[B, M, N]) "
             "{{ y = a @ b; }}",
}
NP = {"f16": np.float16, "bf16": np.float32}


class Recorder(SimDevice):
    """The simulator device, remembering which kernels it launched."""

    def __init__(self, ptx: str, **opts):
        super().__init__(ptx)
        self.names: list[str] = []
        self.opts = opts

    def launch(self, kernel, grid, block, args, shared_bytes) -> None:
        from wiadsl.backends.ptx.sim import launch

        self.names.append(kernel)
        stats = launch(self.ptx, kernel, grid, block, args, shared_bytes, **self.opts)
        self.thread_instructions += stats.thread_instructions


def _inputs(kind: str, t: str, dims: dict[str, int], seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    shapes = {"nn": [("M", "K"), ("K", "N")], "nt": [("M", "K"), ("N", "K")],
              "tn": [("K", "M"), ("K", "N")], "epi": [("M", "K"), ("N", "K"), ("N",)],
              "bmm": [("B", "M", "K"), ("B", "K", "N")], "bcast": [("B", "M", "K"), ("K", "N")]}
    out = []
    for i, names in enumerate(shapes[kind]):
        x = rng.standard_normal(tuple(dims[n] for n in names))
        out.append(x.astype(np.float32) if kind == "epi" and i == 2
                   else (round_to_bf16(x) if t == "bf16" else x.astype(NP[t])))
    return out


def _want(kind: str, xs: list[np.ndarray]) -> np.ndarray:
    f = [x.astype(np.float64) for x in xs]
    if kind == "nt":
        return f[0] @ f[1].T
    if kind == "tn":
        return f[0].T @ f[1]
    if kind == "epi":
        return np.maximum(f[0] @ f[1].T + f[2], 0)
    return f[0] @ f[1]


def _emit(kind: str, t: str, xs, arch: str = "sm_90", static: bool = True):
    names = {"nn": "ab", "nt": "ab", "tn": "ab", "epi": "abc", "bmm": "ab", "bcast": "ab"}[kind]
    shapes = {n: x.shape for n, x in zip(names, xs)} if static else None
    return emit_ptx(corpus_module(SRC[kind].format(t=t)), "k", arch, shapes)


def _run(text: str, plan: dict, xs, **opts) -> tuple[np.ndarray, Recorder]:
    dev = Recorder(text, **opts)
    (out,) = PlanRun(plan, dev).run(xs)
    return np.asarray(out, np.float64), dev


def _kinds(plan: dict) -> list[str]:
    return [k["kind"] for k in plan["kernels"]]


# ---------------------------------------------------------------- selection and plan


def test_selection() -> None:
    a, b = np.zeros((33, 72), np.float16), np.zeros((72, 40), np.float16)
    text, plan = _emit("nn", "f16", [a, b])
    assert _kinds(plan) == ["matmul(wgmma)"] and ".target sm_90a" in text
    assert _kinds(_emit("nn", "f16", [a, b], "sm_90a")[1]) == ["matmul(wgmma)"]
    for arch in ("sm_80", "sm_100"):  # no wgmma there: the mma.sync kernel
        text, plan = _emit("nn", "f16", [a, b], arch)
        assert _kinds(plan) == ["matmul(mma)"] and "wgmma" not in text
    odd = [np.zeros((33, 70), np.float16), np.zeros((70, 40), np.float16)]  # 140-byte rows
    text, plan = _emit("nn", "f16", odd)
    assert _kinds(plan) == ["matmul(mma)"] and ".target sm_90\n" in text
    f32 = [x.astype(np.float32) for x in (a, b)]
    assert _kinds(_emit("nn", "f32", f32)[1]) == ["matmul"]


def test_plan_describes_the_tensor_maps() -> None:
    xs = _inputs("nn", "f16", {"M": 33, "K": 72, "N": 40})
    text, plan = _emit("nn", "f16", xs)
    (launch,) = [s for s in plan["blocks"][0]["steps"] if s["op"] == "launch"]
    maps = [a for a in launch["args"] if "tmap" in a]
    assert [(m["dims"], m["strides"], m["box"], m["swizzle"]) for m in maps] == [
        ([72, 33], [144], [64, 128], 3),      # A K-major: (K, M), box 64 k x 128 rows
        ([40, 72], [80], [64, 64], 3)]        # B N-major: (N, K), boxes 64 n x 64 k
    assert launch["block"] == [384, 1, 1] and launch["shared_bytes"] == 4 * 32768 + 64
    assert plan["kernels"][0]["params"].count("tmap") == 2
    assert ".param .align 64 .b8 p" in text and ".maxnreg 168" in text
    assert "setmaxnreg.dec.sync.aligned.u32 40" in text
    assert "setmaxnreg.inc.sync.aligned.u32 232" in text
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16" in text
    assert text.count("cp.async.bulk.tensor.2d") == 1 + 2  # A: one box; B: two 64-wide boxes


def test_symbolic_shapes_choose_the_kernel_at_launch() -> None:
    """Without shapes both kernels are emitted: the Hopper one runs where the strides suit
    TMA, the sm_80 one elsewhere (a K of 70 halves makes 140-byte rows)."""
    xs = _inputs("nn", "f16", {"M": 20, "K": 72, "N": 24})
    text, plan = _emit("nn", "f16", xs, static=False)
    assert _kinds(plan) == ["matmul(wgmma)", "matmul(mma)"]
    steps = [s for s in plan["blocks"][0]["steps"] if s["op"] == "launch"]
    assert steps[1]["when"] == f"not ({steps[0]['when']})"
    for k, name in ((72, "k_k1_matmul"), (70, "k_k1_matmul_sm80")):
        xs = _inputs("nn", "f16", {"M": 20, "K": k, "N": 24})
        got, dev = _run(text, plan, xs)
        assert dev.names == [name]
        np.testing.assert_allclose(got, _want("nn", xs), rtol=2e-2, atol=2e-2)


# ---------------------------------------------------------------- values


@pytest.mark.parametrize("kind, t, dims", [
    ("nt", "f16", {"M": 129, "K": 72, "N": 65}),     # odd M, N; k tail; both K-major
    ("nn", "f16", {"M": 1, "K": 64, "N": 8}),        # one row; B N-major, 8 of 64 columns
    ("nn", "f16", {"M": 66, "K": 640, "N": 72}),     # 10 k tiles: the 4-stage ring wraps twice
    ("tn", "f16", {"M": 72, "K": 136, "N": 24}),     # A M-major (imm-trans-a)
    ("epi", "bf16", {"M": 33, "K": 72, "N": 65}),    # bf16, fused bias + relu epilogue
    ("bmm", "f16", {"B": 3, "M": 17, "K": 64, "N": 24}),   # batch: 3-D tensor maps
    ("bcast", "f16", {"B": 2, "M": 9, "K": 64, "N": 16}),  # B shared by the batch: 2-D map
])
def test_matches_numpy(kind: str, t: str, dims: dict[str, int]) -> None:
    xs = _inputs(kind, t, dims)
    text, plan = _emit(kind, t, xs)
    assert _kinds(plan) == ["matmul(wgmma)"]
    got, dev = _run(text, plan, xs)
    np.testing.assert_allclose(got, _want(kind, xs), rtol=2e-2, atol=2e-2)


def test_wide_tile_and_interleaved_warpgroups(monkeypatch) -> None:
    """128 x 256 tiles (m64n256k16), run with warpgroups interleaved in reverse order."""
    monkeypatch.setattr(wgmma_gemm, "tile_n", lambda spec: 256)
    xs = _inputs("nt", "f16", {"M": 70, "K": 136, "N": 264})
    text, plan = _emit("nt", "f16", xs)
    assert "m64n256k16" in text and plan["blocks"][0]["steps"][-2]["grid"][0] == 2
    got, _ = _run(text, plan, xs, schedule="reverse")
    np.testing.assert_allclose(got, _want("nt", xs), rtol=2e-2, atol=2e-2)


def test_tile_width_policy() -> None:
    """128 x 256 only where that grid still fills two waves of 132 SMs."""
    for (m, n), tn in (((4096, 4096), 256), ((1024, 1024), 128), ((8192, 128), 128)):
        xs = [np.zeros((m, 64), np.float16), np.zeros((64, n), np.float16)]
        text, _ = _emit("nn", "f16", xs)
        assert f"m64n{tn}k16" in text, (m, n)


# ---------------------------------------------------------------- ptxas


@pytest.mark.parametrize("kind, t", [("nn", "f16"), ("epi", "bf16"), ("tn", "f16"),
                                     ("bmm", "f16")])
def test_assembles_for_sm_90a_without_spills(ptxas: str, kind: str, t: str) -> None:
    dims = {"B": 2, "M": 4096, "K": 4096, "N": 4096} if kind != "bmm" else \
        {"B": 2, "M": 64, "K": 64, "N": 64}
    names = {"nn": "ab", "tn": "ab", "epi": "abc", "bmm": "ab"}[kind]
    shapes = {"nn": [("M", "K"), ("K", "N")], "tn": [("K", "M"), ("K", "N")],
              "epi": [("M", "K"), ("N", "K"), ("N",)], "bmm": [("B", "M", "K"), ("B", "K", "N")]}
    sh = {n: tuple(dims[d] for d in s) for n, s in zip(names, shapes[kind])}
    text, plan = emit_ptx(corpus_module(SRC[kind].format(t=t)), "k", "sm_90", sh)
    assert _kinds(plan) == ["matmul(wgmma)"]
    rc, log = assemble(ptxas, text, "sm_90")
    assert rc == 0, log
    assert spills(log) == {plan["kernels"][0]["name"]: 0}, log


# ---------------------------------------------------------------- synchronisation


def _sync_kernel() -> tuple[str, dict, list[np.ndarray]]:
    """64 x 384 x 64: 6 k tiles, so stages 0 and 1 are refilled."""
    xs = _inputs("nn", "f16", {"M": 64, "K": 384, "N": 64}, seed=3)
    text, plan = _emit("nn", "f16", xs)
    return text, plan, xs


def _delete(text: str, pattern: str, which: int = 0, with_next: bool = False) -> str:
    lines = text.splitlines()
    hits = [i for i, ln in enumerate(lines) if re.search(pattern, ln)]
    i = hits[which]
    del lines[i:i + (2 if with_next else 1)]
    return "\n".join(lines) + "\n"


def test_intact_kernel_is_race_free_in_every_schedule() -> None:
    text, plan, xs = _sync_kernel()
    for schedule in ("lockstep", "forward", "rotate"):
        got, _ = _run(text, plan, xs, schedule=schedule)
        np.testing.assert_allclose(got, _want("nn", xs), rtol=2e-2, atol=2e-2)


# (what is deleted, which occurrence, also the loop branch after it, the expected report as
# a regex; alternatives for the orders the schedules give, WIADSL_PTXSIM_SCHEDULE). Without
# the full-barrier wait the consumers read a stage before a TMA wrote it (an uninitialized
# read) or unordered after (a race); with the init check off they may finish early on zeros,
# and the producer, whose later refills no consumer releases, waits forever (a deadlock).
DELETIONS = {
    "consumer full-barrier wait": (r"mbarrier\.try_wait", 0, True,
                                   "reads uninitialized shared memory|race on shared 'wg_smem'"),
    "consumer full-barrier wait, no init check": (r"mbarrier\.try_wait", 0, True,
                                                  "race on shared 'wg_smem'|deadlock"),
    "producer empty-barrier wait": (r"mbarrier\.try_wait", 1, True, "race on shared 'wg_smem'"),
    "wgmma.wait_group 1": (r"wgmma\.wait_group\.sync\.aligned 1", 0, False,
                           "write-after-read race"),
    "wgmma.wait_group 0": (r"wgmma\.wait_group\.sync\.aligned 0", 0, False, "in flight"),
    "wgmma.fence": (r"wgmma\.fence", 0, False, r"without a wgmma\.fence"),
    "fence.mbarrier_init": (r"fence\.mbarrier_init", 0, False, r"no fence\.mbarrier_init"),
    "bar.sync after the inits": (r"bar\.sync 0", 0, False,
                                 "not ordered before|used before mbarrier.init"),
    "consumer release (empty arrive)": (r"mbarrier\.arrive\.shared", 0, False, "deadlock"),
    "producer expect_tx arrive": (r"mbarrier\.arrive\.expect_tx", 0, False, "deadlock"),
}


@pytest.mark.parametrize("what", sorted(DELETIONS))
def test_deleting_a_synchronisation_is_reported(what: str) -> None:
    pattern, which, with_next, message = DELETIONS[what]
    text, plan, xs = _sync_kernel()
    broken = _delete(text, pattern, which, with_next)
    assert broken != text
    opts = {"check_uninitialized_shared": False} if "no init check" in what else {}
    with pytest.raises(PtxSimError, match=message) as err:
        _run(broken, plan, xs, **opts)
    if "race" in str(err.value).split(",")[0]:
        assert isinstance(err.value, SimRaceError)


# ---------------------------------------------------------------- int8 and tf32


I8T = ("kernel k(input a: i8[M, K], input b: i8[N, K], output y: i32[M, N]) "
       "{ y = cast(a, i32) @ cast(transpose(b), i32); }")
F32T = "kernel k(input a: f32[M, K], input b: f32[N, K], output y: f32[M, N]) { y = a @ transpose(b); }"


def test_int8_runs_on_wgmma_k32(ptxas: str) -> None:
    rng = np.random.default_rng(5)
    a = rng.integers(-128, 128, (70, 144)).astype(np.int8)
    b = rng.integers(-128, 128, (40, 144)).astype(np.int8)
    text, plan = emit_ptx(corpus_module(I8T), "k", "sm_90", {"a": a.shape, "b": b.shape})
    assert _kinds(plan) == ["matmul(wgmma)"] and "m64n128k32.s32.s8.s8" in text
    rc, log = assemble(ptxas, text, "sm_90")
    assert rc == 0 and spills(log) == {plan["kernels"][0]["name"]: 0}, log
    got, _ = _run(text, plan, [a, b])
    np.testing.assert_array_equal(got, a.astype(np.int64) @ b.astype(np.int64).T)
    # an i8 B stored [K, N] is N-major: wgmma cannot transpose 8-bit operands
    nn = I8T.replace("i8[N, K]", "i8[K, N]").replace("cast(transpose(b), i32)", "cast(b, i32)")
    kinds = _kinds(emit_ptx(corpus_module(nn), "k", "sm_90", {"a": (70, 144), "b": (144, 48)})[1])
    assert "matmul(wgmma)" not in kinds


def test_tf32_only_with_allow_tf32(ptxas: str) -> None:
    rng = np.random.default_rng(6)
    a = rng.standard_normal((33, 40)).astype(np.float32)
    b = rng.standard_normal((24, 40)).astype(np.float32)
    shapes = {"a": a.shape, "b": b.shape}
    assert "matmul(wgmma)" not in _kinds(emit_ptx(corpus_module(F32T), "k", "sm_90", shapes)[1])
    text, plan = emit_ptx(corpus_module(F32T), "k", "sm_90", shapes, allow_tf32=True)
    assert _kinds(plan) == ["matmul(wgmma)"] and "m64n128k8.f32.tf32.tf32" in text
    rc, log = assemble(ptxas, text, "sm_90")
    assert rc == 0 and spills(log) == {plan["kernels"][0]["name"]: 0}, log
    got, _ = _run(text, plan, [a, b])
    # tf32 keeps 10 mantissa bits (the simulator truncates the f32 operands to them)
    trunc = [truncate_to_tf32(x) for x in (a, b)]
    np.testing.assert_allclose(got, trunc[0].astype(np.float64) @ trunc[1].T.astype(np.float64),
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got, a.astype(np.float64) @ b.T.astype(np.float64), rtol=1e-2,
                               atol=1e-2)
