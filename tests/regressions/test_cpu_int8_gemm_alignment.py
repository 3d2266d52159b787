"""Issue 17: ``y = cast(a, i32) @ cast(b, i32)`` with ``a: i8[1, 4]``, ``b: i8[4, 19]``
killed the process at -O2/-O3 (N = 19, 23, 27, 30, 31 with K >= 4; also with a
transposed B, a relu epilogue, the quantized MLP).

Cause: ``QGemmBuilder.pack_b`` loaded ``<16 x i8>`` rows of B without an alignment,
so LLVM took the vector's own (16 bytes) and emitted an aligned load; a row of B
starts at ``B + k*ldb``. Fixed there, and every vector load/store of the CPU backend
now goes through ``runtime.vector_load``/``vector_store``, which take the alignment
as a required argument (the element size unless the address is provably aligned
further). The gemm/conv panels also claimed the panel row's alignment for vectors
that start W lanes into the row; they now claim what that offset allows.

The kernels run in child processes (a segfault fails the test, it does not kill
pytest) and are compared with NumPy exactly. The audit test checks the LLVM IR of
every helper and of several kernels: no vector load or store without an alignment.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ISSUE_NS = (19, 23, 27, 30, 31)
KS = (1, 4, 7, 33)


def run_isolated(code: str, timeout: float = 900.0) -> str:
    """Run ``code`` in a fresh Python (this source tree first on the path); its stdout.
    A child that dies of a signal or hangs fails the test with the last case it began."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    try:
        done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, cwd=str(ROOT),
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        pytest.fail(f"the child hung for {timeout:.0f} s; last lines:\n{out[-2000:]}")
    if done.returncode < 0:
        started = [ln for ln in done.stdout.splitlines() if ln.startswith("case ")]
        pytest.fail(f"the child died of signal {-done.returncode} in "
                    f"{started[-1] if started else 'its setup'}\n{done.stderr[-3000:]}")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    return done.stdout


# ---------------------------------------------------------------- the driver itself

DRIVER = """
import ctypes
import numpy as np
from llvmlite import ir
from wiadsl.backends.llvm.library import ensure_loaded
from wiadsl.backends.llvm.qgemm import ARGS, qgemm_builder
from wiadsl.backends.llvm.target import host, load_module, optimize, parse_and_verify

LEVEL = {level}
mod = ir.Module(name="qgemm_probe")
mod.triple = host().triple
fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), ARGS), "wia_probe_qgemm_o{level}")
b = ir.IRBuilder(fn.append_basic_block("entry"))
libraries = []  # the helpers it calls (its packing buffers: scratch.py)
b.call(qgemm_builder(mod, {features!r}, libraries).driver(), list(fn.args))
b.ret_void()
llmod = parse_and_verify(str(mod))
optimize(llmod, LEVEL)
ensure_loaded(libraries)
address = load_module(llmod, fn.name)
qgemm = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * 3), *([ctypes.c_int64] * 6))(address)

def at(buf, offset):
    return buf.ctypes.data + offset

rng = np.random.default_rng(17)
cases = 0
for m in (1, 2, 5, 70):
    for n in range(1, 68):
        for k in (1, 2, 3, 4, 7, 8, 33, 66):
            if m == 70 and (n % 11 or k < 33):  # large: the 4-row kernel and the thread split
                continue
            for lda_pad, ldb_pad, ldc_pad in ((0, 0, 0), (3, 5, 1)):
                lda, ldb, ldc = k + lda_pad, n + ldb_pad, n + ldc_pad
                print(f"case m={{m}} n={{n}} k={{k}} ld=({{lda}}, {{ldb}}, {{ldc}})", flush=True)
                # base pointers one byte (A, B) and one element (C) past 64-byte alignment
                abuf = np.zeros(m * lda + 128, np.int8)
                bbuf = np.zeros(k * ldb + 128, np.int8)
                cbuf = np.full(m * ldc + 64, -7, np.int32)
                a0 = (64 - abuf.ctypes.data % 64) % 64 + 1
                b0 = (64 - bbuf.ctypes.data % 64) % 64 + 1
                c0 = ((64 - cbuf.ctypes.data % 64) % 64) // 4 + 1  # in elements
                A = np.lib.stride_tricks.as_strided(abuf[a0:], (m, k), (lda, 1))
                B = np.lib.stride_tricks.as_strided(bbuf[b0:], (k, n), (ldb, 1))
                A[...] = rng.integers(-128, 128, (m, k), dtype=np.int8)
                B[...] = rng.integers(-128, 128, (k, n), dtype=np.int8)
                A[:, :1] = -128
                B[:1, :] = -128
                qgemm(at(abuf, a0), at(bbuf, b0), at(cbuf, 4 * c0), m, n, k, lda, ldb, ldc)
                C = np.lib.stride_tricks.as_strided(cbuf[c0:], (m, n), (4 * ldc, 4))
                want = A.astype(np.int32) @ B.astype(np.int32)
                assert (C == want).all(), (m, n, k, lda, ldb, ldc)
                outside = np.ones(cbuf.shape, bool)
                for i in range(m):
                    outside[c0 + i * ldc:c0 + i * ldc + n] = False
                assert (cbuf[outside] == -7).all(), ("wrote outside C", m, n, k)
                cases += 1
print("done", cases)
"""


