"""The native thread pool behind ``wia.parallel_for`` (backends/llvm/parallel.py):
chunking and first-error order (driven directly through ctypes), nested regions,
reuse of the same threads across many calls, concurrent regions from several
Python threads, errors raised inside workers, and a forked child."""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import wiadsl
from tests.cpu.forked import exit_code
from wiadsl.backends.llvm.library import pool_address
from wiadsl.backends.llvm.parallel import THREADS
from wiadsl.diagnostics import WiaRuntimeError

from ..concurrency import run_in_threads

WORKER = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
POOL = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                        ctypes.c_int64, ctypes.c_int64)

SRC = """
kernel fused(input a: f32[N], input b: f32[N], input c: f32[N], output y: f32[N]) { y = relu(a * b + c); }
kernel ipow(input a: i32[N], input b: i32[N], output y: i32[N]) { y = a ** b; }
kernel mm(input A: f32[M, K], input B: f32[K, N], output C: f32[M, N]) { C = A @ B; }
kernel conv(input x: f32[N, C, H, W], input w: f32[O, C, KH, KW], output y: f32[N, O, P, Q]) {
    y = conv2d(x, w, stride=1, padding=1);
}
"""

rng = np.random.default_rng(3)


@pytest.fixture(scope="module")
def mod():
    return wiadsl.jit(SRC, target="cpu")


def pool() -> Any:
    """The pool's ``parallel_for`` as a ctypes function."""
    return POOL(pool_address())


@contextlib.contextmanager
def two_threads() -> Iterator[None]:
    """Regions of two threads inside the block, whatever the host's CPUs or
    WIADSL_NUM_THREADS (at one, a region is a single serial call: no chunks)."""
    before = wiadsl.get_num_threads()
    wiadsl.set_num_threads(2)
    try:
        yield
    finally:
        wiadsl.set_num_threads(before)


def run(lo: int, hi: int, align: int, chunks: int, fail: dict[int, int] | None = None,
        inner: bool = False) -> tuple[int, list[tuple[int, int, int]]]:
    """parallel_for over [lo, hi) at two threads; returns its code and the (lo, hi,
    thread) of each chunk."""
    seen: list[tuple[int, int, int]] = []
    lock = threading.Lock()
    pf = pool()

    def body(_ctx: int, a: int, b: int) -> int:
        with lock:
            seen.append((a, b, threading.get_ident()))
        if inner:  # a nested region runs serially inside this chunk
            rc = pf(ctypes.cast(nested, ctypes.c_void_p), None, 0, 100, 1, 4)
            if rc != 0:
                return rc
        for start, code in (fail or {}).items():
            if a <= start < b:
                return code
        return 0

    def nested_body(_ctx: int, a: int, b: int) -> int:
        return 0 if (a, b) == (0, 100) else 99  # the whole range in one call
    nested = WORKER(nested_body)
    cb = WORKER(body)
    with two_threads():
        rc = pf(ctypes.cast(cb, ctypes.c_void_p), None, lo, hi, align, chunks)
    return rc, sorted(seen)


@pytest.mark.parametrize("lo,hi,align,chunks", [(0, 1000, 1, 4), (5, 1005, 16, 3), (0, 7, 8, 8),
                                                (-3, 40, 6, 100), (0, 1, 1, 2), (10, 10, 1, 2),
                                                (0, 100000, 8, 5000)])
