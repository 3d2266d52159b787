"""Issue 17: eight Python threads calling one matmul kernel on new shapes hung the
process for good (0 % CPU). One thread held the compile cache's lock in
``get_or_compile`` -> ``load_fn`` -> ``library.ensure_loaded`` and waited for the
library's lock; another held the library's lock in ``ensure_loaded`` ->
``cached_object`` -> ``get_or_compile`` and waited for the cache's -- it got there
from the thread pool's loader, which native code calls back (GIL released) on a
kernel's first parallel region.

Now no lock is held across a compile or a load that takes another: the cache and
the library keep a per-key flight (the first thread to miss obtains it, the others
wait for that one), their locks guard the dicts only, and LLVM work is serialized
by a leaf lock under which nothing else is taken or awaited.

Every scenario runs in a child process under a deadline, so a regression fails
the test (and says which threads hung) instead of hanging the suite.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from wiadsl.backends.llvm.parallel import THREADS
from wiadsl.cache.entries import OnceTable

ROOT = Path(__file__).resolve().parents[2]


def run_child(code: str, timeout: float = 300.0, env: dict[str, str] | None = None) -> str:
    full = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    full.update(env or {})
    try:
        done = subprocess.run([sys.executable, "-c", code], env=full, cwd=str(ROOT),
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        pytest.fail(f"the child hung for {timeout:.0f} s (a deadlock); its output:\n{out[-3000:]}")
    if done.returncode == 3:
        pytest.fail(f"threads deadlocked in the child:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    return done.stdout


#: joins the child's threads under a deadline; on a hang it prints every thread's
#: stack and leaves with status 3 (hung threads cannot be joined)
JOIN = """
import faulthandler, os, sys, threading, time

def join_all(threads, seconds):
    deadline = time.monotonic() + seconds
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    hung = [t.name for t in threads if t.is_alive()]
    if hung:
        print("hung:", hung, flush=True)
        faulthandler.dump_traceback(file=sys.stdout, all_threads=True)
        sys.stdout.flush()
        os._exit(3)
"""


@pytest.mark.skipif(THREADS < 2, reason="one CPU: no parallel regions, no pool to load")
def test_pool_loaded_from_native_code_while_another_thread_compiles(tmp_path) -> None:
    """The issue's interleaving, forced: thread A is inside a kernel compile (kept
    there until B is inside the pool's load), thread B runs an already compiled kernel
    whose first parallel region loads the pool from native code. A's kernel needs the
    gemm helper, so its load goes through the library while B is in it."""
    code = JOIN + textwrap.dedent("""
    import numpy as np
    import wiadsl
    from wiadsl.backends.llvm import compile as cpu_compile
    from wiadsl.backends.llvm import library
    from wiadsl.backends.llvm.parallel import POOL_SYMBOL

    mod = wiadsl.jit('''
    kernel mm(input a: f32[M, K], input b: f32[K, N], output c: f32[M, N]) { c = a @ b; }
    kernel ew(input x: f32[N], output y: f32[N]) { y = x * 2.0 + 1.0; }
    ''', target="cpu")
    x = np.arange(1 << 21, dtype=np.float32)
    ew = mod.ew.compiled_for([x])
    ew._native_for((x.shape,), [x.dtype])  # compiled, not run: the pool is not loaded yet
    assert POOL_SYMBOL not in library._LOADED

    a_compiling, b_loading = threading.Event(), threading.Event()
    real_compile, real_load = cpu_compile.compile_object, library._load

    def slow_compile(*args, **kwargs):   # thread A, inside get_or_compile
        a_compiling.set()
        b_loading.wait(60)
        time.sleep(0.3)                  # B goes on into the compile cache meanwhile
        return real_compile(*args, **kwargs)

    def spy_load(spec, name):            # thread B, loading the pool from native code
        if name == POOL_SYMBOL:           # (its object built beside ew's compile, or here)
            b_loading.set()
        return real_load(spec, name)

    cpu_compile.compile_object = slow_compile  # backend.py imports it at compile time
    library._load = spy_load
    errors = []
    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((37, 29)).astype(np.float32), rng.standard_normal((29, 41)).astype(np.float32)

    def thread_a():
        try:
            np.testing.assert_allclose(mod.mm(A, B), A @ B, rtol=1e-4, atol=1e-4)
        except BaseException as exc:
            errors.append(repr(exc))

    def thread_b():
        try:
            a_compiling.wait(60)
            np.testing.assert_array_equal(mod.ew(x), x * 2 + 1)
        except BaseException as exc:
            errors.append(repr(exc))

    threads = [threading.Thread(target=thread_a, name="A-compiles"),
               threading.Thread(target=thread_b, name="B-loads-the-pool")]
    for t in threads:
        t.start()
    join_all(threads, 120)
    assert b_loading.is_set(), "thread B never loaded the pool"
    assert POOL_SYMBOL in library._LOADED
    assert not errors, errors
    print("ok")
    """)
    assert run_child(code, env={"WIADSL_CACHE_DIR": str(tmp_path / "cache")}).strip().endswith("ok")


MANY = JOIN + """
import numpy as np
import wiadsl

