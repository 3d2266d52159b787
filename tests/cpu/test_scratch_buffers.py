"""Per-thread scratch buffers (backends/llvm/scratch.py): a steady-state call of a
compiled model allocates nothing but its outputs (issue 19) -- the gemm, gemv, conv
and int8 gemm helpers keep their packing memory per thread instead of allocating it
per call (a pool worker makes its own the first time it runs a chunk, which the OS
may schedule after any number of calls). Where no pthread key can be had, the
helpers fall back to a buffer per call and stay correct.

Each case runs in a fresh process that registers a counting ``aligned_alloc`` with
the object loader (loader.py's symbol table is consulted before the process's own
symbols) before any kernel or helper is loaded, so every native allocation is
counted. NumPy is the oracle for the values."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from wiadsl.backends.llvm.loader import NATIVE
from wiadsl.backends.llvm.scratch import SLOTS

pytestmark = pytest.mark.skipif(not NATIVE, reason="the object loader runs on Linux x86-64 only")

#: a child's preamble: every native allocation counted in ``counter.value``
COUNTING = textwrap.dedent("""
    import ctypes, sys
    import numpy as np
    from llvmlite import ir
    from wiadsl.backends.llvm.loader import add_symbol, process_symbol
    from wiadsl.backends.llvm.target import host, load_module, optimize, parse_and_verify

    # aligned_alloc, counted: an atomic increment, then libc's own
    i64, ptr = ir.IntType(64), ir.PointerType(ir.IntType(8))
    mod = ir.Module(name="counting_alloc")
    mod.triple = host().triple
    count = ir.GlobalVariable(mod, i64, "wia_test_alloc_count")
    count.initializer = ir.Constant(i64, 0)
    fn = ir.Function(mod, ir.FunctionType(ptr, [i64, i64]), "wia_test_aligned_alloc")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    b.atomic_rmw("add", count, ir.Constant(i64, 1), "monotonic")
    real = b.inttoptr(ir.Constant(i64, process_symbol("aligned_alloc")),
                      ir.PointerType(fn.function_type))
    b.ret(b.call(real, list(fn.args)))
    llmod = parse_and_verify(str(mod))
    optimize(llmod, 1)
    add_symbol("aligned_alloc", load_module(llmod, fn.name))
    from wiadsl.backends.llvm.loader import symbol_address
    counter = ctypes.c_int64.from_address(symbol_address("wia_test_alloc_count"))
""")

PROGRAM = COUNTING + textwrap.dedent("""
    import wiadsl
    SRC = '''
    kernel model(input x: f32[N, C, H, W], input w: f32[O, C, 3, 3], input u: f32[K2],
                 input b: f32[K2, P2], input w2: f32[F, 64], input qa: i8[M, K],
                 input qb: i8[K, P], output y: f32[N, O, H, W], output z: f32[P2],
                 output q: i32[M, P], output h: f32[128, F]) {
        y = relu(conv2d(x, w, stride=1, padding=1));
        z = u @ b;
        q = cast(qa, i32) @ cast(qb, i32);
        h = reshape(y, [128, 64]) @ transpose(w2);
    }
    '''
    mod = wiadsl.jit(SRC, "model")
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 8, 16, 16), dtype=np.float32)
    w = rng.standard_normal((16, 8, 3, 3), dtype=np.float32)
    u = rng.standard_normal(512, dtype=np.float32)
    bm = rng.standard_normal((512, 600), dtype=np.float32)  # above the gemv split's 2^18
    w2 = rng.standard_normal((96, 64), dtype=np.float32)
    qa = rng.integers(-128, 128, (33, 200), dtype=np.int8)
    qb = rng.integers(-128, 128, (200, 70), dtype=np.int8)
    args = (x, w, u, bm, w2, qa, qb)
    outs = dict(y=np.empty((2, 16, 16, 16), np.float32), z=np.empty(600, np.float32),
                q=np.empty((33, 70), np.int32), h=np.empty((128, 96), np.float32))
    if sys.argv[1] == "no-keys":  # before the first call makes the scratch key: take
        libc = ctypes.CDLL(None)  # every pthread key there is (imports need some: after them)
        key = ctypes.c_uint()
        while libc.pthread_key_create(ctypes.byref(key), None) == 0:
            pass
    wiadsl.set_num_threads(int(sys.argv[2]))
    for _ in range(3):  # first calls: code, pools, this thread's buffers
        mod(*args, **outs)
    before = counter.value
    calls = 30
    for _ in range(calls):
        mod(*args, **outs)
    allocations = counter.value - before

    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    conv = np.zeros((2, 16, 16, 16))
    for i in range(3):
        for j in range(3):
            conv += np.einsum("nchw,oc->nohw", xp[:, :, i:i + 16, j:j + 16], w[:, :, i, j])
    y = np.maximum(conv, 0)
    np.testing.assert_allclose(outs["y"], y, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(outs["z"], u.astype(np.float64) @ bm, rtol=1e-4, atol=1e-3)
    np.testing.assert_array_equal(outs["q"], qa.astype(np.int32) @ qb.astype(np.int32))
    np.testing.assert_allclose(outs["h"], y.reshape(128, 64) @ w2.T.astype(np.float64),
                               rtol=1e-3, atol=1e-3)
    print(allocations, calls)
""")


def run(mode: str, threads: int) -> tuple[int, int]:
    """(native allocations, calls) of the steady-state calls of the model in a child."""
    done = subprocess.run([sys.executable, "-c", PROGRAM, mode, str(threads)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    allocations, calls = done.stdout.split()[-2:]
    return int(allocations), int(calls)


def test_a_steady_state_call_into_output_buffers_allocates_nothing() -> None:
    assert run("keys", 1) == (0, 30)


def test_pool_workers_allocate_once_not_per_call() -> None:
    # A worker's first chunk in the process makes its buffers; the OS decides when a
    # worker first joins a region (it may be after the warm-up calls), so up to one
    # buffer per slot per worker may appear here -- never one per call (8 per call
    # before the scratch buffers).
    allocations, calls = run("keys", 2)
    assert allocations <= SLOTS, (allocations, calls)


def test_without_pthread_keys_the_helpers_allocate_per_call_and_stay_right() -> None:
    allocations, calls = run("no-keys", 2)
    assert allocations >= calls
