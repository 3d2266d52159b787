"""wiadsl against the kernel compilers a user would pick instead: NumPy, Numba, JAX (issue 19).

Usage:
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE PYTHONPATH=. python benchmarks/peers.py [--quick]

Numba and JAX come from the optional ``bench`` extra (``pip install '.[bench]'``); a
peer that is not installed shows as ``-``. Every contestant runs in this process on
the same inputs, in interleaved rounds (each round times one batch of each, with a
pause after the BLAS-backed ones so their spinning threads leave the cores), and the
table holds medians over the rounds. Before timing, each result is checked against
NumPy's (float64 where the work is a reduction); a wrong result stops the script.

The contestants are what each tool's users write:
- NumPy: the expression with temporaries, or ``out=`` where the row writes a buffer.
- Numba: ``@njit(parallel=True, fastmath=True)`` loops writing a buffer with ``prange`` over rows or
  elements (no row for matmul: Numba's ``np.dot`` calls the same BLAS as NumPy).
- JAX: ``jax.jit`` of the jax.numpy expression on XLA's CPU backend, inputs already
  on the device, ``block_until_ready`` on the result (JAX never writes into a buffer).
- wiadsl: ``target="cpu"``, called like a NumPy function (``y=`` for the buffer row).

"wiadsl vs best" is the best peer's time over ours (> 1: wiadsl is faster).
"""

from __future__ import annotations

import os
import pathlib
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import wiadsl  # noqa: E402

QUICK = "--quick" in sys.argv
ROUNDS = 5 if QUICK else 11
BATCH_SECONDS = 0.05 if QUICK else 0.1
#: OpenBLAS and XLA worker threads spin ~0.1-0.2 s after a call (see cpu.py's SETTLE).
SETTLE = 0.2
PEERS = ("NumPy", "Numba", "JAX", "wiadsl")

SRC = """
import nn;
kernel fused(input a: f32[N], input b: f32[N], input c: f32[N], output y: f32[N]) {
    y = relu(a * b + c);
}
kernel softmax(input x: f32[T, D], output y: f32[T, D]) { y = nn.softmax(x); }
kernel layer_norm(input x: f32[T, D], input g: f32[D], input b: f32[D], output y: f32[T, D]) {
    y = nn.layer_norm(x, g, b);
}
kernel mm(input A: f32[M, K], input B: f32[K, N], output C: f32[M, N]) { C = A @ B; }
kernel gelu_mlp(input x: f32[B, I], input w1: f32[I, H], input b1: f32[H],
                input w2: f32[H, O], input b2: f32[O], output y: f32[B, O]) {
    y = nn.gelu(x @ w1 + b1) @ w2 + b2;
}
"""

GELU_C = float(np.sqrt(2.0 / np.pi))


@dataclass
class Work:
    """One row: a NumPy reference and each peer's callable (None: not available)."""

    name: str
    reference: Callable[[], np.ndarray]
    contestants: dict[str, Callable[[], object] | None]
    rtol: float = 1e-4
    atol: float = 1e-5
    times: dict[str, list[float]] = field(default_factory=dict)


def _numba():
    try:
        import numba
    except ImportError:
        return None
    return numba


def _jax():
    try:
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None, None
    return jax, jnp


def numba_kernels(numba) -> dict[str, Callable]:
    """The Numba versions (compiled on first call, before timing)."""
    njit, prange = numba.njit(parallel=True, fastmath=True, cache=False), numba.prange

    @njit
    def fused(a, b, c, y):
        for i in prange(a.shape[0]):
            v = a[i] * b[i] + c[i]
            y[i] = v if v > 0.0 else 0.0

    @njit
    def softmax(x, y):
        for r in prange(x.shape[0]):
            m = x[r, 0]
            for j in range(x.shape[1]):
                m = max(m, x[r, j])
            s = 0.0
            for j in range(x.shape[1]):
                e = np.exp(x[r, j] - m)
                y[r, j] = e
                s += e
            inv = 1.0 / s
            for j in range(x.shape[1]):
                y[r, j] *= inv

    @njit
    def layer_norm(x, g, b, y):
        d = x.shape[1]
        for r in prange(x.shape[0]):
            mu = 0.0
            for j in range(d):
                mu += x[r, j]
            mu /= d
            var = 0.0
            for j in range(d):
                t = x[r, j] - mu
                var += t * t
            inv = 1.0 / np.sqrt(var / d + 1e-5)
            for j in range(d):
                y[r, j] = (x[r, j] - mu) * inv * g[j] + b[j]

    def returning(kernel: Callable) -> Callable:
        """The kernel, returning the buffer it writes (its last argument)."""
        def run(*args):
            kernel(*args)
            return args[-1]
        return run

    return {name: returning(k) for name, k in
            (("fused", fused), ("softmax", softmax), ("layer_norm", layer_norm))}