SRC = '''
kernel mm(input a: f32[M, K], input b: f32[K, N], output c: f32[M, N]) { c = a @ b; }
kernel mm64(input a: f64[M, K], input b: f64[K, N], output c: f64[M, N]) { c = a @ b; }
kernel qmm(input a: i8[M, K], input b: i8[K, N], output c: i32[M, N]) { c = cast(a, i32) @ cast(b, i32); }
kernel cv(input x: f32[N, C, H, W], input w: f32[O, C, KH, KW], output y: f32[N, O, P, Q]) {
    y = conv2d(x, w, stride=1, padding=1);
}
kernel ew(input x: f32[N], output y: f32[N]) { y = relu(x * 2.0 + 1.0); }
'''
mod = wiadsl.jit(SRC, target="cpu", shapes=os.environ.get("WIADSL_TEST_SHAPES", "auto"))
T = 8
barrier = threading.Barrier(T)
errors = []

def call(t, i):
    rng = np.random.default_rng(100 * t + i)
    kind = (t + i) % 5
    if kind == 0:    # new shapes; the large ones run parallel regions (the pool's first use)
        n = (40, 128, 150, 41)[(t + i) % 4]
        a, b = rng.standard_normal((n, 96)).astype(np.float32), rng.standard_normal((96, n)).astype(np.float32)
        np.testing.assert_allclose(mod.mm(a, b), a @ b, rtol=1e-4, atol=1e-3)
    elif kind == 1:
        n = (7, 130)[(t + i) % 2]
        a, b = rng.standard_normal((n, 33)), rng.standard_normal((33, n))
        np.testing.assert_allclose(mod.mm64(a, b), a @ b, rtol=1e-10, atol=1e-10)
    elif kind == 2:
        m = (1, 97)[(t + i) % 2]
        a = rng.integers(-128, 128, (m, 130), dtype=np.int8)
        b = rng.integers(-128, 128, (130, 19 + t), dtype=np.int8)
        assert (mod.qmm(a, b) == a.astype(np.int32) @ b.astype(np.int32)).all()
    elif kind == 3:
        x = rng.standard_normal((1, 4, 20 + t % 3, 20)).astype(np.float32)
        w = rng.standard_normal((8, 4, 3, 3)).astype(np.float32)
        xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
        win = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))
        np.testing.assert_allclose(mod.cv(x, w), np.einsum("nchwij,ocij->nohw", win, w), rtol=1e-4, atol=1e-3)
    else:
        x = rng.standard_normal((1 << 20) + 8 * (t % 3)).astype(np.float32)
        np.testing.assert_array_equal(mod.ew(x), np.maximum(x * 2 + 1, 0))

def work(t):
    try:
        barrier.wait(60)
        for i in range(5):
            call(t, i)
    except BaseException as exc:
        errors.append(f"thread {t}: {exc!r}")

threads = [threading.Thread(target=work, args=(t,), name=f"caller-{t}") for t in range(T)]
for t in threads:
    t.start()
join_all(threads, 240)
assert not errors, errors
from wiadsl.cache.entries import STATS
print("ok", STATS.as_dict())
"""


@pytest.mark.parametrize("cache, shapes", [("empty disk cache", "auto"),
                                           ("warm disk cache", "static"),
                                           ("warm disk cache", "generic"),
                                           ("memory only", "auto")])
def test_many_threads_first_calls(tmp_path, cache: str, shapes: str) -> None:
    """Eight threads at once, first calls of five kernels (f32/f64 gemm, int8 gemm,
    conv2d, a parallel elementwise kernel) on several shapes each, the thread pool's
    first use among them; from an empty disk cache (compiles), from a warm one (loads
    from disk, helpers included), and without a disk cache.

    The warm runs use a shape policy whose codes do not depend on which thread calls
    first (``static``: one per shape; ``generic``: one per kernel): under ``auto`` the
    first call's shapes compile static, and the threads race for that."""
    folder = tmp_path / "cache"
    env = {"WIADSL_CACHE_DIR": str(folder), "WIADSL_TEST_SHAPES": shapes}
    if cache == "memory only":
        env["WIADSL_CACHE"] = "0"
    if cache == "warm disk cache":
        run_child(MANY, env=env)
    out = run_child(MANY, env=env)
    assert out.strip().splitlines()[-1].startswith("ok")
    if cache == "warm disk cache":
        assert "'compiles': 0" in out  # every kernel and helper came from the disk


