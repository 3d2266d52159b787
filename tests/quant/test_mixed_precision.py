"""``mixed-precision{dtype=...}``: D storage, f32 accumulation, within the documented bounds."""

import numpy as np
import pytest

import wiadsl
from wiadsl.ir import run_func
from wiadsl.passes import optimize

SRC = """import nn;
kernel k(input a: f32[M, K], input b: f32[K, N], output c: f32[M, N], output s: f32[M, N], output r: f32[M]) {
    c = a @ b;
    s = nn.softmax(c);
    r = reduce_sum(a, axis=1);
}"""
U = {"bf16": 2.0 ** -8, "f16": 2.0 ** -11}


def run(dtype, target):
    rng = np.random.default_rng(2)
    a = rng.standard_normal((20, 70)).astype(np.float32)
    b = rng.standard_normal((70, 30)).astype(np.float32) * 0.2
    k = wiadsl.jit(SRC, kernel="k")
    module = k.ir_for()
    optimize(module, pipeline=f"inline,canonicalize,mixed-precision{{dtype={dtype}}},cse,dce")
    assert f"x{dtype}>" in str(module)
    if target == "interp":
        got = run_func(module, "k", [a, b])
    else:
        from wiadsl.backends.llvm.backend import CpuBackend
        got = CpuBackend().compile(module, "k", {}).run([a, b])
    return a, b, got


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
@pytest.mark.parametrize("target", ["interp", "cpu"])
def test_within_documented_tolerance(dtype, target):
    a, b, (c, s, r) = run(dtype, target)
    u = U[dtype]
    c32 = a @ b
    assert np.all(np.abs(c - c32) <= 3 * u * (np.abs(a) @ np.abs(b)) + 1e-6)
    e = np.exp(c32 - c32.max(axis=1, keepdims=True))
    assert np.abs(s - e / e.sum(axis=1, keepdims=True)).max() <= 4 * u + 3 * u * np.abs(c32).max() * 0.5
    assert np.all(np.abs(r - a.sum(axis=1)) <= 3 * u * np.abs(a).sum(axis=1) + 1e-6)
    assert np.abs(c - c32).max() > 0  # it really is lower precision


def test_bad_dtype_is_a_usage_error():
    with pytest.raises(wiadsl.WiaUsageError, match="bf16 or f16"):
        optimize(wiadsl.jit("kernel k(input a: f32[N], output b: f32[N]) { b = a; }", kernel="k").ir_for(),
                 pipeline="mixed-precision{dtype=f8}")