def test_chunks_cover_the_range_once(lo, hi, align, chunks):
    rc, seen = run(lo, hi, align, chunks)
    assert rc == 0
    if hi <= lo:
        assert seen == []
        return
    assert seen[0][0] == lo and seen[-1][1] == hi
    for (a0, b0, _), (a1, _, _) in zip(seen, seen[1:], strict=False):
        assert b0 == a1 and a0 < b0
    # chunks start at whole units of ``align`` from lo, and hold as many of them as
    # another chunk, give or take one (the range's last unit may be short)
    assert all((a - lo) % align == 0 for a, _, _ in seen)
    units = [-(-(b - a) // align) for a, b, _ in seen]
    assert max(units) - min(units) <= 1
    assert len(seen) <= max(1, chunks)


@pytest.mark.parametrize("lo,hi,align,chunks,want", [
    (0, 49, 6, 2, [(0, 24), (24, 49)]),          # 8 whole units and a short one: 4 + 5
    (0, 16, 6, 2, [(0, 6), (6, 16)]),            # 6 + (6 + 4), not (6 + 6) + 4
    (0, 100, 6, 4, [(0, 24), (24, 48), (48, 72), (72, 100)]),
    (3, 11, 4, 8, [(3, 7), (7, 11)])])           # no more chunks than units
def test_chunks_are_even_in_whole_units(lo, hi, align, chunks, want):
    rc, seen = run(lo, hi, align, chunks)
    assert rc == 0 and [(a, b) for a, b, _ in seen] == want


def test_first_error_in_chunk_order():
    for _ in range(20):
        rc, _ = run(0, 64, 1, 8, fail={60: 7, 9: 5, 30: 6})
        assert rc == 5
    rc, _ = run(0, 64, 1, 8, fail={63: 4})
    assert rc == 4
    assert run(0, 64, 1, 8)[0] == 0  # the pool is usable after errors


def test_nested_region_runs_serially():
    rc, seen = run(0, 400, 1, 4, inner=True)
    assert rc == 0 and len(seen) == 4


@pytest.mark.skipif(THREADS < 2, reason="one CPU: no worker threads")
def test_worker_threads_take_chunks():
    """A worker thread runs some chunk. Not timed: each chunk holds on until another
    thread has run one (or a second passes), so however slow the machine, the caller
    cannot finish every chunk before a worker wakes; regions repeat up to a deadline."""
    threads: set[int] = set()
    other = threading.Event()
    lock = threading.Lock()

    def slow(_ctx: int, a: int, b: int) -> int:
        with lock:
            threads.add(threading.get_ident())
            if len(threads) > 1:
                other.set()
        other.wait(timeout=1.0)
        return 0
    cb = WORKER(slow)
    pf = pool()
    deadline = time.monotonic() + 300
    with two_threads():
        while not other.is_set() and time.monotonic() < deadline:
            assert pf(ctypes.cast(cb, ctypes.c_void_p), None, 0, 8, 1, 8) == 0
    assert len(threads) > 1


@pytest.mark.skipif(THREADS < 2, reason="one CPU: no worker threads")
def test_a_stalled_threads_block_is_taken_by_the_others():
    """Each participant starts on its own block of chunks (the caller's: the first
    ones); when one stalls, the others take the rest of its block. Chunk 0 (the
    caller's first) holds on until chunks 1-3, the rest of the caller's block of a
    two-thread region of 8, have run: only another thread can run them."""
    done: dict[int, int] = {}
    rest = threading.Event()
    lock = threading.Lock()

    def body(_ctx: int, a: int, b: int) -> int:
        if a == 0:
            if not rest.wait(timeout=30):
                return 9
        with lock:
            done[a] = threading.get_ident()
            if all(k in done for k in (1, 2, 3)):
                rest.set()
        return 0
    cb = WORKER(body)
    with two_threads():
        assert pool()(ctypes.cast(cb, ctypes.c_void_p), None, 0, 8, 1, 8) == 0
    assert sorted(done) == list(range(8))
    assert all(done[k] != done[0] for k in (1, 2, 3))


def _native_threads() -> int:
    return len(os.listdir("/proc/self/task"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts threads in /proc")
def test_threads_are_reused_across_calls(mod):
    a, b, c = (rng.standard_normal((1 << 20) + 3).astype(np.float32) for _ in range(3))
    x = rng.standard_normal((300, 200)).astype(np.float32)
    y = rng.standard_normal((200, 333)).astype(np.float32)
    want = np.maximum(a * b + c, 0)
    # NumPy's product before counting: OpenBLAS starts its own threads on its first call
    # (in a process whose earlier tests made none, the count went 4 -> 5 in the loop)
    want_mm = x @ y
    mod.fused(a, b, c)
    mod.mm(x, y)
    before = _native_threads()
    for _ in range(300):
        np.testing.assert_allclose(mod.fused(a, b, c), want, rtol=1e-6, atol=1e-6)
    for _ in range(50):
        np.testing.assert_allclose(mod.mm(x, y), want_mm, rtol=1e-4, atol=1e-3)
    assert _native_threads() == before  # no thread created per call


def test_concurrent_calls_from_python_threads(mod):
    xs = [rng.standard_normal((1, 16, 30, 30)).astype(np.float32) for _ in range(4)]
    w = rng.standard_normal((24, 16, 3, 3)).astype(np.float32)
    a = rng.standard_normal((257, 300)).astype(np.float32)
    b = rng.standard_normal((300, 129)).astype(np.float32)
    mod.conv(xs[0], w)
    mod.mm(a, b)
    xp = [np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))) for x in xs]
    wins = [np.lib.stride_tricks.sliding_window_view(p, (3, 3), axis=(2, 3)) for p in xp]
    wants = [np.einsum("nchwij,ocij->nohw", v, w) for v in wins]

    def hammer(i: int) -> None:
        for _ in range(25):
            np.testing.assert_allclose(mod.conv(xs[i], w), wants[i], rtol=1e-4, atol=1e-3)
            np.testing.assert_allclose(mod.mm(a, b), a @ b, rtol=1e-4, atol=1e-3)
    run_in_threads(hammer, 4)  # a parallel region that deadlocked would fail it


def test_worker_errors_propagate_every_time(mod):
    n = 1 << 20
    a = np.full(n, 2, np.int32)
    for at in (0, n // 3, n - 1):
        b = np.ones(n, np.int32)
        b[at] = -1
        for _ in range(10):
            with pytest.raises(WiaRuntimeError, match="negative integer powers"):
                mod.ipow(a, b)
        np.testing.assert_array_equal(mod.ipow(a, np.ones(n, np.int32)), a)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
@pytest.mark.filterwarnings("ignore:.*fork.*:DeprecationWarning")  # forking a threaded process
def test_forked_child_gets_a_working_pool(mod):
    x = rng.standard_normal((200, 300)).astype(np.float32)
    y = rng.standard_normal((300, 250)).astype(np.float32)
    want = x @ y
    mod.mm(x, y)  # the parent's pool exists
    stop = threading.Event()

    def busy() -> None:  # keep a region running in the parent while it forks
        while not stop.is_set():
            mod.mm(x, y)
    t = threading.Thread(target=busy)
    t.start()
    try:
        codes = []
        for _ in range(3):
            pid = os.fork()
            if pid == 0:  # the child: exit code 0 only when the threaded matmul is right
                ok = all(np.allclose(mod.mm(x, y), want, rtol=1e-4, atol=1e-3) for _ in range(5))
                os._exit(0 if ok else 1)
            codes.append(exit_code(pid, 60, "the forked child deadlocked"))
    finally:
        stop.set()
        t.join()
    assert codes == [0, 0, 0]


def test_ahead_of_time_output_defines_the_pool(mod):
    from wiadsl.backends.llvm import emit_llvm
    from wiadsl.backends.llvm.parallel import POOL_SYMBOL
    text = emit_llvm(mod.kernels["fused"].ir_for({}), {"fused": [((1 << 20),)] * 3})
    if THREADS > 1:
        assert any(line.startswith("define") and POOL_SYMBOL in line for line in text.splitlines())
    assert not any(line.startswith("declare") and POOL_SYMBOL in line for line in text.splitlines())


def test_pool_is_loaded_by_the_first_parallel_region():
    import subprocess
    code = """
import numpy as np, wiadsl
from wiadsl.backends.llvm import library
from wiadsl.backends.llvm.parallel import POOL_SYMBOL, THREADS
k = wiadsl.jit("kernel f(input a: f32[N], output b: f32[N]) { b = a * 2.0; }", kernel="f", target="cpu")
small = np.ones(10, np.float32)
assert (k(small) == 2).all() and POOL_SYMBOL not in library._LOADED
big = np.ones(1 << 21, np.float32)
assert (k(big) == 2).all()
assert (POOL_SYMBOL in library._LOADED) == (THREADS > 1)
print("ok")
"""
    env = dict(os.environ, WIADSL_CACHE="0")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def _sched_getcpu() -> Any:
    fn = ctypes.CDLL(None).sched_getcpu
    fn.restype = ctypes.c_int
    return fn


@pytest.mark.skipif(not sys.platform.startswith("linux") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs Linux and two CPUs this process may use")
def test_a_worker_on_the_callers_cpu_moves_and_keeps_its_mask():
    """The caller is pinned to the CPU its worker ran on: the worker, joining the next
    region there, moves to another CPU (``spread``), and runs its chunks with its CPU
    mask as it was (narrowed only for the move); the caller's mask is its own. Each
    chunk holds on until both threads have run one, so the worker always takes part
    (not timed: the waits only bound a stuck pool)."""
    getcpu = _sched_getcpu()
    mask = os.sched_getaffinity(0)
    seen: dict[int, list[tuple[int, frozenset[int]]]] = {}
    lock = threading.Lock()
    both = threading.Event()
    caller = threading.get_ident()

    def body(_ctx: int, a: int, b: int) -> int:
        with lock:
            seen.setdefault(threading.get_ident(), []).append((getcpu(), frozenset(os.sched_getaffinity(0))))
            if len(seen) > 1:
                both.set()
        both.wait(timeout=1.0)
        return 0
    cb = WORKER(body)

    def region() -> list[tuple[int, frozenset[int]]]:
        seen.clear()
        both.clear()
        deadline = time.monotonic() + 300  # bounds a stuck pool only, as the tests above
        while len(seen) < 2 and time.monotonic() < deadline:
            assert pool()(ctypes.cast(cb, ctypes.c_void_p), None, 0, 2, 1, 2) == 0
        return [v for t, chunks in seen.items() if t != caller for v in chunks]

    with two_threads():
        (worker_cpu, _), *_ = region()
        try:
            os.sched_setaffinity(0, {worker_cpu})
            on_worker = region()
            assert os.sched_getaffinity(0) == {worker_cpu}
        finally:
            os.sched_setaffinity(0, mask)
    assert on_worker and all(cpu != worker_cpu and m == frozenset(mask) for cpu, m in on_worker), \
        (worker_cpu, on_worker)


def _pool_ir(triple: str) -> str:
    from llvmlite import ir

    from wiadsl.backends.llvm.parallel import pool_module
    module = ir.Module(name="pool")
    module.triple = triple
    pool_module(module)
    return str(module)


def test_workers_spread_over_cpus_only_where_glibc_has_the_calls():
    """On Linux the pool's worker loop asks where it runs and moves off a CPU another
    participant holds (glibc's sched_getcpu / sched_setaffinity); a module for another
    OS declares neither (it would not link there). IR text, host-independent."""
    linux = _pool_ir("x86_64-unknown-linux-gnu")
    other = _pool_ir("x86_64-apple-darwin")
    for name in ("sched_getcpu", "sched_getaffinity", "sched_setaffinity"):
        assert f"declare i32 @\"{name}\"" in linux
        assert name not in other
    main = linux[linux.index("define internal ptr @\"wia.pool.main\""):]
    body = main[:main.index("\n}\n")]
    # the worker restores its mask right after narrowing it: set, then set again
    assert body.count("call i32 @\"sched_setaffinity\"") == 2
