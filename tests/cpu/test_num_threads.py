"""The thread count of CPU code (backends/llvm/threads.py): ``set_num_threads`` and
``WIADSL_NUM_THREADS`` change how many threads a parallel region uses, at run time,
without recompiling; results do not depend on it; bad values are clear errors.

Not timed: thread counts are observed by the identities of the threads that run
chunks, with chunks that wait for one another (so a slow machine cannot make the
caller finish every chunk alone)."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import wiadsl
from wiadsl.backends.llvm.library import pool_address
from wiadsl.backends.llvm.parallel import LIMIT_SYMBOL, THREADS
from wiadsl.backends.llvm.threads import MAX_THREADS

from .test_pool import POOL, WORKER

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SRC = """
import nn;
kernel fused(input a: f32[N], input b: f32[N], input c: f32[N], output y: f32[N]) { y = relu(a * b + c); }
kernel mm(input A: f32[M, K], input B: f32[K, N], output C: f32[M, N]) { C = A @ B; }
kernel rows(input x: f32[R, C], output y: f32[R, C]) { y = nn.softmax(x, axis=1); }
"""
rng = np.random.default_rng(11)


pytestmark = pytest.mark.usefixtures("restore_thread_count")


def threads_seen(regions: int, want: int, wait_s: float = 0.5, deadline_s: float = 300.0) -> set[int]:
    """Thread identities that ran chunks of up to ``regions`` regions of 16 chunks;
    each chunk waits (at most ``wait_s``) until ``want`` threads have shown up, and
    the regions stop early once they have."""
    seen: set[int] = set()
    enough = threading.Event()
    lock = threading.Lock()

    def body(_ctx: int, _a: int, _b: int) -> int:
        with lock:
            seen.add(threading.get_ident())
            if len(seen) >= want:
                enough.set()
        enough.wait(timeout=wait_s)
        return 0
    cb = WORKER(body)
    pf = POOL(pool_address())
    deadline = time.monotonic() + deadline_s
    for _ in range(regions):
        assert pf(ctypes.cast(cb, ctypes.c_void_p), None, 0, 16, 1, 16) == 0
        if enough.is_set() or time.monotonic() > deadline:
            break
    return seen


def test_one_thread_runs_every_region_on_the_caller():
    wiadsl.set_num_threads(1)
    assert wiadsl.get_num_threads() == 1
    assert threads_seen(5, want=2, wait_s=0.1) == {threading.get_ident()}


@pytest.mark.skipif(THREADS < 2, reason="one CPU: compiled code has no parallel regions")
def test_a_region_uses_at_most_the_set_count_and_grows_to_it():
    wiadsl.set_num_threads(4)  # above this host's CPUs is allowed (oversubscribed)
    assert len(threads_seen(500, want=4)) == 4  # workers are created on demand
    for n in (2, 3, 1, 2):
        wiadsl.set_num_threads(n)
        # ask for one more thread than allowed: every chunk then waits its whole 0.1 s
        seen = threads_seen(2, want=n + 1, wait_s=0.1)
        assert threading.get_ident() in seen and len(seen) <= n


@pytest.mark.parametrize("n", [1, 2, 3])
def test_results_do_not_depend_on_the_thread_count(n):
    mod = wiadsl.jit(SRC, target="cpu")
    a, b, c = (rng.standard_normal((1 << 20) + 5).astype(np.float32) for _ in range(3))
    x = rng.standard_normal((129, 300)).astype(np.float32)
    y = rng.standard_normal((300, 257)).astype(np.float32)
    r = rng.standard_normal((1025, 257)).astype(np.float32)
    e = np.exp(r - r.max(axis=1, keepdims=True))
    wiadsl.set_num_threads(n)
    for _ in range(3):
        np.testing.assert_allclose(mod.fused(a, b, c), np.maximum(a * b + c, 0), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(mod.mm(x, y), x @ y, rtol=1e-4, atol=1e-3)
        np.testing.assert_allclose(mod.rows(r), e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("bad", [0, -1, MAX_THREADS + 1, 2.0, "2", True, None])
def test_a_bad_count_names_the_argument(bad):
    with pytest.raises(wiadsl.WiaCallError, match="set_num_threads: argument 'n' must be a whole number"):
        wiadsl.set_num_threads(bad)


def _child(code: str, env_value: str | None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, WIADSL_CACHE="0", PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("WIADSL_NUM_THREADS", None)
    if env_value is not None:
        env["WIADSL_NUM_THREADS"] = env_value
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts threads in /proc")
def test_the_environment_sets_the_starting_count_and_one_creates_no_workers():
    code = """
import os, numpy as np, wiadsl
print(wiadsl.get_num_threads())
k = wiadsl.jit("kernel f(input a: f32[N], output b: f32[N]) { b = a * 2.0 + 1.0; }", kernel="f", target="cpu")
big = np.arange(1 << 21, dtype=np.float32)
k(big)
before = len(os.listdir("/proc/self/task"))
for _ in range(20):
    assert (k(big) == big * 2 + 1).all()
print(len(os.listdir("/proc/self/task")) - before, before)
"""
    done = _child(code, "1")
    assert done.returncode == 0, done.stderr
    count, (grown, _) = done.stdout.split("\n")[0], done.stdout.split("\n")[1].split()
    assert count == "1" and grown == "0"
    done = _child("import wiadsl; print(wiadsl.get_num_threads())", " 3 ")
    assert done.returncode == 0 and done.stdout.strip() == "3", done.stderr


@pytest.mark.parametrize("value", ["abc", "0", "1.5", str(MAX_THREADS + 1)])
def test_a_bad_environment_value_is_a_usage_error(value):
    code = """
import wiadsl
try:
    wiadsl.get_num_threads()
except wiadsl.WiaUsageError as exc:
    print(exc)
"""
    done = _child(code, value)
    assert done.returncode == 0, done.stderr
    assert f"WIADSL_NUM_THREADS={value!r} is not a thread count" in done.stdout


def test_ahead_of_time_output_defines_the_count_for_its_host():
    from wiadsl.backends.llvm import emit_llvm
    mod = wiadsl.jit(SRC, target="cpu")
    text = emit_llvm(mod.kernels["fused"].ir_for({}), {"fused": [((1 << 20),)] * 3})
    lines = [line for line in text.splitlines() if line.startswith(f"@{LIMIT_SYMBOL} =")]
    if THREADS > 1:  # a host program may change the count through this symbol
        assert lines == [f"@{LIMIT_SYMBOL} = global i64 {THREADS}, align 8"]
    else:
        assert lines == []