def _variants() -> dict[str, str]:
    """The int8 GEMMs this host can run, by the LLVM features that select each:
    ``pmaddwd`` pairs everywhere (AVX2), ``vpdpbusd`` where the host has VNNI."""
    from wiadsl.backends.llvm.qgemm_vnni import vnni_bits
    from wiadsl.backends.llvm.target import host
    width = vnni_bits(host().features)
    variants = {"pmaddwd": "+avx2"}
    if width >= 256:
        variants["vnni256"] = "+avx512vnni,+avx512vl"
    if width == 512:
        variants["vnni512"] = "+avx512vnni,+avx512bw"
    return variants


VARIANTS = _variants()


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("level", [2, 3])
def test_qgemm_driver_on_unaligned_rows(level: int, variant: str) -> None:
    """The int8 GEMM on every N in 1..67 and K in 1, 2, 3, 4, 7, 8, 33, 66, with rows
    that start anywhere (A and B one byte past 64-byte alignment, leading dimensions
    past the extents), exact, writing nothing outside C; each kernel variant the host
    can run (so a VNNI host checks the pmaddwd code too). One compile per case."""
    out = run_isolated(DRIVER.format(level=level, features=VARIANTS[variant]))
    assert out.strip().splitlines()[-1].startswith("done ")


# ---------------------------------------------------------------- kernels through wiadsl.jit

KERNELS = {
    "plain": ("kernel q(input a: i8[M, K], input b: i8[K, N], output y: i32[M, N]) "
              "{ y = cast(a, i32) @ cast(b, i32); }", False),
    # the transpose is materialized, then multiplied as i8 (loop.qgemm)
    "transposed": ("kernel q(input a: i8[M, K], input b: i8[N, K], output y: i32[M, N]) "
                   "{ y = cast(a, i32) @ cast(transpose(b), i32); }", True),
    "transposed_i32": ("kernel q(input a: i8[M, K], input b: i8[N, K], output y: i32[M, N]) "
                       "{ y = cast(a, i32) @ transpose(cast(b, i32)); }", True),
    "relu": ("kernel q(input a: i8[M, K], input b: i8[K, N], output y: i32[M, N]) "
             "{ y = max(cast(a, i32) @ cast(b, i32), 0); }", False),
}

