"""Row reductions, pools and re-layouts on the vector unit (no host sections).

Each kernel runs on the systolic simulator and on the reference interpreter (NumPy):
values agree within f32 rounding (sums are added in another order), integer results
exactly; ``stats["sections"]`` has no host entry. Small arrays (8x8) make rows span
several column tiles (``vec.rKIND.acc``); a small scratchpad makes several row chunks.
"""

from __future__ import annotations

import functools
import pathlib

import numpy as np
import pytest

import wiadsl
from wiadsl.backends.systolic import parse_listing
from wiadsl.backends.systolic.asm import instruction
from wiadsl.backends.systolic.check import check_section
from wiadsl.backends.systolic.config import ArrayConfig
from wiadsl.backends.systolic.isa import Dram, Remote, SasmError, View
from wiadsl.backends.systolic.kernel import SystolicKernel
from wiadsl.backends.systolic.simulator import run_section
from wiadsl.backends.systolic.views import view_kind
from wiadsl.dtypes import DType
from wiadsl.ir import print_module
from wiadsl.ir.interpreter import Interpreter
from wiadsl.passes import optimize

ROOT = pathlib.Path(__file__).resolve().parents[2]
F32 = {"rtol": 2e-6, "atol": 2e-6}

SRC = """
import nn;
kernel softmax(input x: f32[T, D], output y: f32[T, D]) { y = nn.softmax(x); }
kernel layer_norm(input x: f32[T, D], input g: f32[D], input b: f32[D], output y: f32[T, D]) {
    y = nn.layer_norm(x, g, b);
}
kernel rsum(input x: f32[T, D], output y: f32[T]) { y = reduce_sum(x, axis=1); }
kernel rmax(input x: f32[T, D], output y: f32[T, 1]) { y = reduce_max(x, axis=-1, keepdims=true); }
kernel rmean(input x: f32[T, D], output y: f32[T]) { y = reduce_mean(x, axis=1); }
kernel rmin0(input x: f32[T, D], output y: f32[D]) { y = reduce_min(x, axis=0); }
kernel rsum_all(input x: f32[T, D], output y: f32) { y = reduce_sum(x); }
kernel mean_mid(input x: f32[A, B, C], output y: f32[A, 1, C]) {
    y = reduce_mean(x, axis=1, keepdims=true);
}
kernel imin(input x: i8[T, D], output y: i8[T]) { y = reduce_min(x, axis=1); }
kernel imax(input x: i32[T, D], output y: i32[D]) { y = reduce_max(x, axis=0); }
kernel maxpool(input x: f32[N, C, H, W], output y: f32[N, C, P, Q]) { y = max_pool(x); }
kernel avgpool(input x: f32[N, C, H, W], output y: f32[N, C, P, Q]) { y = avg_pool(x); }
kernel maxpool1(input x: f32[N, C, H, W], output y: f32[N, C, P, Q]) { y = max_pool(x, stride=1); }
kernel avgpool1(input x: f32[N, C, H, W], output y: f32[N, C, P, Q]) { y = avg_pool(x, stride=1); }
kernel softmax16(input x: f16[T, D], output y: f16[T, D]) { y = nn.softmax(x); }
kernel mean_bf16(input x: f32[T, D], output y: f32[T]) {
    y = cast(reduce_mean(cast(x, bf16), axis=1), f32);
}
kernel msq(input x: f32[T, D], output y: f32[T, 1]) {
    y = reduce_mean(x * x, axis=-1, keepdims=true);
}
kernel tsum(input x: f32[A, B], input v: f32[B, 1], output y: f32[A]) {
    y = reduce_sum(exp(transpose(x, [1, 0])) * v, axis=0);
}
kernel bn(input x: f32[N, C, H, W], input m: f32[C], input v: f32[C], input g: f32[C],
          input b: f32[C], output y: f32[N, C, H, W]) { y = nn.batch_norm(x, m, v, g, b); }
kernel relayout(input x: f32[7, 3, 33], output y: f32[33, 21]) {
    y = reshape(transpose(x, [2, 0, 1]), [33, 21]);
}
"""
ODD = [(1, 1), (1, 7), (7, 33), (33, 129), (129, 7)]


