"""Loop lowering of the depthwise convolution (``loop.depthwise2d`` per block of planes,
then the epilogue), of a float max pool (``loop.maxpool2d``) and of a fused conv2d
(``loop.conv2d`` per chunk of pixels, then the epilogue): IR text, and the loop IR
run by the interpreter against the tensor IR."""

from __future__ import annotations

import re

import numpy as np
import pytest

from wiadsl.diagnostics import WiaIRError
from wiadsl.frontend.compile import compile_to_ir
from wiadsl.ir import parse_module, print_module, run_func, verify
from wiadsl.loops import lower_module
from wiadsl.loops.passes import run_loop_passes
from wiadsl.passes import optimize
from wiadsl.testing.filecheck import filecheck

from ..passes.test_depthwise import PRE, _inputs, window_sum


def _tensor_ir(text: str):
    module = compile_to_ir(text)
    optimize(module, pipeline=PRE + ",depthwise,fuse,dce")
    return module


@pytest.mark.parametrize("c,h,w,k,s,d,pads,n", [
    (7, 9, 33, 3, 1, 1, (1, 1, 1, 1), 3),    # wide rows; 7 planes of 297 pixels: blocks of 3
    (33, 4, 4, 3, 1, 1, (1, 1, 1, 1), 1),    # 4x4 planes, 33 channels in one block
    (5, 13, 11, 3, 3, 2, (2, 1, 0, 1), 2),
    (2, 7, 7, 3, 2, 1, (0, 1, 1, 0), 1),
])
@pytest.mark.parametrize("static", [True, False])
def test_depthwise_loop_ir_runs_like_the_tensor_ir(c, h, w, k, s, d, pads, n, static) -> None:
    text = window_sum(c, h, w, k, s, d, pads)
    tensor = _tensor_ir(text)
    args = _inputs(text, n)
    shapes = {"dw": [a.shape for a in args]} if static else None
    loops = lower_module(tensor, shapes)
    verify(loops)
    out = print_module(loops)
    filecheck(out, """
    CHECK: loop.depthwise2d
    CHECK-SAME: {kernel = [3, 3]
    CHECK: loop.store
    """)
    assert "loop.copy" not in out  # no padded copy
    want = run_func(compile_to_ir(text), "dw", args)[0]
    np.testing.assert_allclose(run_func(loops, "dw", args)[0], want, rtol=1e-5, atol=1e-5)


def test_planes_split_over_threads_with_the_kernels_work_as_cost() -> None:
    """4 images x 64 channels of 32x32, 3x3: the block loop is outlined, its cost the
    multiply-adds of a block (one plane of 1024 pixels x 9 taps)."""
    text = window_sum(64, 32, 32, 3, 1, 1, (1, 1, 1, 1))
    loops = lower_module(_tensor_ir(text), {"dw": [(4, 64, 32, 32), (9, 64, 1, 1), (64, 1, 1)]})
    run_loop_passes(loops, "parallelize", verify_each=True)
    out = print_module(loops)
    filecheck(out, """
    CHECK: func.call @dw.par{{[0-9]+}}({{.*}}) {parallel = {{[0-9]+}}}
    CHECK: func @dw.par
    CHECK: loop.depthwise2d
    CHECK-SAME: block = 1
    """)
    assert int(re.search(r"parallel = (\d+)", out)[1]) > 9 * 1024


MAXPOOL = """
func @f(%x: tensor<?x?x?x?x{dt}>) -> tensor<?x?x?x?x{dt}> attributes {{kernel, outputs = ["y"]}} {{
^entry:
  %y = tensor.max_pool %x {{kernel = [{k}, {k}], stride = [{s}, {s}]}} : tensor<?x?x?x?x{dt}> -> tensor<?x?x?x?x{dt}>
  return %y : tensor<?x?x?x?x{dt}>
}}
"""


@pytest.mark.parametrize("dt,k,s,shape", [("f32", 3, 2, (2, 3, 9, 33)), ("f64", 2, 1, (1, 2, 4, 5)),
                                          ("f32", 1, 1, (1, 1, 1, 1))])
def test_max_pool_lowers_to_maxpool2d(dt, k, s, shape) -> None:
    tensor = parse_module(MAXPOOL.format(dt=dt, k=k, s=s))
    x = np.random.default_rng(1).standard_normal(shape).astype(dt.replace("f", "float"))
    x.flat[0] = np.nan
    loops = lower_module(tensor, {"f": [shape]})
    verify(loops)
    filecheck(print_module(loops), f"CHECK: loop.maxpool2d %x, {{{{%[0-9]+}}}}, {{{{.*}}}} {{kernel = [{k}, {k}], stride = [{s}, {s}]}}")
    np.testing.assert_array_equal(run_func(loops, "f", [x])[0], run_func(tensor, "f", [x])[0])



