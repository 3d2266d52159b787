"""A convolution's per-channel affine map, residual and clamp applied by the micro-kernels
as they store each tile (loops/epilogue.py's ``channel_clamp``, ``loop.conv2d``'s ``affine`` and
``clamp``, backends/llvm/gemm.py's ``tile_epilogue``): the lowering puts the epilogue
into the op, and the compiled kernel matches NumPy on every path of conv.py (packed
patches, 1x1 panels read in place or copied, direct tiles, several K blocks, channel
blocks, ragged last panels, stride 2), with the bounds' NumPy semantics: a NaN stays
NaN, and an output equal to a zero bound takes the bound's sign."""

from __future__ import annotations

import numpy as np
import pytest

from wiadsl.backends.llvm.backend import CpuKernel
from wiadsl.backends.llvm.compile import lower_kernel
from wiadsl.ir import parse_module, print_module
from wiadsl.ir.interpreter import run_func

TENSOR = """
func @f(%x: tensor<{n}x{c}x{h}x{h}xf32>, %w: tensor<{o}x{c}x{k}x{k}xf32>, %s: tensor<{o}x1x1xf32>, %t: tensor<{o}x1x1xf32>, %r: tensor<{n}x{o}x{ho}x{ho}xf32>) -> tensor<{n}x{o}x{ho}x{ho}xf32> attributes {{kernel, outputs = ["y"]}} {{
^entry:
  %y = tensor.fused_conv2d %x, %w, %s, %t, %r {{stride = [{stride}, {stride}], padding = [{pad}, {pad}]}} : (tensor<{n}x{c}x{h}x{h}xf32>, tensor<{o}x{c}x{k}x{k}xf32>, tensor<{o}x1x1xf32>, tensor<{o}x1x1xf32>, tensor<{n}x{o}x{ho}x{ho}xf32>) -> tensor<{n}x{o}x{ho}x{ho}xf32> {{
  ^bb0(%v: f32, %a: f32, %b: f32, %c: f32):
{body}
  }}
  return %y : tensor<{n}x{o}x{ho}x{ho}xf32>
}}
"""

#: epilogue bodies: (IR, NumPy reference of (v, s, t, r))
BODIES = {
    "bn_relu6": ("""    %0 = arith.mul %v, %a : f32
    %1 = arith.add %0, %b : f32
    %lo = arith.constant 0.0 : f32
    %2 = arith.max %1, %lo : f32
    %hi = arith.constant 6.0 : f32
    %3 = arith.min %2, %hi : f32
    yield %3 : f32""", lambda v, s, t, r: np.minimum(np.maximum(v * s + t, np.float32(0)), np.float32(6))),
    "bn_residual_relu": ("""    %0 = arith.mul %v, %a : f32
    %1 = arith.add %0, %b : f32
    %2 = arith.add %c, %1 : f32
    %lo = arith.constant 0.0 : f32
    %3 = arith.max %2, %lo : f32
    yield %3 : f32""", lambda v, s, t, r: np.maximum(v * s + t + r, np.float32(0))),
    "residual": ("""    %0 = arith.add %v, %c : f32
    yield %0 : f32""", lambda v, s, t, r: v + r),
    "bias_relu": ("""    %0 = arith.add %v, %b : f32
    %lo = arith.constant 0.0 : f32
    %1 = arith.max %0, %lo : f32
    yield %1 : f32""", lambda v, s, t, r: np.maximum(v + t, np.float32(0))),
    "scale": ("""    %0 = arith.mul %a, %v : f32
    yield %0 : f32""", lambda v, s, t, r: v * s),
    "clip": ("""    %lo = arith.constant -1.5 : f32
    %0 = arith.max %v, %lo : f32
    %hi = arith.constant 0.0 : f32
    %1 = arith.min %0, %hi : f32
    yield %1 : f32""", lambda v, s, t, r: np.minimum(np.maximum(v, np.float32(-1.5)), np.float32(0))),
    "minus_zero": ("""    %0 = arith.mul %v, %a : f32
    %1 = arith.add %0, %b : f32
    %lo = arith.constant -0.0 : f32
    %2 = arith.max %1, %lo : f32
    yield %2 : f32""", lambda v, s, t, r: np.maximum(v * s + t, np.float32(-0.0))),
}

rng = np.random.default_rng(29)


def geometry(h: int, k: int, stride: int) -> tuple[int, int]:
    """(padding, output extent) of a k x k window at ``stride`` with "same"-style padding."""
    pad = k // 2
    return pad, (h + 2 * pad - k) // stride + 1


def tensor_module(body: str, n: int, c: int, o: int, h: int, k: int, stride: int):  # type: ignore[no-untyped-def]
    pad, ho = geometry(h, k, stride)
    text = TENSOR.format(n=n, c=c, o=o, h=h, k=k, ho=ho, stride=stride, pad=pad, body=BODIES[body][0])
    return parse_module(text), pad