@functools.cache
def _module(target: str, options: tuple = ()) -> object:
    # one compile of SRC per target and options: kernels specialize per call shape
    return wiadsl.jit(SRC, target=target, **dict(options))


def _both(kernel: str, *args: np.ndarray, **options: object) -> tuple[object, object, dict]:
    sys_k = getattr(_module("systolic", tuple(sorted({"array": (8, 8), **options}.items()))),
                    kernel)
    out, ref = sys_k(*args), getattr(_module("interp"), kernel)(*args)
    return out, ref, dict(sys_k.stats)


def _check(kernel: str, *args: np.ndarray, exact: bool = False, **options: object) -> dict:
    out, ref, stats = _both(kernel, *args, **options)
    if exact:
        assert np.array_equal(out, ref), kernel
    else:
        np.testing.assert_allclose(out, ref, **F32)
    assert "host" not in stats["sections"] and stats["host_ops"] == [], kernel
    assert stats["sections"]["vector"] >= 1 and stats["vec_cycles"] > 0
    return stats


@pytest.mark.parametrize("shape", ODD)
@pytest.mark.parametrize("kernel", ["softmax", "rsum", "rmax", "rmean", "rmin0", "rsum_all"])
def test_row_reductions_on_odd_shapes(kernel, shape, rng):
    _check(kernel, rng.standard_normal(shape).astype(np.float32))


@pytest.mark.parametrize("shape", ODD)
def test_layer_norm_on_odd_shapes(shape, rng):
    x = rng.standard_normal(shape).astype(np.float32) * 3 + 1
    g, b = (rng.standard_normal(shape[1]).astype(np.float32) for _ in range(2))
    # the centred variance is a sum of squares: relative error grows with D, a few ulps
    out, ref, stats = _both("layer_norm", x, g, b)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    assert "host" not in stats["sections"]


def test_mean_over_a_middle_axis_and_many_row_chunks(rng):
    x = rng.standard_normal((7, 33, 5)).astype(np.float32)
    stats = _check("mean_mid", x)
    # a 2 KiB scratchpad holds a few rows per chunk: the same values, more instructions
    small = _check("mean_mid", x, spad=2048)
    assert small["instructions"] > stats["instructions"]


def test_integer_reductions_are_exact(rng):
    # (integer sums are i64 in the language: the vector unit has no i64, they stay on the host)
    _check("imin", rng.integers(-128, 128, (7, 129), dtype=np.int8), exact=True)
    _check("imax", rng.integers(-2**31, 2**31, (33, 7), dtype=np.int32), exact=True)


@pytest.mark.parametrize("shape", [(1, 1, 2, 2), (1, 7, 33, 9), (2, 3, 7, 129)])
def test_pools_on_odd_shapes(shape, rng):
    x = rng.standard_normal(shape).astype(np.float32)
    _check("maxpool", x, exact=True)
    _check("avgpool", x)
    _check("maxpool1", x, exact=True)  # overlapping 2x2 windows, stride 1
    _check("avgpool1", x)


def test_transpose_and_reshape_are_dma_relayouts(rng):
    x = rng.standard_normal((7, 3, 33)).astype(np.float32)
    stats = _check("relayout", x, exact=True)
    assert stats["sections"] == {"vector": 2}
    # a copy moves each element in and out once: the DMA traffic is 2 x the tensor
    assert stats["dram_bytes"] == 2 * 2 * x.nbytes


@pytest.mark.parametrize("shape", [(1, 1), (7, 33), (33, 129)])
def test_a_reduction_absorbs_the_ops_making_its_operand(shape, rng):
    x = rng.standard_normal(shape).astype(np.float32)
    # x * x is computed tile by tile in front of the row sum: never stored
    assert _check("msq", x)["sections"] == {"vector": 1}
    v = rng.standard_normal((shape[1], 1)).astype(np.float32)
    # the transpose is read through, exp(.) * v is the prologue, the sum runs over axis 0
    stats = _check("tsum", x, v)
    assert stats["sections"] == {"vector": 1}
    # x in once; v is constant along the rows (one [1, w] load per tile); y out
    assert stats["dram_bytes"] == x.nbytes + v.nbytes + shape[0] * 4


