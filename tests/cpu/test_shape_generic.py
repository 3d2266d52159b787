"""Shape-generic CPU code (issue 21): a kernel called with many extents compiles a
handful of times, generic code gives NumPy's results at every size (odd, 1, 0,
run-time broadcasting), and a kernel called at one shape keeps static code."""

from __future__ import annotations

import numpy as np
import pytest

import wiadsl
from wiadsl.backends.llvm.backend import CpuKernel
from wiadsl.backends.llvm.shape_policy import ShapePolicy
from wiadsl.diagnostics import WiaRuntimeError, WiaUsageError
from wiadsl.ir import parse_module, print_module
from wiadsl.loops import lower_module
from wiadsl.testing.filecheck import filecheck

ADD = "kernel add(input a: f32[N], input b: f32[N], output c: f32[N]) { c = relu(a * b + 1.0); }"
MATMUL = "kernel mm(input A: f32[M, K], input B: f32[K, N], output C: f32[M, N]) { C = A @ B; }"
ANY = "kernel add2(input t: tensor, input u: tensor, output y: tensor) { y = t * u + t; }"
ROWS = """import nn;
kernel rows(input x: f32[R, C], input g: f32[C], input b: f32[C], output y: f32[R, C],
            output s: f32[R, C]) {
    y = nn.layer_norm(x, g, b, eps=1e-5);
    s = nn.softmax(x, axis=-1);
}
"""


def compiled_kernel(fn) -> CpuKernel:
    (kernel,) = fn._specializations.values()
    return kernel


def test_a_thousand_extents_compile_twice() -> None:
    """The issue's goal: 1,000 calls with 1,000 distinct extents, at most 8 compiles;
    here the first shape's static code and one generic code."""
    rng = np.random.default_rng(0)
    add = wiadsl.jit(ADD, kernel="add")
    mm = wiadsl.jit(MATMUL, kernel="mm")
    for i in range(1000):
        a, b = rng.standard_normal((2, i + 1)).astype(np.float32)
        np.testing.assert_allclose(add(a, b), np.maximum(a * b + 1, 0), rtol=1e-6, atol=1e-6)
        m, n = 1 + i % 101, 1 + (7 * i) % 103  # 1,000 distinct (M, N) pairs
        A = rng.standard_normal((m, 5)).astype(np.float32)
        B = rng.standard_normal((5, n)).astype(np.float32)
        np.testing.assert_allclose(mm(A, B), A @ B, rtol=1e-5, atol=1e-5)
    assert compiled_kernel(add).compiles == 2
    assert compiled_kernel(mm).compiles == 2
    assert add.stats["code"] == "generic" and add.stats["cache"] == "memory"


def test_one_shape_keeps_static_code() -> None:
    add = wiadsl.jit(ADD, kernel="add")
    a = np.arange(8, dtype=np.float32)
    for _ in range(3):
        add(a, a)
    assert add.stats["code"] == "static" and add.stats["pattern"] == ((8,), (8,))
    assert compiled_kernel(add).compiles == 1


@pytest.mark.parametrize("policy", ["auto", "generic"])
@pytest.mark.parametrize("level", [0, 3])
def test_rows_and_matmul_at_odd_sizes(policy: str, level: int) -> None:
    rng = np.random.default_rng(1)
    rows = wiadsl.jit(ROWS, kernel="rows", shapes=policy, opt_level=level)
    mm = wiadsl.jit(MATMUL, kernel="mm", shapes=policy, opt_level=level)
    for r, c in [(7, 33), (1, 1), (33, 7), (129, 1), (2, 129), (0, 5)]:
        x = rng.standard_normal((r, c)).astype(np.float32)
        g, b = rng.standard_normal((2, c)).astype(np.float32)
        y, s = rows(x, g, b)
        mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        np.testing.assert_allclose(y, (x - mean) / np.sqrt(var + 1e-5) * g + b, rtol=1e-4, atol=1e-4)
        e = np.exp(x - x.max(-1, keepdims=True)) if r else x
        np.testing.assert_allclose(s, e / e.sum(-1, keepdims=True) if r else x, rtol=1e-5, atol=1e-6)
        A = rng.standard_normal((r, c)).astype(np.float32)
        B = rng.standard_normal((c, r + 3)).astype(np.float32)
        np.testing.assert_allclose(mm(A, B), A @ B, rtol=1e-4, atol=1e-4)
    if policy == "generic":
        assert compiled_kernel(rows).compiles == 1 and compiled_kernel(mm).compiles == 1