JIT = """
import numpy as np
import wiadsl

src, transposed, level = {src!r}, {transposed!r}, {level!r}
relu = "max(" in src
k = wiadsl.jit(src, kernel="q", target="cpu", opt_level=level)
rng = np.random.default_rng(5)
for m, n, kk in {shapes!r}:
    print(f"case m={{m}} n={{n}} k={{kk}} -O{{level}}", flush=True)
    a = rng.integers(-128, 128, (m, kk), dtype=np.int8)
    b = rng.integers(-128, 128, (n, kk) if transposed else (kk, n), dtype=np.int8)
    bb = b.T if transposed else b
    want = a.astype(np.int32) @ bb.astype(np.int32)
    if relu:
        want = np.maximum(want, 0)
    got = k(a, b)
    assert got.dtype == np.int32 and (got == want).all(), (m, n, kk)
print("done")
"""


def _shapes(wide: bool) -> list[tuple[int, int, int]]:
    """(M, N, K): the issue's N with every K; with ``wide`` also every odd N of 1..67
    at K = 4 and a few M."""
    shapes = [(1, n, k) for n in ISSUE_NS for k in KS]
    if wide:
        shapes += [(1, n, 4) for n in range(1, 68, 2) if n not in ISSUE_NS]
        shapes += [(3, 19, 7), (5, 30, 33), (9, 67, 4)]
    return shapes


@pytest.mark.parametrize("level", [2, 3])
def test_plain_kernel_every_odd_n(level: int) -> None:
    src, transposed = KERNELS["plain"]
    out = run_isolated(JIT.format(src=src, transposed=transposed, level=level,
                                  shapes=_shapes(wide=level == 3)))
    assert out.strip().endswith("done")


@pytest.mark.parametrize("kind", ["transposed", "transposed_i32", "relu"])
def test_transposed_b_and_relu_epilogue(kind: str) -> None:
    src, transposed = KERNELS[kind]
    out = run_isolated(JIT.format(src=src, transposed=transposed, level=3, shapes=_shapes(wide=False)))
    assert out.strip().endswith("done")


MLP = """
import numpy as np
import wiadsl
from tests.quant.test_quantize_int8 import MLP, data, ranges, reference
from wiadsl.quant import quantize

for B, IN, H, OUT in {shapes!r}:
    print(f"case B={{B}} I={{IN}} H={{H}} O={{OUT}}", flush=True)
    samples = data(seed=H, B=B, IN=IN, H=H, OUT=OUT, n=2)
    qk = quantize(wiadsl.jit(MLP, kernel="mlp", target="cpu"), samples)
    rngs = ranges(samples)
    for s in samples:
        want, _ = reference(s, rngs)
        got = qk(*s)
        assert (got == want).all(), (B, IN, H, OUT, np.abs(got - want).max())
print("done")
"""


def test_quantized_mlp_with_odd_widths() -> None:
    """The quantized MLP (tests/quant) with one row and the issue's widths: bit-exact
    against the NumPy integer reference."""
    shapes = [(1, 4, 19, 19), (1, 7, 23, 23), (1, 33, 27, 27), (1, 4, 30, 30), (1, 7, 31, 31),
              (2, 4, 19, 31)]
    out = run_isolated(MLP.format(shapes=shapes))
    assert out.strip().endswith("done")


# ---------------------------------------------------------------- float gemm/conv on unaligned views

