"""A batch as slices, one per thread (backends/llvm/batch_split.py): a batch-separable
kernel compiled for a batch that is a multiple of the threads runs each slice through
the whole kernel. The split is forced here (``split_always``: two slices whatever the
work and this host's CPUs), so every host runs these cases; NumPy (ONNX Runtime for
the model) is the oracle, at one thread and at two. The entry is checked as LLVM IR
text, and a steady-state call is checked to allocate nothing but its outputs."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import wiadsl
from wiadsl.backends.llvm import compile as cpu_compile
from wiadsl.backends.llvm.loader import NATIVE
from wiadsl.backends.llvm.scratch import SLOTS
from wiadsl.diagnostics import WiaRuntimeError
from wiadsl.frontend.compile import compile_to_ir
from wiadsl.ir import run_func
from wiadsl.records import replace
from wiadsl.testing.filecheck import filecheck

from ..concurrency import run_in_threads
from .programs import EXAMPLES, random_inputs
from .test_scratch_buffers import COUNTING

SRC = """
import nn;
kernel net(input x: f32[N, 3, 10, 10], input w: f32[6, 3, 3, 3], input fc: f32[6, 5],
           output y: f32[N, 5], output top: i64[N]) {
    c = relu(conv2d(x, w, stride=1, padding=1) * 0.5 + 0.25);
    g = reduce_mean(max_pool(c, kernel=2, stride=2), axis=[2, 3]);
    y = nn.softmax(g @ fc);
    top = argmax(y, axis=1);
}
kernel rows(input x: f32[N, 7], input s: f32, input b: f32[7], output y: f32[N, 7]) {
    y = exp(x * s) + b;
}
kernel picked(input x: f32[N, 4], input i: i64, output y: f32[N]) { y = x[:, i] * 2.0; }
"""


@pytest.fixture
def split_always(monkeypatch, fresh_cache):
    """Every separable kernel with an even batch split in two, in a cache of its own;
    gives the forced planner."""
    real = cpu_compile.batch_split

    def forced(module, kernel, shapes, frozen):  # type: ignore[no-untyped-def]
        return real(module, kernel, shapes, frozen, threads=2, min_work=0)
    monkeypatch.setattr(cpu_compile, "batch_split", forced)
    return forced


def numpy_net(x: np.ndarray, w: np.ndarray, fc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = x.shape[0]
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    conv = np.zeros((n, 6, 10, 10))
    for i in range(3):
        for j in range(3):
            conv += np.einsum("nchw,oc->nohw", xp[:, :, i:i + 10, j:j + 10], w[:, :, i, j])
    c = np.maximum(conv * 0.5 + 0.25, 0)
    g = c.reshape(n, 6, 5, 2, 5, 2).max(axis=(3, 5)).mean(axis=(2, 3))
    z = g @ fc
    e = np.exp(z - z.max(axis=1, keepdims=True))
    y = e / e.sum(axis=1, keepdims=True)
    return y, y.argmax(axis=1)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("batch", [2, 4, 6])
def test_a_split_batch_gives_numpys_results(split_always, restore_thread_count, batch, threads):
    wiadsl.set_num_threads(threads)
    mod = wiadsl.jit(SRC, target="cpu", shapes="static", frozen=(1, 2))  # net's weights
    rng = np.random.default_rng(batch)
    x = rng.standard_normal((batch, 3, 10, 10), dtype=np.float32)
    w = rng.standard_normal((6, 3, 3, 3), dtype=np.float32)
    fc = rng.standard_normal((6, 5), dtype=np.float32)
    for _ in range(3):  # the first call allocates the results, later ones get buffers
        y, top = mod.net(x, w, fc)
        assert mod.net.stats["batch_slices"] == 2
        want_y, want_top = numpy_net(x, w, fc)
        np.testing.assert_allclose(y, want_y, rtol=1e-4, atol=1e-6)
        np.testing.assert_array_equal(top, want_top)


@pytest.mark.parametrize("threads", [1, 2])
def test_shape_generic_code_splits_every_batch(split_always, restore_thread_count, threads):
    # the ``auto`` policy: the first batch compiles static, the next one generic code
    # with the batch read at run time; that code splits any batch into slices of
    # rows as even as whole rows go (3 = 2 + 1) and runs a batch of 1 whole
    wiadsl.set_num_threads(threads)
    mod = wiadsl.jit(SRC, target="cpu", frozen=(1, 2))
    rng = np.random.default_rng(9)
    w = rng.standard_normal((6, 3, 3, 3), dtype=np.float32)
    fc = rng.standard_normal((6, 5), dtype=np.float32)
    for batch in (4, 6, 3, 1, 7, 2, 9, 5, 3):
        x = rng.standard_normal((batch, 3, 10, 10), dtype=np.float32)
        y, top = mod.net(x, w, fc)
        want_y, want_top = numpy_net(x, w, fc)
        np.testing.assert_allclose(y, want_y, rtol=1e-4, atol=1e-6)
        np.testing.assert_array_equal(top, want_top)
        assert mod.net.stats["batch_slices"] == 2
    assert mod.net.stats["code"] == "generic"
    (compiled,) = mod.net._specializations.values()
    assert compiled.compiles == 2  # static at 4, then one generic code for the rest


def test_an_odd_batch_runs_whole(split_always):
    mod = wiadsl.jit(SRC, target="cpu", shapes="static")
    x = np.random.default_rng(3).standard_normal((3, 7), dtype=np.float32)
    b = np.linspace(-1, 1, 7, dtype=np.float32)
    y = mod.rows(x, np.float32(0.5), b)
    assert mod.rows.stats["batch_slices"] == 1
    np.testing.assert_allclose(y, np.exp(x * np.float32(0.5)) + b, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("batch", [2, 8, 130])
def test_results_land_in_the_callers_buffers(split_always, restore_thread_count, batch):
    wiadsl.set_num_threads(2)
    mod = wiadsl.jit(SRC, target="cpu", shapes="static")
    rng = np.random.default_rng(batch)
    b = np.linspace(-1, 1, 7, dtype=np.float32)
    out = np.empty((batch, 7), np.float32)
    for seed in range(3):
        x = rng.standard_normal((batch, 7), dtype=np.float32)
        got = mod.rows(x, np.float32(seed), b, y=out)
        assert got is out and mod.rows.stats["batch_slices"] == 2
        np.testing.assert_allclose(out, np.exp(x * np.float32(seed)) + b, rtol=1e-6, atol=1e-6)


def test_calls_from_many_threads_at_once(split_always, restore_thread_count):
    # the pool serves one region at a time: the other calls run their slices on their
    # own thread, and a slice whose pool cell another call holds allocates afresh
    wiadsl.set_num_threads(2)
    mod = wiadsl.jit(SRC, target="cpu", shapes="static")
    b = np.linspace(-1, 1, 7, dtype=np.float32)

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        for k in range(30):
            x = rng.standard_normal((2 * (1 + (seed + k) % 3), 7), dtype=np.float32)
            np.testing.assert_allclose(mod.rows(x, np.float32(0.5), b),
                                       np.exp(x * np.float32(0.5)) + b, rtol=1e-6, atol=1e-6)
    run_in_threads(work, 6)
    assert mod.rows.stats["batch_slices"] == 2


def test_a_failing_slice_reports_the_kernels_error(split_always, restore_thread_count):
    wiadsl.set_num_threads(2)
    mod = wiadsl.jit(SRC, target="cpu", shapes="static")
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    np.testing.assert_array_equal(mod.picked(x, np.int64(-1)), x[:, -1] * 2)
    assert mod.picked.stats["batch_slices"] == 2
    with pytest.raises(WiaRuntimeError, match="out of range") as caught:
        mod.picked(x, np.int64(4))
    assert "x[:, i]" in str(caught.value)  # the source line, as an unsplit kernel says it
    np.testing.assert_array_equal(mod.picked(x, np.int64(1)), x[:, 1] * 2)  # and runs on


def test_a_wrong_plan_is_an_error_not_a_write_past_the_buffer(monkeypatch, fresh_cache):
    # the entry checks each slice's result against the plan's shape (batch_axis.py's
    # shapes are right; this plan is made wrong on purpose): an error, no overflow
    real = cpu_compile.batch_split

    def wrong(module, kernel, shapes, frozen):  # type: ignore[no-untyped-def]
        split = real(module, kernel, shapes, frozen, threads=2, min_work=0)
        return None if split is None else replace(split, rows=((9,),))
    monkeypatch.setattr(cpu_compile, "batch_split", wrong)
    mod = wiadsl.jit(SRC, target="cpu", shapes="static")
    x = np.ones((4, 7), np.float32)
    with pytest.raises(WiaRuntimeError, match="another shape than planned"):
        mod.rows(x, np.float32(1), np.zeros(7, np.float32))


def test_the_entry_runs_the_slices_on_the_pool():
    # rows at batch 6: slices of rows [s 6 / 2, (s + 1) 6 / 2), 28 bytes a row, each
    # with its pool in its own cell and its result checked (7 columns); the entry
    # allocates the 6 x 7 result when the caller gives no buffer of its size, writes
    # the whole batch's extents, and frees the buffer on an error
    module = compile_to_ir(SRC)
    split = cpu_compile.batch_split(module, "rows", [(6, 7), (), (7,)], frozenset(),
                                    threads=2, min_work=0)
    assert split is not None and split.rows == ((7,),) and split.batch == 6
    text = cpu_compile.lower_kernel(module, "rows", [(6, 7), (), (7,)], split=split).llvm_ir
    filecheck(text, """
        CHECK: define i32 @"wia_slice"(ptr %".1", ptr %".2")
        CHECK: atomicrmw xchg ptr %".2", i64 0 acquire
        CHECK: call void @"wia.lib.arena.finish"({{.*}}, ptr %".2",
        CHECK: @"wia.arena.slice_pools" = internal global [16 x i64] zeroinitializer, align 64
        CHECK: define internal i32 @"wia.batch_slices"(ptr %".1", i64 %".2", i64 %".3")
        CHECK: sdiv i64 %{{.*}}, 2
        CHECK: mul i64 %{{.*}}, 28
        CHECK: call i32 @"wia_slice"(
        CHECK: icmp ne i64 %{{.*}}, 7
        CHECK: define i32 @"wia_entry"(ptr %".1")
        CHECK: store i64 6,
        CHECK: call ptr @"aligned_alloc"(i64 64,
        CHECK: call i32 @"wia.parallel_for"({{.*}}@"wia.batch_slices", {{.*}}, i64 0, i64 2, i64 1, i64 2)
        CHECK: store i64 6, ptr
        CHECK: store i64 7, ptr
        CHECK: call void @"free"(
    """)


def test_generic_code_reads_the_batch_and_runs_a_small_one_whole():
    module = compile_to_ir(SRC)
    pattern = [(None, 7), (), (7,)]
    split = cpu_compile.batch_split(module, "rows", pattern, frozenset(), threads=2, min_work=63)
    # 21 operations a row (x * s, its exp and + b, 7 columns each): 3 rows a slice at least
    assert split is not None and split.batch is None and split.min_batch == 6
    text = cpu_compile.lower_kernel(module, "rows", pattern, split=split).llvm_ir
    filecheck(text, """
        CHECK: define internal i32 @"wia.batch_slices"(ptr %".1", i64 %".2", i64 %".3")
        CHECK: sdiv i64 %{{.*}}, 2
        CHECK: call i32 @"wia_slice"(
        CHECK: define i32 @"wia_entry"(ptr %".1")
        CHECK: load i64, ptr %{{.*}}
        CHECK-NEXT: icmp slt i64 %{{.*}}, 6
        CHECK: getelementptr [16 x i64], [16 x i64]* @"wia.arena.slice_pools", i64 0,
        CHECK-NEXT: call i32 @"wia_slice"(ptr %".1",
        CHECK: mul i64 %{{.*}}, 28
        CHECK: call i32 @"wia.parallel_for"(
    """)


def test_a_model_split_matches_onnx_runtime(split_always, restore_thread_count):
    ort = pytest.importorskip("onnxruntime")
    from tests.onnx import models

    built = models.mobilenet_v2(3, 32, 10, width=8)
    session = ort.InferenceSession(built.model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    mod = wiadsl.load_onnx(built.model)
    feeds = built.make_inputs(4)
    want = session.run(None, feeds)[0]
    for threads in (1, 2):
        wiadsl.set_num_threads(threads)
        np.testing.assert_allclose(mod(**feeds), want, rtol=1e-3, atol=1e-5)
        assert mod.kernel.stats["batch_slices"] == 2


STEADY = COUNTING + textwrap.dedent("""
    import wiadsl
    from wiadsl.backends.llvm import compile as cpu_compile
    real = cpu_compile.batch_split
    cpu_compile.batch_split = lambda m, k, s, f: real(m, k, s, f, threads=2, min_work=0)
    SRC = '''
    kernel net(input x: f32[N, 8, 12, 12], input w: f32[8, 8, 3, 3], output y: f32[N, 8, 12, 12]) {
        t = relu(conv2d(x, w, stride=1, padding=1));
        y = relu(conv2d(t, w, stride=1, padding=1)) + t;
    }
    '''
    net = wiadsl.jit(SRC, "net", shapes="static", frozen=(1,))
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 8, 12, 12), dtype=np.float32)
    w = rng.standard_normal((8, 8, 3, 3), dtype=np.float32)
    wiadsl.set_num_threads(int(sys.argv[1]))
    for _ in range(3):
        net(x, w)
    assert net.stats["batch_slices"] == 2
    before = counter.value
    for _ in range(30):
        y = net(x, w)
    print(counter.value - before, y.shape[0])
""")


@pytest.mark.skipif(not NATIVE, reason="the object loader runs on Linux x86-64 only")
@pytest.mark.parametrize("threads", [1, 2])
def test_a_steady_state_split_call_allocates_only_its_output(threads, tmp_path):
    done = subprocess.run([sys.executable, "-c", STEADY, str(threads)], capture_output=True,
                          text=True, timeout=600,
                          env={**os.environ, "WIADSL_CACHE_DIR": str(tmp_path)})
    assert done.returncode == 0, done.stderr[-3000:]
    allocations, batch = map(int, done.stdout.split()[-2:])
    # the output is NumPy's (handed to the kernel) and each slice keeps its
    # intermediates: nothing, but for a pool worker's first scratch buffers, which the
    # OS may schedule after the warm-up calls (test_scratch_buffers.py)
    assert batch == 4 and allocations <= (0 if threads == 1 else SLOTS), allocations


def _example_kernels() -> list[tuple[str, str]]:
    return [(path.name, name) for path in EXAMPLES
            for name in wiadsl.jit(path.read_text(), filename=str(path)).kernels]


@pytest.mark.parametrize("example", _example_kernels(), ids=lambda e: f"{e[0]}:{e[1]}")
def test_the_example_kernels_split_with_the_interpreters_results(split_always, restore_thread_count,
                                                                 example):
    # every example kernel at a batch of 4 (its first input's leading dim) and two
    # threads, its other inputs frozen (as a model's weights: packed once, in the
    # entry's state, which the slices share): split where separable, whole
    # otherwise; the interpreter is the oracle
    path, name = example
    wiadsl.set_num_threads(2)
    source = (EXAMPLES[0].parent / path).read_text()
    signature = wiadsl.jit(source, filename=path).kernels[name].signature
    leading = next((p.dims[0] for p in signature.inputs if p.dims and isinstance(p.dims[0], str)), None)
    weights = tuple(i for i, p in enumerate(signature.inputs)
                    if not (p.dims and leading and p.dims[0] == leading))
    kernel = wiadsl.jit(source, filename=path, shapes="static", frozen=weights).kernels[name]
    inputs = random_inputs(signature, np.random.default_rng(7), {leading: 4} if leading else None)
    for _ in range(2):  # the first call packs the frozen weights, the second reads them
        got = kernel(*inputs)
        want = run_func(kernel.ir_for(), name, inputs)
        for g, w in zip(got if isinstance(got, tuple) else (got,), want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    planned = split_always(kernel.ir_for(), name, [a.shape for a in inputs], frozenset(weights))
    assert kernel.stats["batch_slices"] == (1 if planned is None else 2)
    assert (planned is not None) == (example in SPLIT), "the examples the analysis takes changed"


#: the example kernels that run as two slices at a batch of 4
SPLIT = {("attention.wia", "attn"), ("attention.wia", "attn_explicit"),
         ("attention.wia", "attn_batched"), ("causal_attention.wia", "attn_causal_batched"),
         ("layernorm_softmax.wia", "ln_softmax"), ("layernorm_softmax.wia", "ln_log_softmax"),
         ("matmul.wia", "matmul"), ("mlp.wia", "mlp_relu"), ("mlp.wia", "mlp_gelu"),
         ("quantize.wia", "roundtrip"), ("quantize.wia", "int8_matmul"), ("quantize.wia", "qlinear"),
         ("quantized_mlp.wia", "mlp")}
