"""The order in which a kernel's helpers are built on a cold cache (library.py's
``prefetch``, ``ensure_loaded``): queued longest first (``longest_first``), and a
thread that needs helpers builds the still-queued ones itself instead of waiting
behind them. Checked on the queue
with recorded builds (no LLVM work, nothing loaded)."""

from __future__ import annotations

import threading
from concurrent.futures import Future

import pytest

from wiadsl.backends.llvm import library
from wiadsl.backends.llvm.gemm_config import GemmConfig

#: a config no other test loads, so none of its helpers is in this process yet
CONFIG = GemmConfig(mr=3, nv=1, vector_bits=128, kc=96, mc=9).as_dict()
GEMM = {"kind": "gemm", "dtype": "f32", "config": CONFIG}
UKERNELS = {"kind": "ukernels", "dtype": "f32", "config": CONFIG}


class Recorder:
    """A builder pool that queues and never runs: its futures stay pending."""

    def __init__(self) -> None:
        self.queued: list[str] = []

    def submit(self, fn, spec, name) -> Future:  # type: ignore[no-untyped-def]
        self.queued.append(name)
        return Future()


@pytest.fixture
def queue(monkeypatch):
    recorder = Recorder()
    monkeypatch.setattr(library, "_BUILDS", {})
    monkeypatch.setattr(library, "_builder", lambda: recorder)
    return recorder


def test_a_kernels_helpers_are_queued_longest_first(queue):
    """The micro-kernels before the gemm driver that links against them, then its
    one-row products, the scratch buffers last; a convolution's driver after its direct
    micro-kernels (the longer build since the drivers call their row kernels through
    one call site each)."""
    library.prefetch([GEMM])
    order = [library.symbol(s) for s in (UKERNELS, GEMM, {**GEMM, "kind": "gemv"}, library.SCRATCH_SPEC)]
    assert queue.queued == [name for name in order if name not in library._LOADED]
    queue.queued.clear()
    conv = {**GEMM, "kind": "conv_range", "stride": [1, 1]}
    library.prefetch([conv])
    order = [library.symbol(s) for s in ({**UKERNELS, "kind": "dukernels"}, conv)]
    assert queue.queued == [name for name in order if name not in library._LOADED]


def test_a_queued_build_is_made_by_the_thread_that_needs_it(queue, monkeypatch):
    built: list[tuple[str, str]] = []

    def fake_object(spec, name):  # type: ignore[no-untyped-def]
        built.append((name, threading.current_thread().name))
        return b"object"
    monkeypatch.setattr(library, "_object", fake_object)
    library.prefetch([GEMM])
    queued = dict(library._BUILDS)
    running = queued[library.symbol(UKERNELS)]
    assert running.set_running_or_notify_cancel()  # a background thread has started it
    library._claim_queued(GEMM)
    library._claim_queued(UKERNELS)
    assert built == [(library.symbol(GEMM), threading.current_thread().name)]
    assert queued[library.symbol(GEMM)].cancelled()  # the background one will not run
    assert library._BUILDS[library.symbol(GEMM)].result() == b"object"
    assert library._BUILDS[library.symbol(UKERNELS)] is running  # left to its thread
    library._claim_queued(GEMM)  # a second thread: takes the first one's, builds nothing
    assert len(built) == 1 and library._BUILDS[library.symbol(GEMM)].result() == b"object"


def test_threads_that_claim_at_once_build_once_and_all_get_the_object(queue, monkeypatch):
    """A claimed build is running from the start: another thread that needs it waits
    for it and cannot cancel it (issue 17's many first calls at once had raised
    InvalidStateError from a claimed build another thread cancelled)."""
    started, release = threading.Event(), threading.Event()
    built: list[str] = []

    def slow_object(spec, name):  # type: ignore[no-untyped-def]
        built.append(name)
        started.set()
        release.wait(10)
        return b"object"
    monkeypatch.setattr(library, "_object", slow_object)
    library.prefetch([GEMM])
    first = threading.Thread(target=library._claim_queued, args=(GEMM,))
    first.start()
    assert started.wait(10)
    library._claim_queued(GEMM)  # while the first builds: nothing to claim
    release.set()
    first.join(10)
    assert built == [library.symbol(GEMM)]
    assert library._BUILDS[library.symbol(GEMM)].result() == b"object"


def test_a_failed_claimed_build_is_reported_by_the_thread_that_loads_it(queue, monkeypatch):
    def failing(spec, name):  # type: ignore[no-untyped-def]
        raise RuntimeError("LLVM said no")
    monkeypatch.setattr(library, "_object", failing)
    library.prefetch([GEMM])
    library._claim_queued(GEMM)
    with pytest.raises(RuntimeError, match="LLVM said no"):
        library._BUILDS[library.symbol(GEMM)].result()


@pytest.mark.parametrize("source,dtypes,gemv", [
    ("kernel k(input a: f32[M, K], input b: f32[K, N], output c: f32[M, N]) { c = relu(a @ b); }", ["f32"], True),
    ("kernel k(input x: f64[N, C, H, W], input w: f64[O, C, 3, 3], output y: f64[N, O, P, Q]) "
     "{ y = conv2d(x, w); }", ["f64"], False),
    ("kernel k(input a: i8[M, K], input b: i8[K, N], output c: i32[M, N]) { c = cast(a, i32) @ cast(b, i32); }",
     [], False),
    ("kernel k(input a: f32[N], output b: f32[N]) { b = exp(a) * 2.0; }", [], False),
])
def test_the_helpers_started_before_lowering_are_the_arena_and_the_products_micro_kernels(
        source: str, dtypes: list[str], gemv: bool) -> None:
    # compile.py's early_helpers: the micro-kernels (the longest build) are queued as the
    # compile starts, not when code generation reaches the product (the pool only once
    # lowering shows a parallel region); int8 products have micro-kernels of their own.
    # A float matrix product also queues the gemm driver's one-row products, unless an
    # input is frozen (a B packed once: the packed driver, which has none)
    from wiadsl.backends.llvm.compile import early_helpers
    from wiadsl.backends.llvm.gemm_config import default_config
    from wiadsl.frontend.compile import compile_to_ir

    glue = [library.ARENA_SPEC]
    for config in (GemmConfig(mr=4, vector_bits=128), None):
        cfg = (config or default_config()).as_dict()
        want = [library.ukernels_spec(d, cfg) for d in dtypes]
        rows = [{"kind": "gemv", "dtype": d, "config": cfg} for d in dtypes if gemv]
        assert early_helpers(compile_to_ir(source), config) == glue + want + rows
        assert early_helpers(compile_to_ir(source), config, frozenset({1})) == glue + want
