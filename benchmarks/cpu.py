"""CPU backend benchmark: target="cpu" vs NumPy (and Numba where installed), one run.

Usage (unset the OpenBLAS tuning variables for this command only, see README):
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE PYTHONPATH=. python benchmarks/cpu.py [--quick] [--markdown]
    PYTHONPATH=. python benchmarks/cpu.py --cold   # only the cold compiles, first thing in a new process
    PYTHONPATH=. python benchmarks/cpu.py --cold --each   # and each kernel's own cold compile

Prints one table: median times of both sides measured in this process, in
alternating batches (a load change on a shared machine hits both sides), and the
ratio (>1 means wiadsl is faster), then cold compile times and call overhead.
The cold compile rows come last: every example kernel compiled from nothing, in a
first pass that also builds the library helpers it links against as it meets them
(some are loaded already by the rows above; with ``--cold``, the only rows, in a
process that has compiled nothing: all of them), then in a second pass with the
helpers loaded (a host builds them once and keeps them in its disk cache).
"""

from __future__ import annotations

import os
import pathlib
import sys
import time
from collections.abc import Callable

import numpy as np

# Cold compile times must be cold: no disk cache (the in-memory one is cleared per kernel).
os.environ["WIADSL_CACHE"] = "0"
ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import wiadsl  # noqa: E402
from wiadsl.cache.entries import clear_memory  # noqa: E402
from wiadsl.runtime.binding import bind_call  # noqa: E402

QUICK = "--quick" in sys.argv
COLD = "--cold" in sys.argv
#: ``--markdown``: print the table as Markdown (what benchmarks/README.md holds)
MARKDOWN = "--markdown" in sys.argv
#: ``--each``: after the cold compile row, a row per example kernel
EACH = "--each" in sys.argv
ROWS: list[tuple[str, float, float, str]] = []

SRC = """
import nn;
kernel mm(input A: f32[M, K], input B: f32[K, N], output C: f32[M, N]) { C = A @ B; }
kernel qmm(input A: i8[M, K], input B: i8[K, N], output C: i32[M, N]) { C = cast(A, i32) @ cast(B, i32); }
kernel fused(input a: f32[N], input b: f32[N], input c: f32[N], output y: f32[N]) { y = relu(a * b + c); }
kernel softmax(input x: f32[T, D], output y: f32[T, D]) { y = nn.softmax(x); }
kernel layernorm(input x: f32[T, D], input g: f32[D], input b: f32[D], output y: f32[T, D]) {
    y = nn.layer_norm(x, g, b);
}
kernel conv(input x: f32[N, C, H, W], input w: f32[O, C, KH, KW], output y: f32[N, O, P, Q]) {
    y = conv2d(x, w, stride=1, padding=1);
}
kernel add4(input a: f32[N], input b: f32[N], output c: f32[N]) { c = a + b; }
"""


#: Seconds of calls per side and round (a batch is a fifth of it). After each
#: settle pause both thread pools sleep, and the first call of a batch pays their
#: wake-up (~1 ms on this VM): 10 ms batches showed our 1024^3 matmul at 165-209
#: GFLOP/s where it runs at 275-282 call after call; 50 ms batches keep that
#: first call to a few percent for both sides.
MIN_TIME = 0.25


def _batch(fn: Callable[[], object], min_time: float) -> int:
    """Calls per timed batch: enough for ``min_time / 5`` seconds (after a warm-up call)."""
    fn()
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < min_time / 5 and n < 1000:
        fn()
        n += 1
    return max(1, n)


def median_time(fn: Callable[[], object], repeat: int = 7, min_time: float = MIN_TIME) -> float:
    return paired(fn, None, repeat, min_time)[0]


#: Seconds to wait before each timed batch: OpenBLAS worker threads busy-wait ~0.1-0.2 s
#: after a BLAS call, taking the other core from whatever runs next (measured: our
#: 1024^3 matmul right after ``a @ b`` ran at 60 GFLOP/s, 125 after a 0.2 s pause).
SETTLE = 0.25




