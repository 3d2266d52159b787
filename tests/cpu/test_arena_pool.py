"""The arena pool (backends/llvm/runtime.py): a kernel keeps its intermediate buffers
for its next call, which takes them back position by position when the sizes
match. Results must stay the caller's (never reused under it), shapes may change
between calls (shape-generic code), calls may come from many threads at once, and
a failing call frees everything. NumPy is the oracle; the IR is checked as text."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import wiadsl
from wiadsl.testing.filecheck import filecheck

from ..concurrency import run_in_threads

SRC = """
kernel chain(input a: f32[N], input b: f32[N], output y: f32[N], output z: f32[N]) {
    t = exp(a * 0.5) + b;
    u = t * t - a;
    y = u / (abs(t) + 1.0);
    z = t * 3.0;
}
kernel picked(input a: f32[N], input i: i64, output y: f32) {
    t = a * 2.0 + 1.0;
    y = t[i];
}
"""


def want(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    t = np.exp(a * np.float32(0.5)) + b
    u = t * t - a
    return u / (np.abs(t) + np.float32(1)), t * np.float32(3)


@pytest.fixture(scope="module", params=[0, 3], ids=["O0", "O3"])
def mod(request):
    return wiadsl.jit(SRC, target="cpu", opt_level=request.param)


def rand(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(n).astype(np.float32)


@pytest.mark.parametrize("sizes", [
    [33, 33, 129, 33, 1, 129, 7, 33],   # small results (copied out), shapes changing
    [300_000] * 3,                      # results handed over (64 KiB and up), pooled temporaries
], ids=["small", "large"])
def test_results_of_earlier_calls_keep_their_values(mod, sizes):
    kept = []
    for seed, n in enumerate(sizes):
        a, b = rand(n, seed), rand(n, seed + 100)
        kept.append((mod.chain(a, b), want(a, b)))
    for (y, z), (wy, wz) in kept:
        np.testing.assert_allclose(y, wy, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(z, wz, rtol=1e-5, atol=1e-5)


def test_calls_from_many_threads(mod):
    def work(seed: int) -> None:
        for k in range(40):
            n = (7, 33, 129)[(seed + k) % 3]
            a, b = rand(n, seed * 100 + k), rand(n, seed * 100 + k + 1)
            y, z = mod.chain(a, b)
            wy, wz = want(a, b)
            np.testing.assert_allclose(y, wy, rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(z, wz, rtol=1e-5, atol=1e-5)
    run_in_threads(work, 8)


def test_a_failing_call_frees_and_the_next_one_works(mod):
    a = rand(33, 1)
    assert mod.picked(a, 5) == pytest.approx(a[5] * 2 + 1)
    with pytest.raises(wiadsl.WiaRuntimeError, match="out of range"):
        mod.picked(a, 99)
    for i in (0, 32, -1):
        assert mod.picked(a, i) == pytest.approx(a[i] * 2 + 1)


def test_the_entry_takes_and_gives_back_the_pool():
    done = subprocess.run([sys.executable, "-m", "wiadsl", "-", "--kernel", "chain", "-D", "N=1000",
                           "--emit", "llvm", "-O2"], input=SRC, capture_output=True, text=True,
                          check=True)
    # the allocator and the end of a call are the arena helper's (linked in for --emit),
    # given the module's pool cell
    filecheck(done.stdout, """
    CHECK: @wia.arena.pool = internal global i64 0
    CHECK: define {{.*}}@wia_entry(
    CHECK: atomicrmw xchg ptr @wia.arena.pool, i64 0
    CHECK: call {{.*}}@wia.lib.arena.alloc(
    CHECK: call void @wia.lib.arena.finish({{.*}}@wia.arena.pool,
    CHECK: define {{.*}}@wia.lib.arena.alloc(
    CHECK: call {{.*}}@aligned_alloc(
    CHECK: define void @wia.lib.arena.finish(
    CHECK: cmpxchg ptr
    """)