def jax_kernels(jax, jnp) -> dict[str, Callable]:
    def gelu(h):
        return 0.5 * h * (1.0 + jnp.tanh(GELU_C * (h + 0.044715 * h ** 3)))

    def layer_norm(x, g, b):
        mu = x.mean(-1, keepdims=True)
        xc = x - mu
        return xc * jax.lax.rsqrt((xc * xc).mean(-1, keepdims=True) + 1e-5) * g + b

    return {
        "fused": jax.jit(lambda a, b, c: jnp.maximum(a * b + c, 0.0)),
        "softmax": jax.jit(lambda x: jax.nn.softmax(x, axis=-1)),
        "layer_norm": jax.jit(layer_norm),
        "mm": jax.jit(lambda a, b: a @ b),
        "gelu_mlp": jax.jit(lambda x, w1, b1, w2, b2: gelu(x @ w1 + b1) @ w2 + b2),
    }


def numpy_gelu_mlp(x, w1, b1, w2, b2):
    h = x @ w1 + b1
    return (0.5 * h * (1.0 + np.tanh(GELU_C * (h + 0.044715 * h ** 3)))) @ w2 + b2


def numpy_softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def numpy_layer_norm(x, g, b):
    mu = x.mean(-1, keepdims=True)
    xc = x - mu
    return xc / np.sqrt((xc * xc).mean(-1, keepdims=True) + 1e-5) * g + b


def works() -> list[Work]:
    rng = np.random.default_rng(0)
    mod = wiadsl.jit(SRC, target="cpu")
    nb = _numba()
    nbk = numba_kernels(nb) if nb else {}
    jax, jnp = _jax()
    jk = jax_kernels(jax, jnp) if jax else {}

    def on_jax(name, *args):
        if not jk:
            return None
        dev = [jnp.asarray(a) for a in args]
        fn = jk[name]
        return lambda: fn(*dev).block_until_ready()

    n = 1 << 22 if QUICK else 1 << 24
    a, b, c = (rng.standard_normal(n, dtype=np.float32) for _ in range(3))
    y, t = np.empty_like(a), np.empty_like(a)

    def numpy_fused():
        np.multiply(a, b, out=t)
        np.add(t, c, out=t)
        return np.maximum(t, 0.0, out=y)

    out = []
    out.append(Work(f"relu(a*b+c), {n >> 20}M f32, into a buffer", lambda: np.maximum(a * b + c, 0), {
        "NumPy": numpy_fused,
        "Numba": (lambda: nbk["fused"](a, b, c, y)) if nbk else None,
        "JAX": on_jax("fused", a, b, c),
        "wiadsl": lambda: mod.fused(a, b, c, y=y),
    }))
    rows = 1024 if QUICK else 4096
    x = rng.standard_normal((rows, 1024), dtype=np.float32)
    g, beta = rng.standard_normal(1024, dtype=np.float32), rng.standard_normal(1024, dtype=np.float32)
    ys = np.empty_like(x)
    x64 = x.astype(np.float64)
    out.append(Work(f"softmax {rows}x1024", lambda: numpy_softmax(x64), {
        "NumPy": lambda: numpy_softmax(x),
        "Numba": (lambda: nbk["softmax"](x, ys)) if nbk else None,
        "JAX": on_jax("softmax", x),
        "wiadsl": lambda: mod.softmax(x),
    }))
    out.append(Work(f"layer_norm {rows}x1024", lambda: numpy_layer_norm(x64, g, beta), {
        "NumPy": lambda: numpy_layer_norm(x, g, beta),
        "Numba": (lambda: nbk["layer_norm"](x, g, beta, ys)) if nbk else None,
        "JAX": on_jax("layer_norm", x, g, beta),
        "wiadsl": lambda: mod.layer_norm(x, g, beta),
    }, rtol=1e-3, atol=1e-4))
    m = 512 if QUICK else 1024
    A, B = (rng.standard_normal((m, m), dtype=np.float32) for _ in range(2))
    out.append(Work(f"matmul {m}^3", lambda: A.astype(np.float64) @ B, {
        "NumPy": lambda: A @ B,
        "Numba": None,
        "JAX": on_jax("mm", A, B),
        "wiadsl": lambda: mod.mm(A, B),
    }, rtol=1e-3, atol=1e-3))
    xm = rng.standard_normal((64, 512), dtype=np.float32)
    w1 = (rng.standard_normal((512, 1024)) / 22.6).astype(np.float32)
    w2 = (rng.standard_normal((1024, 256)) / 32.0).astype(np.float32)
    b1, b2 = rng.standard_normal(1024, dtype=np.float32), rng.standard_normal(256, dtype=np.float32)
    mlp_args = (xm, w1, b1, w2, b2)
    out.append(Work("GELU MLP 64x512 -> 1024 -> 256",
                    lambda: numpy_gelu_mlp(*(v.astype(np.float64) for v in mlp_args)), {
        "NumPy": lambda: numpy_gelu_mlp(*mlp_args),
        "Numba": None,
        "JAX": on_jax("gelu_mlp", *mlp_args),
        "wiadsl": lambda: mod.gelu_mlp(*mlp_args),
    }, rtol=2e-3, atol=2e-3))
    return out


