"""The rows of ``gpu_bench.py``: kernel sources, inputs, NumPy checks, work counted.

Each row is one WIA kernel ``k`` at a GPU size, and its twin at a simulator size
(``--sim``: the same source, dtype and layout, so the same kernel choice where the
shape allows). A row's check compares our output with NumPy (float64) on a subsample
of its rows: the relative Frobenius error ||ours - numpy|| / ||numpy||, and every
element of the output finite. Work is counted as usual: a matmul 2MNK operations,
attention 4TSD (causal: half, the keys a query keeps), a row or elementwise kernel
the bytes it must move (each input read once, each output written once).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

Inputs = dict[str, np.ndarray]
#: rows of a [M, ...] output the check recomputes with NumPy
CHECK_ROWS = 64

MM = "kernel k(input a: {t}[M, K], input b: {t}[K, N], output y: {t}[M, N]) {{ y = a @ b; }}"
MM_NT = ("kernel k(input a: f32[M, K], input b: f32[N, K], output y: f32[M, N])"
         " { y = a @ transpose(b); }")
I8_NT = ("kernel k(input a: i8[M, K], input b: i8[N, K], output y: i32[M, N])"
         " { y = cast(a, i32) @ cast(transpose(b), i32); }")
SOFTMAX = "import nn;\nkernel k(input x: {t}[M, N], output y: {t}[M, N]) {{ y = nn.softmax(x); }}"
LAYER_NORM = ("import nn;\nkernel k(input x: {t}[M, N], input g: {t}[N], input b: {t}[N],"
              " output y: {t}[M, N]) {{ y = nn.layer_norm(x, g, b); }}")
FUSED = ("kernel k(input a: f32[N], input b: f32[N], input c: f32[N], output y: f32[N])"
         " { y = relu(a * b + c); }")
ATTENTION = ("import nn;\nkernel k(input q: f16[{b}T, D], input k: f16[{b}S, D], input v: f16[{b}S, D],"
             " output o: f16[{b}T, D]) {{ o = nn.{fn}(q, k, v); }}")


@dataclass(frozen=True)
class Row:
    """One benchmark: what runs, on what, how it is checked and what it is worth."""

    name: str
    source: str
    #: rng -> inputs in the kernel's parameter order (bf16 as float32 holding bf16 values)
    make: Callable[[np.random.Generator], Inputs]
    #: (inputs, our output) -> relative error against NumPy on a subsample
    check: Callable[[Inputs, np.ndarray], float]
    tol: float
    #: operations or bytes per run, and the unit of work / second
    work: float
    unit: str
    #: the reference's key in ``gpu_refs.REFERENCES`` (None: no reference)
    reference: str | None
    #: the inputs' shapes (what ``make`` returns), by parameter name
    shapes: dict[str, tuple[int, ...]]
    #: jit options (allow_tf32, arch)
    options: dict[str, Any] = field(default_factory=dict)


def rel_err(got: np.ndarray, want: np.ndarray) -> float:
    """||got - want|| / ||want|| in float64; inf when ``got`` has a NaN or an inf."""
    g, w = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if not np.isfinite(g).all():
        return float("inf")
    return float(np.linalg.norm(g - w) / max(np.linalg.norm(w), 1e-300))


def sample(n: int) -> np.ndarray:
    """``CHECK_ROWS`` row indices spread over 0..n-1, the first and the last included."""
    return np.unique(np.linspace(0, n - 1, min(n, CHECK_ROWS)).astype(np.int64))


def finite(out: np.ndarray) -> bool:
    return bool(np.isfinite(np.asarray(out, np.float64) if out.dtype.kind != "f" else out).all())


def bf16(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to bf16 (nearest even), as float32."""
    bits = np.ascontiguousarray(x, np.float32).view(np.uint32)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).view(np.float32)