@pytest.mark.parametrize("shape", [(1, 1), (7, 33), (33, 129), (129, 7)])
def test_softmax_and_layer_norm_fuse_around_their_reductions(shape, rng):
    x = rng.standard_normal(shape).astype(np.float32)
    # rmax with exp(x - m) behind it (a second pass per row chunk); rsum with e / s
    assert _check("softmax", x)["sections"] == {"vector": 2}
    g, b = (rng.standard_normal(shape[1]).astype(np.float32) for _ in range(2))
    out, ref, stats = _both("layer_norm", x, g, b)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    # mean(x) then x - mu; mean(xc * xc) then xc * rsqrt(var + eps) * g + b
    assert stats["sections"] == {"vector": 2}
    # small memories: several row chunks, each with its own second pass
    small = _both("softmax", x, spad=1024, acc=2048)
    np.testing.assert_allclose(small[0], small[1], **F32)


@pytest.mark.parametrize(("kernel", "want"), [("softmax", {"vector": 2}),
                                             ("layer_norm", {"host": 1, "vector": 1})])
def test_optimized_fused_reduce_runs_on_the_vector_unit(kernel, want, rng):
    # -O2's fuse pass makes softmax two tensor.fused_reduce ops (what `wiac -o x.sasm`
    # lowers); layer_norm's first one yields two epilogue results: host (one output)
    module = optimize(wiadsl.jit(SRC, kernel).ir_for(), level=2)
    assert "tensor.fused_reduce" in print_module(module)
    args = [rng.standard_normal((33, 129)).astype(np.float32)]
    if kernel == "layer_norm":
        args += [rng.standard_normal(129).astype(np.float32) for _ in range(2)]
    compiled = SystolicKernel(module, kernel, ArrayConfig(8, 8, vec_lanes=8))
    out = compiled.run(args)
    ref = Interpreter(module).call(module[kernel], args)
    np.testing.assert_allclose(out[0], ref[0], rtol=1e-5, atol=1e-6)
    assert compiled.stats["sections"] == want


def test_transposes_around_elementwise_ops_are_absorbed(rng):
    x = rng.standard_normal((2, 7, 5, 33)).astype(np.float32)
    m, g, b = (rng.standard_normal(7).astype(np.float32) for _ in range(3))
    v = np.abs(rng.standard_normal(7)).astype(np.float32)
    stats = _check("bn", x, m, v, g, b)
    # var + eps and rsqrt; the NHWC chain reads x and writes y through perm views: the
    # two transposes never run
    assert stats["sections"] == {"vector": 2}
    # x in and y out once (each transpose would add a round trip of 2 * x.nbytes); var,
    # eps and rsqrt(var + eps) in the first section; 4 channel vectors per chunk of the
    # 330 NHWC rows (2 chunks of <= 256)
    assert stats["dram_bytes"] == 2 * x.nbytes + (28 + 4 + 28) + 2 * 4 * 28


@pytest.mark.parametrize("name", ["cnn", "mlp", "layernorm_softmax"])
def test_examples_run_without_host_sections(name, rng):
    path = ROOT / "examples" / f"{name}.wia"
    sys_m = wiadsl.jit_file(path, target="systolic")
    ref_m = wiadsl.jit_file(path, target="interp")
    for kernel in _kernels(path):
        args = _example_args(name, kernel, rng)
        out = getattr(sys_m, kernel)(*args)
        ref = getattr(ref_m, kernel)(*args)
        for o, r in zip(out if isinstance(out, tuple) else (out,),
                        ref if isinstance(ref, tuple) else (ref,)):
            np.testing.assert_allclose(o, r, rtol=1e-5, atol=1e-6)
        stats = getattr(sys_m, kernel).stats
        assert "host" not in stats["sections"] and stats["host_ops"] == [], kernel