@pytest.mark.parametrize("policy", ["auto", "generic"])
def test_run_time_broadcasting_in_generic_code(policy: str) -> None:
    """``tensor`` parameters: whether an axis broadcasts is known only at run time,
    so generic code keeps the extent-1 selects and the shape checks."""
    k = wiadsl.jit(ANY, kernel="add2", shapes=policy)
    rng = np.random.default_rng(2)
    pairs = [((5, 3), (5, 3)), ((5, 3), (1, 3)), ((5, 3), (5, 1)), ((1, 1), (4, 4)),
             ((1, 7), (6, 1)), ((0, 3), (1, 3)), ((1, 3), (0, 3))]
    for ts, us in pairs:
        t, u = rng.standard_normal(ts).astype(np.float32), rng.standard_normal(us).astype(np.float32)
        np.testing.assert_allclose(k(t, u), t * u + t, rtol=1e-6)
    with pytest.raises(WiaRuntimeError, match="do not broadcast"):
        k(np.ones((5, 3), np.float32), np.ones((4, 3), np.float32))


def test_generic_entry_checks_that_one_dim_name_has_one_extent() -> None:
    """The jit's binding refuses such a call first; the entry's own check keeps bad
    extents from another caller (an AOT object's) out of the loops."""
    module = wiadsl.jit(ADD, kernel="add").ir_for()
    kernel = CpuKernel(module, "add", shapes="generic")
    np.testing.assert_array_equal(kernel.run([np.ones(4, np.float32)] * 2)[0], np.full(4, 2.0))
    with pytest.raises(WiaRuntimeError, match="dim 'N' has two different extents"):
        kernel.run([np.ones(5, np.float32), np.ones(6, np.float32)])


def test_policy_patterns() -> None:
    auto = ShapePolicy("auto")
    assert auto.pattern_for(((4, 8), (8, 2))) == ((4, 8), (8, 2))  # first: static
    assert auto.pattern_for(((5, 8), (8, 2))) == ((None, 8), (8, 2))  # M varied
    assert auto.pattern_for(((6, 8), (8, 2))) == ((None, 8), (8, 2))  # the same code
    assert auto.pattern_for(((6, 8), (8, 3))) == ((None, 8), (8, None))  # N too: wider
    assert auto.pattern_for(((4, 8), (8, 2))) == ((None, 8), (8, None))
    assert ShapePolicy("static").pattern_for(((5,),)) == ((5,),)
    assert ShapePolicy("generic").pattern_for(((5, 2), ())) == ((None, None), ())


def test_bad_policy_names_the_option() -> None:
    add = wiadsl.jit(ADD, kernel="add", shapes="sometimes")
    with pytest.raises(WiaUsageError, match="option 'shapes' of target 'cpu'.*'sometimes'"):
        add(np.ones(2, np.float32), np.ones(2, np.float32))  # options are read at compile


EQUAL_DIMS = """
func @f(%a: tensor<?xf32>, %b: tensor<?xf32>) -> tensor<?xf32> attributes {kernel, outputs = ["c"], arg_dims = [["N"], ["N"]]} {
^entry:
  %0 = tensor.mul %a, %b : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
  return %0 : tensor<?xf32>
}
"""


def test_one_dim_name_is_one_extent_in_the_loops() -> None:
    """Two ``f32[N]`` operands: one check at entry, then the loop reads both at the
    induction value, without the extent-1 selects that keep LLVM from vectorizing."""
    out = print_module(lower_module(parse_module(EQUAL_DIMS)))
    filecheck(out, """
    CHECK: %0 = tensor.dim %a {axis = 0}
    CHECK: %3 = tensor.dim %b {axis = 0}
    CHECK: arith.cmpi eq, %3, %0
    CHECK-NEXT: loop.check {{%[0-9]+}} {message = "dim 'N' has two different extents among the arguments"}
    CHECK: ^body:
    CHECK-NEXT: loop.load %a, %i
    CHECK-NEXT: loop.load %b, %i
    CHECK-NEXT: arith.mul
    """)
    assert "arith.select" not in out and out.count("loop.check") == 1