def paired(ours: Callable[[], object], theirs: Callable[[], object] | None, repeat: int = 9,
           min_time: float = MIN_TIME) -> tuple[float, float]:
    """Median seconds per call of both functions, measured in alternating batches so
    that a load change on this shared machine hits both sides alike, each batch after
    the same pause: OpenBLAS's spinning threads must not slow ours, and a pause before
    one side's batches only (as here until stop 64) gave that side cold caches and
    sleeping workers that the other's never had."""
    fns = [f for f in (ours, theirs) if f is not None]
    sizes = [_batch(f, min_time) for f in fns]
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for f, n, out in zip(fns, sizes, times, strict=True):
            if theirs is not None:
                time.sleep(SETTLE)
            t0 = time.perf_counter()
            for _ in range(n):
                f()
            out.append((time.perf_counter() - t0) / n)
    meds = [float(np.median(t)) for t in times]
    return meds[0], meds[1] if len(meds) > 1 else float("nan")


def row(name: str, ours: float, theirs: float, unit: str) -> None:
    ROWS.append((name, ours, theirs, unit))
    if MARKDOWN:
        print(f"| {name} | {ours * 1e3:.3f} ms | {theirs * 1e3:.3f} ms | {theirs / ours:.2f}× | {unit} |",
              flush=True)
    else:
        print(f"{name:44s} {ours * 1e3:10.3f} ms {theirs * 1e3:10.3f} ms {theirs / ours:7.2f}x  {unit}",
              flush=True)


def note(name: str, text: str) -> None:
    """A table line without a ratio (a sub-measurement of the row above, a total)."""
    print(f"| {name.strip()} | {text} | | | |" if MARKDOWN else f"{name:44s} {text}", flush=True)