def _kernels(path: pathlib.Path) -> list[str]:
    return [line.split()[1].split("(")[0] for line in path.read_text().splitlines()
            if line.startswith("kernel ")]


def _example_args(name: str, kernel: str, rng: np.random.Generator) -> list[np.ndarray]:
    def f(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32)

    if name == "mlp":
        return [f(5, 12), f(12, 32), f(32), f(32, 7), f(7)]
    if name == "layernorm_softmax":
        return [f(7, 33), f(33), f(33)]
    bn = [f(8), np.abs(f(8)) + 0.5, f(8), f(8)]
    bn2 = [f(16), np.abs(f(16)) + 0.5, f(16), f(16)]
    return [f(1, 3, 16, 16), f(8, 3, 3, 3), *bn, f(16, 8, 3, 3), *bn2, f(1024, 10) * 0.05]


def test_half_precision_rows_round_once(rng):
    x = rng.standard_normal((7, 129)).astype(np.float32)
    out, ref, stats = _both("softmax16", x.astype(np.float16))
    np.testing.assert_allclose(out.astype(np.float32), ref.astype(np.float32), rtol=2e-3, atol=1e-4)
    out, ref, stats = _both("mean_bf16", x)
    # the f32 sum is divided, then rounded to bf16 once: within one bf16 ulp of NumPy's
    np.testing.assert_allclose(out, ref, rtol=8e-3, atol=1e-3)
    assert "host" not in stats["sections"]


def test_empty_reductions_run_on_the_host():
    out, ref, stats = _both("rsum", np.zeros((3, 0), np.float32))
    assert np.array_equal(out, ref) and out.shape == (3,)
    assert stats["host_ops"] == ["tensor.reduce_sum"]


@pytest.mark.parametrize("shape", [(7,), (3, 1, 5), (2, 3, 4, 5)])
def test_perm_views_read_and_write_like_numpy(shape, rng):
    base = rng.standard_normal(shape).astype(np.float32)
    perm = tuple(int(a) for a in rng.permutation(len(shape)))
    moved = tuple(shape[a] for a in perm)
    matrix = (1, int(np.prod(moved[:-1])), moved[-1])
    view = View("x.p", "perm", "x", (("split", shape), ("axes", perm), ("target", moved),
                                     ("shape", matrix)))
    kind = view_kind(view)
    kind.check(view, Dram("x", DType.F32, shape, "in"))
    want = base.transpose(perm).reshape(matrix)
    written = np.zeros_like(base)
    for r0 in range(0, matrix[1], 2):  # odd tiles: 2 rows x 3 columns
        for c0 in range(0, matrix[2], 3):
            r = Remote("x.p", 0, (r0, min(r0 + 2, matrix[1])), (c0, min(c0 + 3, matrix[2])))
            tile = kind.read(view, base, r, {})
            np.testing.assert_array_equal(tile, want[0, r.rows[0]:r.rows[1], r.cols[0]:r.cols[1]])
            kind.write(view, written, r, tile)
            assert kind.nbytes(view, Dram("x", DType.F32, shape, "in"), r) == tile.nbytes
    np.testing.assert_array_equal(written, base)


def test_window_view_is_the_pool_windows(rng):
    base = rng.standard_normal((2, 3, 7, 9)).astype(np.float32)
    view = View("x.w", "window", "x", (("kernel", (3, 2)), ("stride", (2, 3)),
                                       ("shape", (1, 2 * 3 * 3 * 3, 6))))
    kind = view_kind(view)
    kind.check(view, Dram("x", DType.F32, base.shape, "in"))
    rows = kind.read(view, base, Remote("x.w", 0, (0, 54), (0, 6)), {})
    windows = np.lib.stride_tricks.sliding_window_view(base, (3, 2), axis=(2, 3))[:, :, ::2, ::3]
    np.testing.assert_array_equal(rows, windows.reshape(54, 6))


# ----------------------------------------------------------------- the instructions

