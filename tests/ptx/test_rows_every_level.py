"""softmax, layer_norm and rms_norm are one row kernel at every -O level (issue 22).

-O2's ``fuse`` pass turns the row pattern into ``tensor.fused_reduce`` ops (reductions
plus an elementwise epilogue); the planner keeps those lazy as it keeps the unfused
ops, so the whole row stays in one kernel. Kernel counts come from the plan the
ptxsim target ran; values are checked against NumPy in the simulator on odd widths.
"""

from __future__ import annotations

import numpy as np
import pytest

from wiadsl.backends.ptx.emit import emit_ptx
from wiadsl.backends.ptx.program import optimized
from wiadsl.runtime.jit import jit

from .helpers import corpus_module

RNG = np.random.default_rng(22)
ROWS = 5
WIDTHS = (1, 7, 33, 129)
LEVELS = (0, 1, 2, 3)
SOURCES = {
    "softmax": "import nn;\nkernel k(input a: f32[M, N], output y: f32[M, N]) { y = nn.softmax(a); }",
    "layer_norm": "import nn;\nkernel k(input a: f32[M, N], input g: f32[N], input b: f32[N],"
                  " output y: f32[M, N]) { y = nn.layer_norm(a, g, b); }",
    "rms_norm": "import nn;\nkernel k(input a: f32[M, N], input g: f32[N], output y: f32[M, N])"
                " { y = nn.rms_norm(a, g); }",
}
TOL = {"rtol": 1e-5, "atol": 2e-6}


def numpy_reference(name: str, a: np.ndarray, *params: np.ndarray) -> np.ndarray:
    """The stdlib definitions (stdlib/nn.wia), in float64."""
    x = a.astype(np.float64)
    if name == "softmax":
        e = np.exp(x - x.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)
    if name == "layer_norm":
        g, b = params
        xc = x - x.mean(-1, keepdims=True)
        return xc / np.sqrt((xc * xc).mean(-1, keepdims=True) + 1e-5) * g + b
    (g,) = params
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * g


def arguments(name: str, n: int) -> list[np.ndarray]:
    a = RNG.standard_normal((ROWS, n)).astype(np.float32) * 3
    extra = {"softmax": 0, "layer_norm": 2, "rms_norm": 1}[name]
    return [a] + [RNG.standard_normal(n).astype(np.float32) for _ in range(extra)]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("name", list(SOURCES))
def test_one_kernel_per_row_op_on_the_simulator(name: str, level: int) -> None:
    fn = jit_kernel_at(name, level)
    for n in WIDTHS:
        args = arguments(name, n)
        got = fn(*args)
        assert fn.stats["kernels"] == 1 and fn.stats["launches"] == 1, (name, level, n, fn.stats)
        np.testing.assert_allclose(got, numpy_reference(name, *args), **TOL)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("name", list(SOURCES))
def test_symbolic_shapes_are_one_row_kernel(name: str, level: int) -> None:
    """Without shapes too (what ``wiac -o x.ptx`` writes without -D): one single-pass row."""
    _, plan = emit_ptx(optimized(corpus_module(SOURCES[name]), level), "k")
    assert [k["kind"] for k in plan["kernels"]] == ["row(1-pass)"]


def test_fused_reduce_feeding_a_matmul_is_materialized() -> None:
    """A fused_reduce result that a non-fusing op (matmul) consumes is computed by its own
    row kernel and then read by the matmul, at -O2 as at -O0 (two kernels)."""
    src = ("import nn;\nkernel k(input a: f32[M, N], input w: f32[N, P], output y: f32[M, P])"
           " { y = nn.softmax(a) @ w; }")
    a = RNG.standard_normal((6, 33)).astype(np.float32)
    w = RNG.standard_normal((33, 5)).astype(np.float32)
    want = numpy_reference("softmax", a) @ w
    for level in (0, 2):
        fn = jit(src, "k", target="ptxsim", filename="<ptx-corpus>", opt_level=level)
        np.testing.assert_allclose(fn(a, w), want, rtol=1e-5, atol=1e-6)
        assert fn.stats["kernels"] == 2, (level, fn.stats)


def jit_kernel_at(name: str, level: int):
    return jit(SOURCES[name], "k", target="ptxsim", filename="<ptx-corpus>", opt_level=level)