def conv_ref(x: np.ndarray, w: np.ndarray, stride: int, pad: int) -> np.ndarray:
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    win = np.lib.stride_tricks.sliding_window_view(xp, w.shape[2:], axis=(2, 3))[:, :, ::stride, ::stride]
    return np.einsum("nchwij,ocij->nohw", win, w.astype(np.float64)).astype(np.float32)


def inputs(n: int, c: int, o: int, h: int, k: int, stride: int) -> list[np.ndarray]:
    ho = geometry(h, k, stride)[1]
    return [rng.standard_normal((n, c, h, h)).astype(np.float32),
            (rng.standard_normal((o, c, k, k)) / np.sqrt(c * k * k)).astype(np.float32),
            rng.uniform(0.5, 2.0, (o, 1, 1)).astype(np.float32),
            rng.standard_normal((o, 1, 1)).astype(np.float32),
            rng.standard_normal((n, o, ho, ho)).astype(np.float32)]


def check(body: str, n: int, c: int, o: int, h: int, k: int, stride: int) -> None:
    module, pad = tensor_module(body, n, c, o, h, k, stride)
    args = inputs(n, c, o, h, k, stride)
    got = CpuKernel(module, "f", passes=False).run(args)[0]
    want = BODIES[body][1](conv_ref(args[0], args[1], stride, pad), *args[2:])
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize("body", sorted(BODIES))
def test_the_epilogue_goes_into_the_op(body):
    module, _ = tensor_module(body, 1, 3, 5, 9, 3, 1)
    loops = print_module(lower_kernel(module, "f", [(1, 3, 9, 9), (5, 3, 3, 3), (5, 1, 1), (5, 1, 1),
                                                    (1, 5, 9, 9)]).loop_ir)
    assert "clamp = [" in loops
    assert not any(f"loop.load %{name}" in loops for name in "str")


@pytest.mark.parametrize("hw", [1, 7, 33, 129])
@pytest.mark.parametrize("co", [(3, 1), (5, 7), (16, 33)])
def test_odd_sizes(hw, co):
    c, o = co
    check("bn_relu6", 1, c, o, hw, 3, 1)


@pytest.mark.parametrize("body", sorted(BODIES))
@pytest.mark.parametrize("shape", [
    (2, 16, 64, 32, 1, 1),   # 1x1, K 16 on 4 KiB planes: panels packed (64 channels)
    (2, 64, 40, 32, 1, 1),   # 1x1, K 64, five row tiles: each panel copied before them
    (2, 64, 16, 32, 1, 1),   # 1x1, K 64, two row tiles: copied, or in place on a 12-way L1
    (1, 32, 64, 16, 1, 1),   # 1x1 on 1 KiB planes: panels read in place
    (1, 8, 16, 32, 3, 1),    # 3x3 at stride 1, small weight: direct tiles
    (1, 64, 24, 14, 3, 1),   # K 576: two K blocks, the epilogue on the second only
    (1, 64, 256, 7, 3, 1),   # few pixels: the channels split in blocks
    (3, 7, 9, 33, 3, 2),     # stride 2, ragged last panel
])
def test_every_conv_path(body, shape):
    check(body, *shape)


def test_nan_stays_nan_and_zero_bounds_keep_numpy_signs():
    """max(-0.0, 0.0) is 0.0 and max(0.0, -0.0) is -0.0 in NumPy: the micro-kernel's
    clamp gives the same signs; a NaN input makes NaN outputs through both bounds."""
    n, c, o, h = 1, 4, 6, 20
    x = np.zeros((n, c, h, h), np.float32)
    x[0, 1, 5, 7] = np.nan
    w = rng.standard_normal((o, c, 1, 1)).astype(np.float32)
    s = np.full((o, 1, 1), -1.0, np.float32)
    t = np.full((o, 1, 1), -0.0, np.float32)  # 0 * -1 + -0.0 = -0.0 everywhere but the NaN
    r = np.full((n, o, h, h), -0.0, np.float32)
    for body in ("bn_relu6", "minus_zero", "bn_residual_relu"):
        module, _ = tensor_module(body, n, c, o, h, 1, 1)
        got = CpuKernel(module, "f", passes=False).run([x, w, s, t, r])[0]
        want = BODIES[body][1](conv_ref(x, w, 1, 0), s, t, r)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        assert np.isnan(got[0, :, 5, 7]).all()
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("body", sorted(BODIES))
def test_the_interpreter_runs_the_op_as_the_tensor_level(body):
    module, _ = tensor_module(body, 2, 3, 5, 9, 3, 2)
    args = inputs(2, 3, 5, 9, 3, 2)
    loops = lower_kernel(module, "f", [a.shape for a in args]).loop_ir
    np.testing.assert_allclose(run_func(loops, "f", args)[0], run_func(module, "f", args)[0],
                               rtol=1e-5, atol=1e-6)