LISTING = """\
; wiadsl systolic assembly
.target rows=4 cols=4 dataflow=ws timing=overlap spad=8388608 acc=4194304 dma_bw=256 dma_latency=64 vec_lanes=4

.section s0 vector "row sums"
.dram x f32 [3, 6] in
.dram y f32 [3] out
.view x.p = perm x split=[3, 6] axes=[0, 1] target=[3, 6] shape=[1, 3, 6]
.view y.o = mat y target=[3] shape=[1, 3, 1]
.spad a0 f32 [3, 4]
.acc c0 [3, 1]
  mvin a0[0:3, 0:4], x.p[0, 0:3, 0:4]
  vec.rsum c0[0:3, 0:1]:f32, a0[0:3, 0:4]
  mvin a0[0:3, 0:2], x.p[0, 0:3, 4:6]
  vec.rsum.acc c0[0:3, 0:1]:f32, a0[0:3, 0:2]
  mvout y.o[0, 0:3, 0:1], c0[0:3, 0:1]:f32
.end
"""


def test_row_reduction_text_round_trips_and_simulates():
    listing = parse_listing(LISTING)
    assert listing.text() == LISTING
    section = listing.sections[0]
    x = np.arange(18, dtype=np.float32).reshape(3, 6)
    out, stats = run_section(section, listing.config, {"x": x})
    np.testing.assert_array_equal(out["y"], x.sum(axis=1))
    # 12 then 6 elements at 4 lanes; the 4-lane tree adds 2 cycles, the 2-wide one 1
    assert stats.vec_cycles == 3 + 2
    dma = [1, 1, 1]  # 48, 24 and 12 bytes at 256 B/cycle
    # mvin (1 + 64 latency) -> rsum (3 busy + 2 tree); the second mvin waits until
    # rsum has read a0 (WAR, 3 busy), then rsum.acc (2 + 1), mvout (1 + 64)
    assert stats.cycles == (dma[0] + 64) + 3 + (dma[1] + 64) + 2 + 1 + (dma[2] + 64)
    for kind in ("max", "min", "sum"):
        for suffix in ("", ".acc"):
            text = f"vec.r{kind}{suffix} c0[0:3, 0:1]:f32, a0[0:3, 0:4]"
            assert instruction(text).text().strip() == text


@pytest.mark.parametrize(("line", "message"), [
    ("vec.rsum c0[0:2, 0:1]:f32, a0[0:3, 0:4]", "must be one column of 3 rows"),
    ("vec.rmax c0[0:3, 0:1]:i32, a0[0:3, 0:4]", "f32 rows reduce to f32, not i32"),
    ("vec.rsum c0[0:3, 0:1], a0[0:3, 0:4]", "need a :dtype"),
    ("vec.rsum a0[0:3, 0:1]:f32, a0[0:3, 0:4]", "must be in the acc"),
])
def test_checker_rejects_bad_row_reductions(line, message):
    text = LISTING.replace("  vec.rsum c0[0:3, 0:1]:f32, a0[0:3, 0:4]", "  " + line)
    section = parse_listing(text).sections[0]
    with pytest.raises(SasmError, match=message):
        check_section(section, ArrayConfig(4, 4, vec_lanes=4))


def test_bad_views_are_sasm_errors():
    bad_perm = LISTING.replace("axes=[0, 1]", "axes=[0, 0]")
    with pytest.raises(SasmError, match="axes"):
        check_section(parse_listing(bad_perm).sections[0], ArrayConfig(4, 4, vec_lanes=4))
    window = LISTING.replace("perm x split=[3, 6] axes=[0, 1] target=[3, 6] shape=[1, 3, 6]",
                             "window x kernel=[2, 2] stride=[2, 2] shape=[1, 3, 6]")
    with pytest.raises(SasmError, match=r"shape should be \[1, 3, 4\]"):
        check_section(parse_listing(window).sections[0], ArrayConfig(4, 4, vec_lanes=4))