def normal(rng: np.random.Generator, shape: tuple[int, ...], t: str) -> np.ndarray:
    x = rng.standard_normal(shape, dtype=np.float32)
    return bf16(x) if t == "bf16" else x.astype({"f16": np.float16, "f32": np.float32}[t])


# ---------------------------------------------------------------- checks


def check_matmul(nt: bool) -> Callable[[Inputs, np.ndarray], float]:
    def check(xs: Inputs, y: np.ndarray) -> float:
        if not finite(y):
            return float("inf")
        rows = sample(y.shape[0])
        b = xs["b"].astype(np.float64)
        want = xs["a"][rows].astype(np.float64) @ (b.T if nt else b)
        return rel_err(y[rows], want)
    return check


def softmax_rows(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def check_softmax(xs: Inputs, y: np.ndarray) -> float:
    rows = sample(y.shape[0])
    return rel_err(y[rows], softmax_rows(xs["x"][rows].astype(np.float64)))


def check_layer_norm(xs: Inputs, y: np.ndarray) -> float:
    rows = sample(y.shape[0])
    x = xs["x"][rows].astype(np.float64)
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    want = (x - mean) / np.sqrt(var + 1e-5) * xs["g"].astype(np.float64) + xs["b"].astype(np.float64)
    return rel_err(y[rows], want)


def check_fused(xs: Inputs, y: np.ndarray) -> float:
    idx = np.unique(np.linspace(0, y.size - 1, 1 << 16).astype(np.int64))
    a, b, c = (xs[n][idx].astype(np.float64) for n in "abc")
    return rel_err(y[idx], np.maximum(a * b + c, 0)) if finite(y) else float("inf")


def attention_rows(q: np.ndarray, k: np.ndarray, v: np.ndarray, rows: np.ndarray,
                   causal: bool) -> np.ndarray:
    """softmax(q[rows] k^T / sqrt(d), key j kept for query i iff j <= i when causal) @ v."""
    s = q[rows].astype(np.float64) @ k.astype(np.float64).T / np.sqrt(q.shape[-1])
    if causal:
        s = np.where(np.arange(k.shape[0]) <= rows[:, None], s, -np.inf)
    return softmax_rows(s) @ v.astype(np.float64)


def check_attention(causal: bool) -> Callable[[Inputs, np.ndarray], float]:
    def check(xs: Inputs, o: np.ndarray) -> float:
        q, k, v = xs["q"], xs["k"], xs["v"]
        if q.ndim == 2:
            q, k, v, o = q[None], k[None], v[None], o[None]
        rows = sample(q.shape[1])
        heads = np.unique([0, q.shape[0] - 1])
        got = np.concatenate([o[h][rows] for h in heads])
        want = np.concatenate([attention_rows(q[h], k[h], v[h], rows, causal) for h in heads])
        return rel_err(got, want)
    return check


# ---------------------------------------------------------------- rows


def matmul_row(t: str, m: int, n: int, k: int, **options: Any) -> Row:
    nt = t in ("tf32", "i8")
    tag = " (sm_80 kernel)" if options.get("arch") == "sm_80" else ""
    if t == "i8":
        def make(rng: np.random.Generator) -> Inputs:
            return {"a": rng.integers(-128, 128, (m, k), dtype=np.int8),
                    "b": rng.integers(-128, 128, (n, k), dtype=np.int8)}
        return Row(f"matmul i8 {m}x{n}x{k} -> i32", I8_NT, make, check_matmul(True), 0.0,
                   2.0 * m * n * k, "TOP/s", "gemm_i8", {"a": (m, k), "b": (n, k)}, options)
    st = "f32" if t == "tf32" else t

    def make_f(rng: np.random.Generator) -> Inputs:
        return {"a": normal(rng, (m, k), st), "b": normal(rng, (n, k) if nt else (k, n), st)}
    tol = {"f16": 2e-3, "bf16": 1e-2, "f32": 1e-5, "tf32": 3e-3}[t]
    ref = {"f16": "matmul", "bf16": "gemm_bf16", "f32": "matmul", "tf32": "gemm_tf32"}[t]
    if t == "tf32":
        options = {**options, "allow_tf32": True}
    return Row(f"matmul {t} {m}x{n}x{k}{tag}", MM_NT if nt else MM.format(t=st), make_f,
               check_matmul(nt), tol, 2.0 * m * n * k, "TFLOP/s", ref,
               {"a": (m, k), "b": (n, k) if nt else (k, n)}, options)


def row_kernel(kind: str, t: str, m: int, n: int) -> Row:
    size = np.dtype(np.float16 if t == "f16" else np.float32).itemsize
    if kind == "softmax":
        return Row(f"softmax {t} {m}x{n}", SOFTMAX.format(t=t),
                   lambda rng: {"x": normal(rng, (m, n), t)}, check_softmax,
                   {"f32": 1e-5, "f16": 2e-3}[t], 2.0 * m * n * size, "GB/s", "softmax",
                   {"x": (m, n)})
    return Row(f"layer_norm {t} {m}x{n}", LAYER_NORM.format(t=t),
               lambda rng: {"x": normal(rng, (m, n), t), "g": normal(rng, (n,), t),
                            "b": normal(rng, (n,), t)},
               check_layer_norm, {"f32": 1e-5, "f16": 3e-3}[t], (2.0 * m * n + 2 * n) * size,
               "GB/s", "layer_norm", {"x": (m, n), "g": (n,), "b": (n,)})


def fused_row(n: int) -> Row:
    return Row(f"relu(a*b+c) f32 {n}", FUSED,
               lambda rng: {c: rng.standard_normal(n, dtype=np.float32) for c in "abc"},
               check_fused, 1e-6, 16.0 * n, "GB/s", "fused", {c: (n,) for c in "abc"})


def attention_row(t: int, d: int, causal: bool, heads: int = 0) -> Row:
    fn = ("causal_attention" if causal else "attention") + ("_batched" if heads else "")
    shape = (heads, t, d) if heads else (t, d)
    name = f"attention f16 {heads}x{t}x{t}x{d}" if heads else f"attention f16 {t}x{t}x{d}"
    flops = 4.0 * t * t * d * max(heads, 1) / (2 if causal else 1)
    return Row(name + (" causal" if causal else ""),
               ATTENTION.format(b="B, " if heads else "", fn=fn),
               lambda rng: {c: normal(rng, shape, "f16") for c in "qkv"},
               check_attention(causal), 5e-3, flops, "TFLOP/s",
               "attention_causal" if causal else "attention", {c: shape for c in "qkv"})


def rows(sim: bool, arch: str) -> list[Row]:
    """The GPU rows, or their simulator twins. ``arch``: the arch the rows compile for
    (an sm_90 device also runs the f16 GEMM on the sm_80 kernel, for comparison)."""
    g = (lambda real, twin: twin) if sim else (lambda real, twin: real)
    out = [matmul_row("f16", *g((4096,) * 3, (128,) * 3)),
           matmul_row("f16", *g((8192,) * 3, (256, 256, 128))),
           matmul_row("bf16", *g((4096,) * 3, (128,) * 3))]
    if arch.startswith("sm_90"):
        out.append(matmul_row("f16", *g((4096,) * 3, (128,) * 3), arch="sm_80"))
    out += [matmul_row("f32", *g((4096,) * 3, (64,) * 3)),
            matmul_row("tf32", *g((4096,) * 3, (128,) * 3)),
            matmul_row("i8", *g((4096,) * 3, (128,) * 3))]
    for kind in ("softmax", "layer_norm"):
        for t in ("f32", "f16"):
            out.append(row_kernel(kind, t, *g((8192, 8192), (4, 8192))))
    out.append(fused_row(g(1 << 28, 1 << 16)))
    for causal in (False, True):
        out.append(attention_row(g(4096, 128), 64, causal))
    out.append(attention_row(g(4096, 128), 64, False, heads=g(16, 2)))
    return out
