"""Single-pass row kernels (row cached in shared memory) and two-pass grid reductions,
run in the simulator against the interpreter on odd shapes; each assembles with ptxas."""

from __future__ import annotations

import numpy as np
import pytest

from wiadsl.backends.ptx.emit import emit_ptx
from wiadsl.backends.ptx.executor import PlanRun
from wiadsl.backends.ptx.kernels.row_cache import ROW_CACHE_BYTES
from wiadsl.backends.ptx.simbackend import SimDevice
from wiadsl.ir.parser import parse_module

from .helpers import assemble, corpus_module, jit_kernel, spills
from .test_plan import FUSED_IR

RNG = np.random.default_rng(3)
SOFTMAX = "import nn;\nkernel k(input a: f32[M, N], output y: f32[M, N]) { y = nn.softmax(a); }"
LAYER_NORM = ("import nn;\nkernel k(input a: f32[M, N], input g: f32[N], input b: f32[N],"
              " output y: f32[M, N]) { y = nn.layer_norm(a, g, b); }")
FULL = ("kernel k(input a: f32[M, N], output s: f32, output m: f32, output i: i64, output j: i64) {"
        " s = reduce_sum(a) * 2.0; m = reduce_mean(a); i = argmax(a); j = argmin(a); }")
TOL = {"rtol": 2e-5, "atol": 2e-6}


def _args(src: str, m: int, n: int) -> list[np.ndarray]:
    a = [RNG.standard_normal((m, n)).astype(np.float32)]
    return a + ([RNG.standard_normal(n).astype(np.float32) for _ in range(2)] if "g:" in src else [])


def _run_plan(src_or_module, args: list[np.ndarray]):
    module = corpus_module(src_or_module) if isinstance(src_or_module, str) else src_or_module
    text, plan = emit_ptx(module, "k")
    return plan, PlanRun(plan, SimDevice(text)).run(args)


@pytest.mark.parametrize("src,m,n", [(SOFTMAX, 129, 33), (LAYER_NORM, 3, 300)])
def test_single_pass_rows_match_interpreter(src: str, m: int, n: int) -> None:
    args = _args(src, m, n)
    shapes = {"a": (m, n), "g": (n,), "b": (n,)}
    text, plan = emit_ptx(corpus_module(src), "k", shapes=shapes)
    assert [k["kind"] for k in plan["kernels"]] == ["row(1-pass)"]
    assert text.count("ld.global.f32") == (1 if src is SOFTMAX else 3)  # a once (+ g, b)
    np.testing.assert_allclose(jit_kernel(src, "k", "ptxsim")(*args),
                               jit_kernel(src, "k", "interp")(*args), **TOL)


@pytest.mark.parametrize("n", [40, ROW_CACHE_BYTES // 4 + 9])
def test_dynamic_rows_choose_cache_at_launch(n: int) -> None:
    """Symbolic sizes: one kernel; rows longer than the cache re-read global memory."""
    args = _args(LAYER_NORM, 2, n)
    plan, (got,) = _run_plan(LAYER_NORM, args)
    assert [k["kind"] for k in plan["kernels"]] == ["row(1-pass)"]
    np.testing.assert_allclose(got, jit_kernel(LAYER_NORM, "k", "interp")(*args), rtol=2e-5, atol=2e-5)


def test_fused_reduce_epilogue_is_single_pass() -> None:
    module = parse_module(FUSED_IR)
    from wiadsl.ir.interpreter import run_func
    x, b = RNG.standard_normal((129, 33)).astype(np.float32), RNG.standard_normal(33).astype(np.float32)
    plan, got = _run_plan(module, [x, b])
    assert [k["kind"] for k in plan["kernels"]] == ["elementwise", "row(1-pass)"]
    for g, w in zip(got, run_func(module, "k", [x, b]), strict=True):
        np.testing.assert_allclose(g, w, **TOL)


@pytest.mark.parametrize("m,n", [(129, 65), (7, 3)])
def test_full_reductions_match_interpreter(m: int, n: int) -> None:
    a = RNG.standard_normal((m, n)).astype(np.float32)
    a[5 % m, n - 1] = a.max()  # a tie: the first index wins
    a[0, 0] = a.min()
    got = jit_kernel(FULL, "k", "ptxsim")(a)
    want = jit_kernel(FULL, "k", "interp")(a)
    kinds = [k["kind"] for k in emit_ptx(corpus_module(FULL), "k", shapes={"a": (m, n)})[1]["kernels"]]
    assert kinds == (["reduce(grid)", "reduce(final)"] * 4 if m * n > 8192 else ["row(thread)"] * 4)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, **TOL) if np.asarray(w).dtype.kind == "f" else \
            np.testing.assert_array_equal(g, w)


def test_dynamic_full_reduction_is_two_pass() -> None:
    a = RNG.standard_normal((3, 5)).astype(np.float32)
    plan, got = _run_plan(FULL, [a])
    launch = next(s for s in plan["blocks"][0]["steps"] if s["op"] == "launch")
    assert launch["grid"][0] == "max(1, min(cdiv((a_0) * (a_1), 1024), 1024))"
    np.testing.assert_allclose(got[:2], [a.sum() * 2, a.mean()], rtol=1e-6)
    assert list(got[2:]) == [a.argmax(), a.argmin()]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("src", [SOFTMAX, LAYER_NORM, FULL], ids=["softmax", "layer_norm", "full"])
def test_row_kernels_assemble_without_spills(ptxas: str, src: str, arch: str) -> None:
    for shapes in (None, {"a": (129, 65), "g": (65,), "b": (65,)}):
        text, _ = emit_ptx(corpus_module(src), "k", arch, shapes)
        rc, log = assemble(ptxas, text, arch)
        assert rc == 0, log
        assert all(v == 0 for v in spills(log).values()), log