FLOATS = """
import numpy as np
import wiadsl

mod = wiadsl.jit('''
kernel mm(input a: f32[M, K], input b: f32[K, N], output c: f32[M, N]) { c = a @ b; }
kernel mm64(input a: f64[M, K], input b: f64[K, N], output c: f64[M, N]) { c = a @ b; }
kernel cv(input x: f32[N, C, H, W], input w: f32[O, C, KH, KW], output y: f32[N, O, P, Q]) {
    y = conv2d(x, w, stride=1, padding=1);
}
kernel ew(input x: f32[N], output y: f32[N]) { y = exp(x) * 2.0 + x; }
''', target="cpu")

def shifted(shape, dtype, rng):
    # element-aligned, but one element past 64-byte alignment
    n = int(np.prod(shape))
    size = np.dtype(dtype).itemsize
    raw = np.empty(n + 64, dtype)
    skip = ((64 - raw.ctypes.data % 64) % 64) // size + 1
    out = raw[skip:skip + n].reshape(shape)
    out[...] = rng.standard_normal(shape)
    assert out.ctypes.data % 16 and out.flags.c_contiguous and out.flags.aligned
    return out

rng = np.random.default_rng(1)
for m, k, n in ((1, 4, 19), (3, 7, 23), (13, 33, 31), (40, 17, 67)):
    for name, dt, tol in (("mm", np.float32, 1e-4), ("mm64", np.float64, 1e-10)):
        print(f"case {name} m={m} k={k} n={n}", flush=True)
        a, b = shifted((m, k), dt, rng), shifted((k, n), dt, rng)
        y = shifted((m, n), dt, rng)
        got = getattr(mod, name)(a, b, c=y)
        np.testing.assert_allclose(got, a @ b, rtol=tol, atol=tol)
for c, h, w in ((3, 7, 9), (5, 11, 13)):
    print(f"case conv c={c} h={h} w={w}", flush=True)
    x, wt = shifted((1, c, h, w), np.float32, rng), shifted((6, c, 3, 3), np.float32, rng)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))
    np.testing.assert_allclose(mod.cv(x, wt), np.einsum("nchwij,ocij->nohw", win, wt), rtol=1e-4, atol=1e-4)
for n in (5, 19, 1023):
    print(f"case ew n={n}", flush=True)
    x = shifted((n,), np.float32, rng)
    np.testing.assert_allclose(mod.ew(x), np.exp(x) * 2 + x, rtol=1e-5, atol=1e-5)
print("done")
"""


def test_float_gemm_conv_and_vector_code_on_unaligned_arrays() -> None:
    """Inputs and output buffers one element past 64-byte alignment (what NumPy calls
    aligned, and views give): the f32/f64 gemm, conv2d and vectorized elementwise code."""
    out = run_isolated(FLOATS)
    assert out.strip().endswith("done")


# ---------------------------------------------------------------- the audit

_VECTOR_ACCESS = re.compile(r"^(?:%\S+ = )?(?:load <|store <)")


def vector_accesses(llvm_ir: str) -> list[tuple[str, int | None]]:
    """(line, alignment or None) of every plain vector load and store in ``llvm_ir``."""
    found = []
    for line in llvm_ir.splitlines():
        line = line.strip()
        if _VECTOR_ACCESS.match(line):
            align = re.search(r", align (\d+)\s*(?:,|$)", line)
            found.append((line, int(align.group(1)) if align else None))
    return found


def test_the_audit_sees_a_missing_alignment() -> None:
    text = ("%a = load <16 x i8>, ptr %p\n  %b = load <16 x i8>, ptr %p, align 1\n"
            "  store <8 x float> %v, ptr %q\n  store <8 x float> %v, ptr %q, align 4\n"
            "  store <2 x float> <float 1.0, float 2.0>, ptr %q\n"
            "  %c = load float, ptr %p\n  store i32 0, ptr %q\n")
    assert [a for _, a in vector_accesses(text)] == [None, 1, None, 4, None]


def _helper_ir() -> dict[str, str]:
    from wiadsl.backends.llvm.gemm import GemmConfig
    from wiadsl.backends.llvm.library import QGEMM_KINDS
    from wiadsl.backends.llvm.library_ir import library_ir
    from wiadsl.backends.llvm.qgemm import QGEMM_VARIANTS
    from wiadsl.backends.llvm.target import host
    bits = host().vector_bits
    configs = [GemmConfig(vector_bits=b, nv=nv, mr=4) for b in (128, 256, 512) if b <= bits for nv in (1, 2, 3)]
    out = {}
    for cfg in configs:
        for dtype in ("f32", "f64"):
            for kind in ("gemm", "ukernels"):
                out[f"{kind} {dtype} {cfg.label()}"] = library_ir({"kind": kind, "dtype": dtype,
                                                                  "config": cfg.as_dict()})
            for stride in ((1, 1), (2, 2), (3, 1)):
                out[f"conv {dtype} {cfg.label()} {stride}"] = library_ir(
                    {"kind": "conv", "dtype": dtype, "config": cfg.as_dict(), "stride": list(stride)})
    for variant in QGEMM_VARIANTS:  # the int8 GEMM helpers of every host kind
        for kind in QGEMM_KINDS:
            out[f"{kind} {variant}"] = library_ir({"kind": kind, "variant": variant})
    return out