PADDED_MAXPOOL = """
func @f(%x: tensor<?x?x?x?x{dt}>) -> tensor<?x?x?x?x{dt}> attributes {{kernel, outputs = ["y"]}} {{
^entry:
  %y = tensor.max_pool %x {{kernel = [3, 3], stride = [2, 2], padding = {pads}}} : tensor<?x?x?x?x{dt}> -> tensor<?x?x?x?x{dt}>
  return %y : tensor<?x?x?x?x{dt}>
}}
"""


@pytest.mark.parametrize("dt,pads,shape", [("f32", [1, 1, 1, 1], (1, 3, 9, 33)),
                                           ("f64", [0, 1, 1, 0], (2, 1, 4, 5)),
                                           ("f16", [2, 2, 2, 2], (1, 2, 1, 1))])
def test_padded_max_pool_lowers_with_its_padding(dt, pads, shape) -> None:
    """The planes kernel takes the top and left padding (the rest follows from the output
    extents); f16's scalar loops read -inf outside the plane. Loops and tensor ops agree."""
    tensor = parse_module(PADDED_MAXPOOL.format(dt=dt, pads=pads))
    x = np.random.default_rng(1).standard_normal(shape).astype(dt.replace("f", "float"))
    x.flat[0] = np.nan
    loops = lower_module(tensor, {"f": [shape]})
    verify(loops)
    if dt != "f16":
        padding = f", padding = [{pads[0]}, {pads[1]}]" if pads[:2] != [0, 0] else ""
        filecheck(print_module(loops), f"CHECK: loop.maxpool2d %x, {{{{%[0-9]+}}}}, {{{{.*}}}} "
                                       f"{{kernel = [3, 3], stride = [2, 2]{padding}}}")
    np.testing.assert_array_equal(run_func(loops, "f", [x])[0], run_func(tensor, "f", [x])[0])


@pytest.mark.parametrize("attrs,message", [
    ("kernel = [3, 3], stride = [2, 2], padding = [3, 0, 0, 0]", "less than the kernel"),
    ("kernel = [3, 3], stride = [2, 2], padding = [-1, 0, 0, 0]", "at least 0"),
    ("kernel = [3, 3], stride = [2, 2], padding = [1, 1]", "must have 4 entries"),
])
def test_max_pool_rejects_bad_padding(attrs: str, message: str) -> None:
    src = f"""func @f(%x: tensor<1x1x8x8xf32>) -> tensor<1x1x4x4xf32> {{
^entry:
  %y = tensor.max_pool %x {{{attrs}}} : tensor<1x1x8x8xf32> -> tensor<1x1x4x4xf32>
  return %y : tensor<1x1x4x4xf32>
}}"""
    with pytest.raises(WiaIRError, match=message):
        verify(parse_module(src))


def test_avg_pool_takes_no_padding() -> None:
    src = """func @f(%x: tensor<1x1x8x8xf32>) -> tensor<1x1x4x4xf32> {
^entry:
  %y = tensor.avg_pool %x {kernel = [2, 2], stride = [2, 2], padding = [0, 0, 0, 0]} : tensor<1x1x8x8xf32> -> tensor<1x1x4x4xf32>
  return %y : tensor<1x1x4x4xf32>
}"""
    with pytest.raises(WiaIRError, match="only a max pool has one"):
        verify(parse_module(src))

CONV = """
func @f(%x: tensor<?x?x?x?xf32>, %w: tensor<?x?x?x?xf32>, %b: tensor<{o}x1x1xf32>, %r: tensor<?x{o}x?x?xf32>) -> tensor<?x{o}x{ho}x{wo}xf32> attributes {{kernel, outputs = ["y"]}} {{
^entry:
  %c = tensor.conv2d %x, %w {{stride = [1, 1], padding = [1, 1]}} : (tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>) -> tensor<?x{o}x{ho}x{wo}xf32>
  %a = tensor.{bias} %c, %b : (tensor<?x{o}x{ho}x{wo}xf32>, tensor<{o}x1x1xf32>) -> tensor<?x{o}x{ho}x{wo}xf32>
  %s = tensor.add %a, %r : (tensor<?x{o}x{ho}x{wo}xf32>, tensor<?x{o}x?x?xf32>) -> tensor<?x{o}x{ho}x{wo}xf32>
  %z = arith.constant 0.0 : f32
  %y = tensor.max %s, %z : (tensor<?x{o}x{ho}x{wo}xf32>, f32) -> tensor<?x{o}x{ho}x{wo}xf32>
  return %y : tensor<?x{o}x{ho}x{wo}xf32>
}}
"""