def check(work: Work) -> None:
    want = work.reference()
    for name, fn in work.contestants.items():
        if fn is None:
            continue
        got = fn()
        np.testing.assert_allclose(np.asarray(got, dtype=np.float64), want, rtol=work.rtol,
                                   atol=work.atol, err_msg=f"{name} on {work.name}")


def batch_size(fn: Callable[[], object]) -> int:
    fn()
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < BATCH_SECONDS and n < 2000:
        fn()
        n += 1
    return max(1, n)


def measure(work: Work) -> None:
    live = {k: f for k, f in work.contestants.items() if f is not None}
    sizes = {k: batch_size(f) for k, f in live.items()}
    work.times = {k: [] for k in live}
    for _ in range(ROUNDS):
        for k, f in live.items():
            time.sleep(SETTLE)
            t0 = time.perf_counter()
            for _ in range(sizes[k]):
                f()
            work.times[k].append((time.perf_counter() - t0) / sizes[k])


def main() -> None:
    from wiadsl.backends.llvm.parallel import THREADS
    from wiadsl.backends.llvm.target import host
    print(f"host {host().cpu}, {os.cpu_count()} CPUs, wiadsl {THREADS} threads; "
          f"load average at start {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    versions = [f"numpy {np.__version__}"]
    nb, (jax, _) = _numba(), _jax()
    versions += [f"numba {nb.__version__}" if nb else "numba: not installed",
                 f"jax {jax.__version__}" if jax else "jax: not installed"]
    print(", ".join(versions))
    table = works()
    print(f"\n{ROUNDS} interleaved rounds, medians, ms\n")
    print("| work | " + " | ".join(PEERS) + " | wiadsl vs best |")
    print("|---" * (len(PEERS) + 2) + "|")
    for work in table:
        check(work)
        measure(work)
        med = {k: float(np.median(v)) for k, v in work.times.items()}
        best = min(v for k, v in med.items() if k != "wiadsl")
        cells = [f"{med[p] * 1e3:.2f}" if p in med else "-" for p in PEERS]
        print(f"| {work.name} | " + " | ".join(cells) + f" | {best / med['wiadsl']:.2f}x |",
              flush=True)
    print(f"\nload average at end {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
