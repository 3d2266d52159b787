"""``get_or_compile`` from many threads (issue 17): one compile per key, no lock held
across a compile or a load, a load that obtains other keys while other threads
compile, and a failed compile that leaves the key to the next thread.

These drive the cache with fake compile and load functions (bytes in, objects
out), in this process; every thread is joined under a deadline, so a deadlock
fails the test. The whole-process scenarios are in
tests/regressions/test_thread_first_calls.py.
"""

from __future__ import annotations

import threading
import time

import pytest

from wiadsl.backends.llvm.keys import cached_object
from wiadsl.cache import entries as cache
from wiadsl.cache.key import KeyParts


def parts(name: str) -> KeyParts:
    return KeyParts(kernel=name, functions=((name, "0" * 64),), shapes="", dtypes="", target="test",
                    cpu="test", flags="", pipeline="", gemm="")


def run_all(targets, seconds: float = 60.0) -> None:
    threads = [threading.Thread(target=t, daemon=True) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds)
    assert not any(t.is_alive() for t in threads), "a thread hung (deadlock)"


@pytest.mark.parametrize("disk", ["1", "0"])
def test_threads_missing_one_key_share_one_compile(monkeypatch, disk: str) -> None:
    monkeypatch.setenv("WIADSL_CACHE", disk)
    compiles: list[int] = []
    barrier = threading.Barrier(8)
    got: list[object] = []

    def compile_fn(stages):
        compiles.append(1)
        time.sleep(0.2)  # the other threads arrive meanwhile
        return b"object", {}

    def go() -> None:
        barrier.wait(10)
        loaded, record = cache.get_or_compile(parts("one"), compile_fn, lambda obj, meta: object())
        got.append((loaded, record["source"]))
    run_all([go] * 8)
    assert compiles == [1] and cache.STATS.compiles == 1
    assert len({id(loaded) for loaded, _ in got}) == 1  # the same loaded kernel for all
    assert sorted(source for _, source in got) == ["compiled"] + ["memory"] * 7


def test_no_lock_is_held_while_loading(monkeypatch) -> None:
    """Thread A's load obtains a helper key while thread B, inside a compile of its
    own, also needs that helper: the issue's two lock orders, now without locks."""
    monkeypatch.setenv("WIADSL_CACHE", "0")
    a_loading, b_compiling = threading.Event(), threading.Event()
    helper = parts("helper")

    def helper_compile(stages):
        return b"helper", {}

    overlapped: list[bool] = []

    def load_a(obj, meta):
        a_loading.set()
        overlapped.append(b_compiling.wait(30))  # B compiles while A is in its load
        return cache.get_or_compile(helper, helper_compile, lambda o, m: "helper")[0] + "+a"

    def compile_b(stages):
        b_compiling.set()
        overlapped.append(a_loading.wait(30))
        return b"b", {}

    def load_b(obj, meta):
        return cache.get_or_compile(helper, helper_compile, lambda o, m: "helper")[0] + "+b"

    out: dict[str, object] = {}
    run_all([lambda: out.__setitem__("a", cache.get_or_compile(
                 parts("a"), lambda st: (b"a", {}), load_a)[0]),
             lambda: out.__setitem__("b", cache.get_or_compile(parts("b"), compile_b, load_b)[0])])
    assert overlapped == [True, True], "the load and the compile did not overlap"
    assert out == {"a": "helper+a", "b": "helper+b"}
    assert cache.STATS.compiles == 3  # a, b and the helper once


def test_a_failed_compile_leaves_the_key_to_the_next_thread(monkeypatch) -> None:
    monkeypatch.setenv("WIADSL_CACHE", "0")
    first = threading.Event()
    calls: list[int] = []
    outcomes: list[object] = []

    def compile_fn(stages):
        calls.append(1)
        if len(calls) == 1:
            first.set()
            time.sleep(0.2)
            raise RuntimeError("the first compile fails")
        return b"ok", {}

    def go(wait: bool) -> None:
        if wait:
            first.wait(10)
        try:
            outcomes.append(cache.get_or_compile(parts("flaky"), compile_fn, lambda o, m: "ok")[0])
        except RuntimeError as exc:
            outcomes.append(exc)
    run_all([lambda: go(False), lambda: go(True)])
    assert len(calls) == 2 and "ok" in outcomes
    assert any(isinstance(o, RuntimeError) for o in outcomes)
    assert cache.get_or_compile(parts("flaky"), compile_fn, lambda o, m: "ok")[1]["source"] == "memory"


def test_a_load_that_asks_for_its_own_key_fails_instead_of_hanging(monkeypatch) -> None:
    monkeypatch.setenv("WIADSL_CACHE", "0")
    key = parts("self")

    def load(obj, meta):
        return cache.get_or_compile(key, lambda st: (b"x", {}), load)

    with pytest.raises(RuntimeError, match="asked for the kernel it is obtaining"):
        cache.get_or_compile(key, lambda st: (b"x", {}), load)
    # nothing was left behind: the key compiles normally now
    assert cache.get_or_compile(key, lambda st: (b"x", {}), lambda o, m: 1)[0] == 1


def test_a_helper_compiles_while_a_kernel_compile_holds_the_lock(monkeypatch) -> None:
    """A kernel's compile starts its helpers on other threads (library.prefetch) and
    goes on with its own LLVM work: a helper (``cached_object``) compiles outside the
    kernels' compile lock. Here the kernel's compile waits for the helper to finish,
    which hangs if the helper needs the lock the kernel holds."""
    monkeypatch.setenv("WIADSL_CACHE", "0")
    built = threading.Event()
    helper_threads: list[str] = []

    def build_helper() -> bytes:
        helper_threads.append(threading.current_thread().name)
        built.set()
        return b"helper object"

    def compile_kernel(stages):
        helper = threading.Thread(target=cached_object,
                                  args=("wia.lib.test.overlap", "{}", build_helper),
                                  name="helper-builder", daemon=True)
        helper.start()
        assert built.wait(30), "the helper could not compile while a kernel compiled"
        helper.join(30)
        return b"kernel", {}

    out: list[object] = []
    run_all([lambda: out.append(cache.get_or_compile(parts("with-helper"), compile_kernel,
                                                     lambda o, m: o)[0])])
    assert out == [b"kernel"] and helper_threads == ["helper-builder"]
    assert cached_object("wia.lib.test.overlap", "{}", build_helper) == b"helper object"
    assert helper_threads == ["helper-builder"]  # the second ask was a memory hit