def main() -> None:
    if COLD:
        cold_compile("cold compile + first call, new process")
        return
    mod = wiadsl.jit(SRC, target="cpu")
    rng = np.random.default_rng(0)
    from wiadsl.backends.llvm.parallel import THREADS
    from wiadsl.backends.llvm.target import host
    print(f"host {host().cpu}, {THREADS} threads; load average at start "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if MARKDOWN:
        print("\n| benchmark | wiadsl | reference | ratio | |\n|---|---|---|---|---|")
    else:
        print(f"{'benchmark':44s} {'wiadsl':>13s} {'reference':>13s} {'ratio':>8s}")
    for n in ([256, 512, 1024] if QUICK else [256, 512, 1024, 2048]):
        a, b = rng.standard_normal((n, n), np.float32), rng.standard_normal((n, n), np.float32)
        np.testing.assert_allclose(mod.mm(a, b), a @ b, rtol=1e-3, atol=1e-2)
        ours, ref = paired(lambda a=a, b=b: mod.mm(a, b), lambda a=a, b=b: a @ b)
        row(f"matmul f32 {n}^3 (vs numpy @)", ours, ref, f"{2 * n**3 / ours / 1e9:.0f} vs {2 * n**3 / ref / 1e9:.0f} GFLOP/s")

    for m, k, n in [(1, 784, 512), (1, 768, 768), (4, 768, 768), (16, 768, 768)]:  # inference batches
        a, b = rng.standard_normal((m, k), np.float32), rng.standard_normal((k, n), np.float32)
        np.testing.assert_allclose(mod.mm(a, b), a @ b, rtol=1e-3, atol=1e-2)
        ours, ref = paired(lambda a=a, b=b: mod.mm(a, b), lambda a=a, b=b: a @ b)
        row(f"matmul f32 {m}x{k}x{n} (vs numpy @)", ours, ref, f"{k * n * 4 / ours / 1e9:.0f} GB/s of B")
    for m in (1, 64, 256):  # exact int8 products (vpdpbusd on a VNNI host, else pmaddwd)
        qa = rng.integers(-128, 128, (m, 512), dtype=np.int8)
        qb = rng.integers(-128, 128, (512, 512), dtype=np.int8)
        fa, fb = qa.astype(np.float32), qb.astype(np.float32)
        np.testing.assert_array_equal(mod.qmm(qa, qb), qa.astype(np.int32) @ qb.astype(np.int32))
        ours, ref = paired(lambda qa=qa, qb=qb: mod.qmm(qa, qb), lambda fa=fa, fb=fb: fa @ fb)
        row(f"matmul i8 {m}x512x512 (vs numpy f32 @)", ours, ref, f"{2 * m * 512 * 512 / ours / 1e9:.0f} GOP/s")

    n = 1 << 24
    a, b, c = (rng.standard_normal(n, np.float32) for _ in range(3))
    out, tmp = np.empty_like(a), np.empty_like(a)
    np.testing.assert_allclose(mod.fused(a, b, c), np.maximum(a * b + c, 0), rtol=1e-5, atol=1e-5)
    ours, ref = paired(lambda: mod.fused(a, b, c), lambda: np.maximum(a * b + c, 0), repeat=7)
    gbs = 16 * n / ours / 1e9
    row("relu(a*b+c) 16M (vs numpy temporaries)", ours, ref, f"{gbs:.1f} GB/s")

    def numpy_out() -> None:
        np.multiply(a, b, out=tmp)
        np.add(tmp, c, out=tmp)
        np.maximum(tmp, 0, out=out)
    into = np.empty_like(a)  # both sides write a preallocated buffer: no page faults
    np.testing.assert_allclose(mod.fused(a, b, c, y=into), np.maximum(a * b + c, 0), rtol=1e-5, atol=1e-5)
    ours, ref = paired(lambda: mod.fused(a, b, c, y=into), numpy_out, repeat=7)
    row("relu(a*b+c) 16M, y= buffer (vs numpy out=)", ours, ref, f"{16 * n / ours / 1e9:.1f} GB/s")
    copy = median_time(lambda: np.copyto(out, a), repeat=5)
    note("  copy bandwidth (np.copyto, 8 B/elem)", f"{8 * n / copy / 1e9:10.1f} GB/s; fused reaches "
         f"{gbs / (8 * n / copy / 1e9) * 100:.0f}% of it")

    x = rng.standard_normal((4096, 1024), np.float32)
    g, bb = rng.standard_normal(1024, np.float32), rng.standard_normal(1024, np.float32)

    def np_softmax() -> np.ndarray:
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def np_layernorm() -> np.ndarray:
        mu = x.mean(axis=1, keepdims=True)
        var = ((x - mu) ** 2).mean(axis=1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-5) * g + bb
    np.testing.assert_allclose(mod.softmax(x), np_softmax(), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(mod.layernorm(x, g, bb), np_layernorm(), rtol=1e-3, atol=1e-4)
    row("softmax 4096x1024 (vs numpy)", *paired(lambda: mod.softmax(x), np_softmax), "")
    row("layer_norm 4096x1024 (vs numpy)", *paired(lambda: mod.layernorm(x, g, bb), np_layernorm), "")

    xi = rng.standard_normal((1, 64, 56, 56), np.float32)
    w = rng.standard_normal((64, 64, 3, 3), np.float32)

    def np_conv() -> np.ndarray:
        xp = np.pad(xi, ((0, 0), (0, 0), (1, 1), (1, 1)))
        cols = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))  # 1,64,56,56,3,3
        cols = cols.transpose(0, 1, 4, 5, 2, 3).reshape(64 * 9, 56 * 56)
        return (w.reshape(64, -1) @ cols).reshape(1, 64, 56, 56)
    np.testing.assert_allclose(mod.conv(xi, w), np_conv(), rtol=1e-3, atol=1e-3)
    row("conv2d 1x64x56x56 * 64x64x3x3 (vs im2col+@)", *paired(lambda: mod.conv(xi, w), np_conv), "")

    examples(rng)
    a4, b4 = np.ones(4, np.float32), np.ones(4, np.float32)
    ours, ref = paired(lambda: mod.add4(a4, b4), lambda: a4 + b4, min_time=0.2)
    row("call overhead, 4-element add (vs numpy +)", ours, ref, f"{ours * 1e6:.1f} us per call")
    fn = mod.kernels["add4"]
    inputs = list(bind_call(fn.signature, (a4, b4), {}).inputs.values())
    compiled = fn.compiled_for(inputs)
    native = median_time(lambda: compiled.run(inputs), min_time=0.2)
    note("  of which backend run() (args + native + output)", f"{native * 1e6:10.1f} us")
    keyword = median_time(lambda: mod.add4(a4, b=b4), min_time=0.2)
    note("  a call by keyword (planned after two calls)", f"{keyword * 1e6:10.1f} us")
    into = np.empty_like(a4)
    buffered = median_time(lambda: mod.add4(a4, b4, c=into), min_time=0.2)
    note("  a call into an output buffer (c=)", f"{buffered * 1e6:10.1f} us")
    wrong = np.empty(4, np.float64)  # refused: the checking way, then its error
    checked = median_time(lambda: _refused(lambda: mod.add4(a4, b4, c=wrong)), min_time=0.2)
    note("  the checking path (a buffer of another dtype, refused)", f"{checked * 1e6:10.1f} us")
    cold_compile()
    print(f"\nload average at end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def _refused(call) -> None:  # type: ignore[no-untyped-def]
    try:
        call()
    except wiadsl.WiaCallError:
        return
    raise AssertionError("the call was not refused")


def examples(rng: np.random.Generator) -> None:
    path = ROOT / "examples" / "mlp.wia"
    mlp = wiadsl.jit(path.read_text(), filename=str(path), target="cpu")
    x = rng.standard_normal((256, 512), np.float32)
    w1, b1 = rng.standard_normal((512, 1024), np.float32) / 20, rng.standard_normal(1024, np.float32)
    w2, b2 = rng.standard_normal((1024, 256), np.float32) / 30, rng.standard_normal(256, np.float32)
    ref = lambda: np.maximum(x @ w1 + b1, 0) @ w2 + b2  # noqa: E731
    np.testing.assert_allclose(mlp.mlp_relu(x, w1, b1, w2, b2), ref(), rtol=1e-3, atol=1e-3)
    row("example mlp_relu 256x512x1024x256", *paired(lambda: mlp.mlp_relu(x, w1, b1, w2, b2), ref), "")
    xg = x[:64].copy()  # the GELU MLP: 64x512 -> 1024 -> 256, nn.gelu (tanh form)

    def np_gelu_mlp() -> np.ndarray:
        h = xg @ w1 + b1
        return (0.5 * h * (1 + np.tanh(np.float32(0.7978845608) * (h + np.float32(0.044715) * h ** 3)))) @ w2 + b2
    np.testing.assert_allclose(mlp.mlp_gelu(xg, w1, b1, w2, b2), np_gelu_mlp(), rtol=1e-3, atol=1e-3)
    row("example mlp_gelu 64x512x1024x256", *paired(lambda: mlp.mlp_gelu(xg, w1, b1, w2, b2),
                                                    np_gelu_mlp), "")
    path = ROOT / "examples" / "attention.wia"
    att = wiadsl.jit(path.read_text(), filename=str(path), target="cpu")
    q, k, v = (rng.standard_normal((512, 64), np.float32) for _ in range(3))

    def np_att() -> np.ndarray:
        s = q @ k.T / np.sqrt(np.float32(64))
        e = np.exp(s - s.max(axis=1, keepdims=True))
        return (e / e.sum(axis=1, keepdims=True)) @ v
    np.testing.assert_allclose(att.attn(q, k, v), np_att(), rtol=1e-3, atol=1e-4)
    row("example attention 512x64", *paired(lambda: att.attn(q, k, v), np_att), "")


def cold_compile(label: str = "cold compile + first call") -> None:
    """Each example kernel's first call with nothing of it compiled, twice: first as
    it comes (a kernel also waits for the library helpers it is the first to link
    against: the gemm, conv, pool drivers, which a host builds once and then finds in
    its disk cache), then again with those helpers loaded, which is what compiling a
    new kernel costs on a host that has run wiadsl before."""
    sys.path.insert(0, str(ROOT / "tests" / "cpu"))
    from programs import EXAMPLES, random_inputs  # type: ignore[import-not-found]
    passes: list[dict[str, float]] = [{}, {}]
    for times in passes:
        for path in EXAMPLES:
            mod = wiadsl.jit(path.read_text(), filename=str(path), target="cpu")
            for name, fn in mod.kernels.items():
                inputs = random_inputs(fn.signature, np.random.default_rng(0))
                clear_memory()
                t0 = time.perf_counter()
                fn(*inputs)
                times[f"{path.stem}.{name}"] = (time.perf_counter() - t0) * 1e3
    for times, how in zip(passes, ("helpers built on the way", "helpers already built")):
        worst = max(times, key=times.__getitem__)
        note(f"{label} ({how})", f"mean {sum(times.values()) / len(times):.0f} ms over "
             f"{len(times)} kernels, worst {times[worst]:.0f} ms ({worst})")
    if EACH:
        for kernel in passes[0]:
            note(f"  {kernel}", f"{passes[0][kernel]:.0f} ms, then {passes[1][kernel]:.0f} ms")


if __name__ == "__main__":
    main()
