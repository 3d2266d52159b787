"""The CPU target's ``tiered`` option (backends/llvm/tiered.py): a shape whose code is
not cached runs on the reference interpreter while its compile goes on in the
background; calls after the compile run native code. A cached shape never goes to
the interpreter, the option does not change cache keys, and a compile that fails
raises its error in the next call."""

from __future__ import annotations

import numpy as np
import pytest

import wiadsl
from wiadsl.backends.llvm import compile as llvm_compile
from wiadsl.diagnostics import WiaUsageError
from wiadsl.runtime.jit import source_key_for

SOURCE = """
kernel scaled_mm(input a: f32[M, K], input b: f32[K, N], input s: f32, output c: f32[M, N]) {
    c = relu(a @ b) * s;
}
"""


def inputs(m: int, k: int, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, float]:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((m, k), dtype=np.float32),
            rng.standard_normal((k, n), dtype=np.float32), 0.5)


def want(a: np.ndarray, b: np.ndarray, s: float) -> np.ndarray:
    return np.maximum(a @ b, 0) * np.float32(s)


def backend_kernel(fn):
    (compiled,) = fn._specializations.values()
    return compiled


@pytest.mark.parametrize("shape", [(1, 1, 1), (7, 33, 5), (33, 129, 7)])
def test_first_call_interprets_then_native_code_takes_over(fresh_cache, shape) -> None:
    fn = wiadsl.jit(SOURCE, "scaled_mm", tiered=True)
    args = inputs(*shape)
    np.testing.assert_allclose(fn(*args), want(*args), rtol=1e-5, atol=1e-5)
    assert fn.stats == {"tier": "interpreter"}
    fn.wait_compiled()
    for seed in (1, 2):  # native from now on: the plan's fast path included
        args = inputs(*shape, seed=seed)
        np.testing.assert_allclose(fn(*args), want(*args), rtol=1e-5, atol=1e-5)
        assert fn.stats["cache"] == "compiled"
    assert backend_kernel(fn).compiles == 1


def test_a_cached_shape_never_interprets(fresh_cache) -> None:
    args = inputs(7, 33, 5)
    wiadsl.jit(SOURCE, "scaled_mm")(*args)  # compiles and stores the code
    from wiadsl.cache import entries as cache

    cache.clear_memory()  # a new process: the code is on disk only
    fn = wiadsl.jit(SOURCE, "scaled_mm", tiered=True)
    np.testing.assert_allclose(fn(*args), want(*args), rtol=1e-5, atol=1e-5)
    assert fn.stats["cache"] == "disk"


def test_each_new_shape_interprets_until_its_code_is_there(fresh_cache) -> None:
    fn = wiadsl.jit(SOURCE, "scaled_mm", tiered=True, shapes="static")
    for shape in [(4, 8, 3), (5, 8, 3)]:
        args = inputs(*shape)
        np.testing.assert_allclose(fn(*args), want(*args), rtol=1e-5, atol=1e-5)
        assert fn.stats == {"tier": "interpreter"}
    fn.wait_compiled()
    assert backend_kernel(fn).compiles == 2


def test_tiered_does_not_change_the_cache_keys(fresh_cache) -> None:
    plain = wiadsl.jit(SOURCE, "scaled_mm")
    tiered = wiadsl.jit(SOURCE, "scaled_mm", tiered=True)
    key = source_key_for(plain.backend, plain.source, "cpu", {})
    assert key is not None
    assert key == plain.source_key == tiered.source_key


def test_a_failed_background_compile_raises_in_the_next_call(fresh_cache, monkeypatch) -> None:
    def broken(*_args, **_kwargs):
        raise RuntimeError("LLVM gave up")

    monkeypatch.setattr(llvm_compile, "compile_object", broken)
    fn = wiadsl.jit(SOURCE, "scaled_mm", tiered=True)
    args = inputs(3, 4, 5)
    np.testing.assert_allclose(fn(*args), want(*args), rtol=1e-5, atol=1e-5)
    fn.wait_compiled()
    with pytest.raises(RuntimeError, match="LLVM gave up"):
        fn(*args)
    monkeypatch.undo()  # the next call compiles again, and works
    np.testing.assert_allclose(fn(*args), want(*args), rtol=1e-5, atol=1e-5)


def test_an_interpreted_call_checks_its_arguments(fresh_cache) -> None:
    fn = wiadsl.jit(SOURCE, "scaled_mm", tiered=True)
    a, b, s = inputs(3, 4, 5)
    with pytest.raises(wiadsl.WiaError, match="K"):
        fn(a, b[:3], s)
    fn.wait_compiled()


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_the_option_takes_a_bool(value) -> None:
    with pytest.raises(WiaUsageError, match="option 'tiered' of target 'cpu' must be True or False"):
        wiadsl.jit(SOURCE, "scaled_mm", tiered=value)(*inputs(2, 2, 2))


def test_threads_calling_at_once_share_one_background_compile(fresh_cache) -> None:
    import threading

    fn = wiadsl.jit(SOURCE, "scaled_mm", tiered=True)
    args = inputs(9, 17, 6)
    results: list[np.ndarray] = []
    errors: list[BaseException] = []

    def call() -> None:
        try:
            for _ in range(3):
                results.append(fn(*args))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=call) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors and len(results) == 12
    for r in results:
        np.testing.assert_allclose(r, want(*args), rtol=1e-5, atol=1e-5)
    fn.wait_compiled()
    assert backend_kernel(fn).compiles == 1