@pytest.mark.parametrize("n,c,o,h,w", [(2, 3, 5, 9, 33), (1, 1, 1, 1, 1), (3, 4, 7, 7, 7)])
@pytest.mark.parametrize("bias", ["sub", "add"])
def test_fused_conv_applies_its_epilogue_per_chunk_of_pixels(n, c, o, h, w, bias) -> None:
    """``fuse`` gives the convolution the bias step (the residual add and relu stay a
    map of their own here). ``c - b`` is an epilogue loop after each chunk's
    ``loop.conv2d``; ``c + b`` is a per-channel shift, which the op itself applies as
    it writes (its ``affine`` operands and ``clamp``, without bounds): no loop reads b."""
    tensor = parse_module(CONV.format(o=o, ho=h, wo=w, bias=bias))
    optimize(tensor, pipeline="fuse")
    rng = np.random.default_rng(2)
    args = [rng.standard_normal(s).astype(np.float32)
            for s in ((n, c, h, w), (o, c, 3, 3), (o, 1, 1), (n, o, h, w))]
    loops = lower_module(tensor, {"f": [a.shape for a in args]})
    verify(loops)
    out = print_module(loops)
    if bias == "sub":  # one chunk loop: the conv of a pixel range (15 operands), then the epilogue
        filecheck(out, """
        CHECK: loop.conv2d {{.*}} {stride = [1, 1], chunk = 256}
        CHECK: loop.load %b,
        CHECK: arith.sub
        CHECK: loop.load %r,
        CHECK: arith.max
        """)
    else:  # b (offset, step 1) rides on the op
        filecheck(out, """
        CHECK: loop.conv2d {{.*}}, %b, {{%[0-9]+}}, {{%[0-9]+}} {stride = [1, 1], chunk = 256, affine = ["shift"], clamp = [-inf, inf]}
        CHECK-NOT: loop.load %b,
        CHECK: loop.load %r,
        CHECK: arith.max
        """)
    want = run_func(tensor, "f", args)[0]
    np.testing.assert_allclose(run_func(loops, "f", args)[0], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("text,message", [
    ("loop.depthwise2d %b, %b, %b, %i, %i, %i, %i, %i, %i, %i, %i {kernel = [3, 3], stride = [1, 1], "
     "dilation = [1, 1], padding = [1, 1]}", "expects 12 operands"),
    ("loop.depthwise2d %b, %b, %b, %i, %i, %i, %i, %i, %i, %i, %i, %i {kernel = [3, 3], stride = [0, 1], "
     "dilation = [1, 1], padding = [1, 1]}", "stride >= 1"),
    ("loop.maxpool2d %b, %b, %i, %i, %i, %i, %i, %i, %i {kernel = [0, 3], stride = [1, 1]}",
     "kernel and a stride of at least 1"),
    ("loop.maxpool2d %b, %b, %i, %i, %i, %i, %i, %i, %i {kernel = [3, 3], stride = [1, 1], padding = [3, 0]}",
     "less than the kernel"),
    ("loop.conv2d %b, %b, %b, %i, %i, %i, %i, %i, %i, %i, %i, %i, %i, %i {stride = [1, 1]}",
     "pixel range and then a channel range, two operands each"),
    ("loop.conv2d %b, %b, %b, %i, %i, %i, %i, %i, %i, %i, %i, %i, %i, %i, %i, %i {stride = [1, 1]}",
     "pixel range and then a channel range, two operands each"),
])
def test_loop_ops_reject_bad_operands(text: str, message: str) -> None:
    count = text.count("%")
    types = ", ".join(["tensor<4xf32>"] * text.count("%b") + ["index"] * (count - text.count("%b")))
    src = f"""func @f(%b: tensor<4xf32>, %i: index) {{
^entry:
  {text} : ({types}) -> ()
  return
}}"""
    with pytest.raises(WiaIRError, match=message):
        verify(parse_module(src))


GAP = """
func @f(%x: tensor<?x3x5x33xf32>) -> tensor<?x3x1x1xf32> attributes {kernel, outputs = ["y"]} {
^entry:
  %y = tensor.reduce_mean %x {axes = [2, 3], keepdims} : tensor<?x3x5x33xf32> -> tensor<?x3x1x1xf32>
  return %y : tensor<?x3x1x1xf32>
}
"""


def test_a_global_pool_sums_each_plane_in_one_loop() -> None:
    """reduce_mean over the last two axes of a contiguous operand: one loop over the
    plane's 165 elements carrying the sum (not a row loop around a column loop)."""
    tensor = parse_module(GAP)
    loops = lower_module(tensor, {"f": [(2, 3, 5, 33)]})
    verify(loops)
    out = print_module(loops)
    assert out.count("cond_br") == 3  # images, channels, the plane's elements
    x = np.random.default_rng(4).standard_normal((2, 3, 5, 33)).astype(np.float32)
    np.testing.assert_allclose(run_func(loops, "f", [x])[0], x.mean((2, 3), keepdims=True), rtol=1e-5)