def test_one_compile_per_key_from_many_threads() -> None:
    """Threads that miss on one key at once wait for one compile: one KernelFunction
    called from eight threads, and eight modules of the same source."""
    code = JOIN + textwrap.dedent("""
    import numpy as np
    import wiadsl
    from wiadsl.cache.entries import STATS

    SRC = "kernel f(input x: f32[N], output y: f32[N]) { y = x * 3.0 - 1.0; }"
    x = np.arange(33, dtype=np.float32)

    def race(fns):
        barrier = threading.Barrier(len(fns))
        errors = []
        def go(fn):
            try:
                barrier.wait(60)
                np.testing.assert_array_equal(fn(x), x * 3 - 1)
            except BaseException as exc:
                errors.append(repr(exc))
        threads = [threading.Thread(target=go, args=(fn,)) for fn in fns]
        for t in threads:
            t.start()
        join_all(threads, 120)
        assert not errors, errors

    one = wiadsl.jit(SRC, kernel="f", target="cpu")
    race([one] * 8)
    assert STATS.compiles == 2, STATS.as_dict()  # the kernel and the arena helper it links
    x = np.arange(35, dtype=np.float32)   # a new shape, eight modules
    race([wiadsl.jit(SRC, kernel="f", target="cpu") for _ in range(8)])
    assert STATS.compiles == 3, STATS.as_dict()
    print("ok")
    """)
    assert run_child(code, env={"WIADSL_CACHE": "0"}).strip().endswith("ok")


# ---------------------------------------------------------------- the once-per-key table


def _run_threads(n: int, target, seconds: float = 60.0) -> None:
    threads = [threading.Thread(target=target, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds)
    assert not any(t.is_alive() for t in threads), "a OnceTable call hung"


def test_once_table_makes_each_value_once() -> None:
    table = OnceTable()
    made: list[int] = []
    gate = threading.Event()
    barrier = threading.Barrier(8)
    got: list[int] = []

    def make() -> int:
        made.append(1)
        gate.wait(10)  # everyone else arrives while this one is making it
        return 42

    def go(i: int) -> None:
        barrier.wait(10)
        if i == 7:
            gate.set()
        got.append(table.get("k", make))
    _run_threads(8, go)
    assert made == [1] and got == [42] * 8 and "k" in table and table.peek("k") == 42


def test_once_table_failure_lets_a_waiter_try_again() -> None:
    table = OnceTable()
    calls: list[int] = []
    lock = threading.Lock()
    started = threading.Event()
    outcomes: list[object] = []

    def make() -> str:
        with lock:
            calls.append(1)
            first = len(calls) == 1
        if first:
            started.set()
            threading.Event().wait(0.2)
            raise ValueError("first try fails")
        return "second"

    def go(i: int) -> None:
        if i:
            started.wait(10)
        try:
            outcomes.append(table.get("k", make))
        except ValueError as exc:
            outcomes.append(exc)
    _run_threads(2, go)
    assert len(calls) == 2 and "second" in outcomes
    assert any(isinstance(o, ValueError) for o in outcomes)


def test_once_table_make_may_use_other_keys_but_not_its_own() -> None:
    table = OnceTable()
    assert table.get("outer", lambda: table.get("inner", lambda: 1) + 1) == 2
    with pytest.raises(RuntimeError, match="asked for the kernel it is obtaining"):
        table.get("self", lambda: table.get("self", lambda: 0))
    assert table.get("self", lambda: 5) == 5  # the failed flight left nothing behind


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
@pytest.mark.filterwarnings("ignore:.*fork.*:DeprecationWarning")  # forking a threaded process
def test_a_child_forked_while_a_value_is_made_makes_it_itself() -> None:
    """A thread was making a value (a helper's load: a kernel's first fast call in
    another thread) when the process forked. The child has no such thread: its
    ``get`` waited for that flight forever (the matmul of tests/cpu/test_pool.py's
    fork test, run alone). Every OnceTable forgets its flights in a forked child."""
    from tests.cpu.forked import exit_code

    table = OnceTable()
    making, release = threading.Event(), threading.Event()

    def slow() -> str:
        making.set()
        release.wait(60)
        return "parent's"
    maker = threading.Thread(target=lambda: table.get("helper", slow))
    maker.start()
    assert making.wait(60)
    pid = os.fork()
    if pid == 0:
        os._exit(0 if table.get("helper", lambda: "child's") == "child's" else 1)
    release.set()
    maker.join(60)
    assert exit_code(pid, 60, "the forked child waited for its parent's flight") == 0
    assert table.peek("helper") == "parent's"