def test_a_finished_tier_is_forgotten(fresh_cache) -> None:
    fn = wiadsl.jit(SOURCE, "scaled_mm", tiered=True, shapes="static")
    for m in range(1, 6):  # each shape: interpreted, compiled, then native
        args = inputs(m, 3, 2)
        fn(*args)
        fn.wait_compiled()
        fn(*args)
        assert fn.stats["cache"] == "compiled"
    assert backend_kernel(fn)._tiers == {}


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs fork")
@pytest.mark.filterwarnings("ignore:.*fork.*:DeprecationWarning")  # forking a threaded process
def test_a_child_forked_during_a_background_compile_compiles_for_itself(fresh_cache, monkeypatch) -> None:
    """The parent's compile thread holds the kernel's and the cache's locks when the
    child is forked; the child's calls must not wait for them (they would, forever)."""
    import os
    import threading

    from tests.cpu.forked import exit_code

    parent = os.getpid()
    started, release = threading.Event(), threading.Event()
    real = llvm_compile.compile_object

    def held_in_the_parent(*args, **kwargs):
        if os.getpid() == parent:
            started.set()
            release.wait(60)
        return real(*args, **kwargs)

    monkeypatch.setattr(llvm_compile, "compile_object", held_in_the_parent)
    fn = wiadsl.jit(SOURCE, "scaled_mm", tiered=True)
    args = inputs(6, 10, 4)
    fn(*args)  # interpreted; the compile starts and stops in held_in_the_parent
    assert started.wait(60)
    pid = os.fork()
    if pid == 0:  # the child: an interpreted call, then its own compile, then native code
        ok = False
        try:
            first = fn(*args)
            fn.wait_compiled()
            second = fn(*args)
            ok = (np.allclose(first, want(*args), rtol=1e-5, atol=1e-5)
                  and np.allclose(second, want(*args), rtol=1e-5, atol=1e-5)
                  and fn.stats.get("cache") == "compiled")
        finally:
            os._exit(0 if ok else 1)
    release.set()
    assert exit_code(pid, 120, "the forked child hung on its parent's compile") == 0
    fn.wait_compiled()
    np.testing.assert_allclose(fn(*args), want(*args), rtol=1e-5, atol=1e-5)


PREFIX_SUM = """
kernel prefix(input x: f32[N], output y: f32[N]) {
    y = x;
    acc = 0.0;
    for i in range(dim(x, 0)) {
        acc = acc + x[i];
        y[i] = acc;
    }
}
"""


@pytest.mark.parametrize("n", [7, 30_000])
def test_a_long_scalar_loop_waits_for_native_code(fresh_cache, n) -> None:
    """A loop of n iterations runs ~5 ops each: past MAX_STEPS the interpreted call
    gives up and takes the native code (interpreted, 30,000 iterations took ~3 s)."""
    from wiadsl.backends.llvm.tiered import MAX_STEPS

    fn = wiadsl.jit(PREFIX_SUM, "prefix", tiered=True)
    x = np.arange(n, dtype=np.float32) % 5
    np.testing.assert_allclose(fn(x), np.cumsum(x), rtol=1e-6)
    interpreted = fn.stats == {"tier": "interpreter"}
    assert interpreted == (n * 5 < MAX_STEPS)
    fn.wait_compiled()
    np.testing.assert_allclose(fn(x), np.cumsum(x), rtol=1e-6)
    assert fn.stats["cache"] == "compiled"


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_interpreted_and_native_calls_deliver_alike(fresh_cache, dtype) -> None:
    """The same types and dtypes from both tiers, a scalar output included, and an
    output buffer filled by an interpreted call."""
    name = np.dtype(dtype).name.replace("float", "f")
    src = f"""
kernel k(input a: {name}[N], input b: {name}[N], output c: {name}[N], output s: {name}) {{
    c = a * b + a;
    s = reduce_sum(c);
}}
"""
    a, b = (np.arange(7) % 3).astype(dtype), (np.arange(7) % 2).astype(dtype)
    c_want = a * b + a
    fn = wiadsl.jit(src, "k", tiered=True)
    out = np.empty(7, dtype)
    c, s = fn(a, b, c=out)
    assert fn.stats == {"tier": "interpreter"} and c is out
    np.testing.assert_array_equal(out, c_want)
    fn.wait_compiled()
    c2, s2 = fn(a, b)
    assert fn.stats["cache"] == "compiled"
    np.testing.assert_array_equal(c2, c_want)
    assert type(s) is type(s2) is np.dtype(dtype).type and s == s2 == c_want.sum()


@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="thread niceness")
def test_the_background_compile_runs_at_a_lower_priority(fresh_cache, monkeypatch) -> None:
    import os
    import threading

    from wiadsl.backends.llvm.tiered import NICENESS

    seen: list[int] = []
    real = llvm_compile.compile_object

    def noting(*args, **kwargs):
        seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        return real(*args, **kwargs)

    monkeypatch.setattr(llvm_compile, "compile_object", noting)
    fn = wiadsl.jit(SOURCE, "scaled_mm", tiered=True)
    fn(*inputs(3, 4, 5))
    fn.wait_compiled()
    mine = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    assert seen == [min(19, mine + NICENESS)]