def _kernel_ir() -> dict[str, str]:
    import wiadsl
    from wiadsl.backends.llvm.compile import lower_kernel
    from wiadsl.passes import optimize
    cases = {
        "qgemm": (KERNELS["plain"][0], "q", [(1, 4), (4, 19)]),
        "qgemm relu": (KERNELS["relu"][0], "q", [(3, 7), (7, 23)]),
        "elementwise": ("kernel e(input x: f32[N], input m: bool[N], output y: f32[N], output z: bool[N]) "
                        "{ y = where(m, exp(x), x * 2.0); z = !m; }", "e", [(37,), (37,)]),
        "reduce": ("kernel r(input x: f32[M, N], output y: f32[M]) { y = reduce_sum(x * x, axis=1); }",
                   "r", [(5, 37)]),
        "f16": ("kernel h(input x: f16[N], output y: f16[N]) { y = x * x + 1.0; }", "h", [(37,)]),
    }
    out = {}
    for name, (src, kernel, shapes) in cases.items():
        module = optimize(wiadsl.jit(src, kernel=kernel).ir_for(), 3)
        for pipeline in ("", "vectorize{width=8}"):
            out[f"{name} {pipeline}"] = lower_kernel(module, kernel, shapes, pipeline).llvm_ir
    return out


def test_every_vector_access_states_its_alignment() -> None:
    """No vector load or store in the emitted LLVM IR (helpers for several gemm
    configs and conv strides, the int8 GEMM helpers, int8 GEMM kernels, vectorized elementwise, reductions,
    f16) leaves its alignment to LLVM's default (the whole vector)."""
    seen = 0
    for name, text in {**_helper_ir(), **_kernel_ir()}.items():
        accesses = vector_accesses(text)
        seen += len(accesses)
        missing = [line for line, align in accesses if align is None]
        assert not missing, f"{name}: vector accesses without an alignment:\n" + "\n".join(missing[:5])
    assert seen > 100  # the audit looked at something


def test_int8_rows_of_b_are_loaded_byte_aligned() -> None:
    """The loads of issue 17 itself: rows of B (``<16 x i8>`` for pmaddwd pairs, ``<16 x
    i8>`` or ``<32 x i8>`` for VNNI quads, as the host selects), alignment 1: in the
    int8 GEMM helper the host's kernels call."""
    from wiadsl.backends.llvm.library_ir import library_ir
    from wiadsl.backends.llvm.qgemm import qgemm_variant
    text = library_ir({"kind": "qgemm", "variant": qgemm_variant()})
    rows = [align for line, align in vector_accesses(text) if re.search(r"load <(16|32) x i8>", line)]
    assert rows and set(rows) == {1}


def test_vector_helpers_refuse_a_missing_or_bad_alignment() -> None:
    from llvmlite import ir

    from wiadsl.backends.llvm.runtime import offset_align, vector_load, vector_store
    mod = ir.Module()
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [ir.PointerType()]), "f")
    b = ir.IRBuilder(fn.append_basic_block())
    vt = ir.VectorType(ir.FloatType(), 8)
    for bad in (0, 3, None, 4.0):
        with pytest.raises(ValueError, match="alignment"):
            vector_load(b, fn.args[0], vt, bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="alignment"):
            vector_store(b, ir.Constant(vt, None), fn.args[0], bad)  # type: ignore[arg-type]
    v = vector_load(b, fn.args[0], vt, 4)
    vector_store(b, v, fn.args[0], 4)
    assert "align 4" in str(mod)
    assert offset_align(64, 0) == 64 and offset_align(64, 32) == 32 and offset_align(64, 96) == 32
    assert offset_align(32, 4) == 4