_REDUCED_VALUE_USERS = """
kernel cast_of_min(input x: f16[19, 55], output y: bf16[1, 1]) {
    y = cast(reduce_min(x, keepdims=true), bf16);
}
kernel mean_minus(input x: i8[5], output y: bf16[1]) {
    y = reduce_mean(cast(x, bf16), keepdims=true) - 5;
}
kernel relu_of_sum(input x: f32[5, 3], output y: f32[1, 1]) {
    y = relu(reduce_sum(x, keepdims=true) - 1.0);
}
"""


@pytest.mark.parametrize(("kernel", "args"), [
    ("cast_of_min", [np.linspace(-3, 3, 19 * 55, dtype=np.float16).reshape(19, 55)]),
    ("mean_minus", [np.array([1, -7, 3, 9, 4], np.int8)]),
    ("relu_of_sum", [np.linspace(-1, 2, 15, dtype=np.float32).reshape(5, 3)]),
])
def test_a_group_using_the_reduced_value_is_not_fused_into_the_row_pass(kernel, args):
    """Fuzz seeds 23000000000197/257/...: a vector group working on a keepdims reduction's
    *reduced* values (shape [1, 1]) was fused into the pass over the source rows and
    produced the source's shape ('tensor.cast' produced float32[19, 55])."""
    got = getattr(wiadsl.jit(_REDUCED_VALUE_USERS, target="systolic"), kernel)(*args)
    want = getattr(wiadsl.jit(_REDUCED_VALUE_USERS, target="interp"), kernel)(*args)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=1e-2)


DYNAMIC_EPILOGUE = """
kernel f(input a: i32[N], input b: f16[M], output y: i32[N]) {
    y = a + cast(reduce_min(b, keepdims=true), i32);
}
"""


@pytest.mark.parametrize(("n", "m"), [(1, 2), (1, 1), (3, 3), (2, 7)])
def test_an_epilogue_narrower_than_the_reduction_runs_apart(n, m):
    """Fuzz seed 14900000000265: with dynamic dims the plan fused ``a + reduced`` into
    the pass over ``b``'s rows (both ``?`` at plan time); at N = 1, M = 2 the result
    had M elements. Only an epilogue whose result has ``b``'s shape rides on the pass."""
    a = np.arange(1, n + 1, dtype=np.int32)
    b = np.linspace(-4, 4, m).astype(np.float16)
    got = wiadsl.jit(DYNAMIC_EPILOGUE, "f", target="systolic")(a, b)
    want = wiadsl.jit(DYNAMIC_EPILOGUE, "f", target="interp")(a, b)
    assert got.shape == want.shape == (n,)
    np.testing.assert_array_equal(got, want)


EMPTY_RELAYOUTS = """
kernel max_t(input x: i8[N, M], output y: i8[M, N]) { y = max(transpose(x), 1); }
kernel sum_exp_t(input x: f32[N, M], output y: f32[M]) { y = reduce_sum(exp(transpose(x)) * 2.0, axis=-1); }
kernel add_t(input x: f32[N, M], output y: f32[M, N]) { y = transpose(x) + 1.0; }
"""


@pytest.mark.parametrize("shape", [(0, 1), (0, 3), (3, 0), (4, 3)])
@pytest.mark.parametrize("kernel", ["max_t", "sum_exp_t", "add_t"])
def test_groups_reading_through_a_transpose_run_empty_tensors_on_the_host(kernel, shape):
    """A group that reads an operand through an absorbed transpose (the transpose
    never runs) and then gets an empty tensor runs on the host: the transpose with
    it, also when it came in with a reduction's prologue (fuzz seed 5600000001443:
    'tensor.max' reads a value that was not computed)."""
    dtype = np.int8 if kernel == "max_t" else np.float32
    x = np.arange(np.prod(shape)).reshape(shape).astype(dtype)
    want = getattr(wiadsl.jit(EMPTY_RELAYOUTS, target="interp"), kernel)(x)
    got = getattr(wiadsl.jit(EMPTY_RELAYOUTS, target="systolic"), kernel)(x)
    assert np.shape(got) == np.shape(want)
    np.testing.assert_allclose(got, want, **F32)
