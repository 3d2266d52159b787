"""``loop.conv2d``'s own epilogue (``affine`` operands, ``clamp`` bounds): its text form
and verifier, and which fused bodies loops/epilogue.py's ``channel_clamp`` puts into the
op (a per-channel affine map and bounds, in that order, the bounds constants after the
value) and which stay an epilogue loop after each chunk."""

from __future__ import annotations

import numpy as np
import pytest

from wiadsl.diagnostics import WiaIRError
from wiadsl.ir import parse_module, print_module, verify
from wiadsl.ir.interpreter import run_func
from wiadsl.loops import lower_module
from wiadsl.testing.filecheck import filecheck

OP = ("loop.conv2d %x, %w, %y, %i, %i, %i, %i, %i, %i, %i, %i, %i, %i, %i, %i{extra} "
      "{{stride = [1, 1], chunk = 256{attrs}}}")


def loop_func(extra: str, attrs: str) -> str:
    op = OP.format(extra=extra, attrs=attrs)
    types = ["tensor<1x2x4x4xf32>", "tensor<3x2x1x1xf32>", "tensor<1x3x4x4xf32>"] + ["index"] * 12
    for part in extra.split(", ")[1:]:
        types.append("tensor<3xf32>" if part == "%s" else "index")
    return f"""func @f(%x: tensor<1x2x4x4xf32>, %w: tensor<3x2x1x1xf32>, %y: tensor<1x3x4x4xf32>, %s: tensor<3xf32>, %i: index) {{
^entry:
  {op} : ({", ".join(types)}) -> ()
  return
}}"""


def test_text_form_round_trips() -> None:
    text = loop_func(", %s, %i, %i, %s, %i, %i", ', affine = ["scale", "shift"], clamp = [-inf, 6.0]')
    module = parse_module(text)
    verify(module)
    printed = print_module(module)
    filecheck(printed, 'CHECK: %i, %s, %i, %i, %s, %i, %i {stride = [1, 1], chunk = 256, '
                       'affine = ["scale", "shift"], clamp = [-inf, 6.0]}')
    assert print_module(parse_module(printed)) == printed


@pytest.mark.parametrize("extra,attrs,message", [
    (", %s, %i, %i", ', affine = ["shift", "scale"], clamp = [0.0, 1.0]', "must list some of"),
    (", %s, %i, %i", ', affine = ["shift"]', "no 'clamp' epilogue"),
    ("", ", clamp = [0, 1]", "two floats"),
    ("", ", clamp = [0.0]", "two floats"),
    (", %s, %i", ', affine = ["shift"], clamp = [0.0, 1.0]', "three for a scale or shift"),
    (", %s, %i, %i", ', affine = ["residual"], clamp = [0.0, 1.0]', "two for a residual"),
    (", %s, %i, %i, %s, %i", ', affine = ["residual", "shift"], clamp = [0.0, 1.0]', "in that order"),
    (", %i, %i, %i", ', affine = ["shift"], clamp = [0.0, 1.0]', "shift buffer"),
])
def test_verifier_rejects_bad_epilogues(extra: str, attrs: str, message: str) -> None:
    with pytest.raises(WiaIRError, match=message):
        verify(parse_module(loop_func(extra, attrs)))


def test_the_interpreter_applies_the_epilogue_to_its_channel_range() -> None:
    """Channels [1, 3) of pixels [0, 16): scale from offset 1 with step 2, no shift, a
    residual laid out as y from offset 16, clamped to [-0.5, 0.5]; the other channel is
    left as it was."""
    text = """func @f(%x: tensor<1x2x4x4xf32>, %w: tensor<3x2x1x1xf32>, %s: tensor<7xf32>, %r: tensor<64xf32>) -> tensor<1x3x4x4xf32> attributes {kernel, outputs = ["y"]} {
^entry:
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c16 = arith.constant 16 : index
  %y = loop.alloc : tensor<1x3x4x4xf32>
  %z = arith.constant 9.0 : f32
  loop.store %z, %y, %c0 : (f32, tensor<1x3x4x4xf32>, index) -> ()
  loop.conv2d %x, %w, %y, %c0, %c0, %c2, %c4, %c4, %c3, %c1, %c1, %c4, %c4, %c0, %c16, %c1, %c3, %s, %c1, %c2, %r, %c16 {stride = [1, 1], affine = ["scale", "residual"], clamp = [-0.5, 0.5]} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>, tensor<1x3x4x4xf32>, index, index, index, index, index, index, index, index, index, index, index, index, index, index, tensor<7xf32>, index, index, tensor<64xf32>, index) -> ()
  return %y : tensor<1x3x4x4xf32>
}"""
    module = parse_module(text)
    verify(module)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 2, 4, 4)).astype(np.float32)
    w = rng.standard_normal((3, 2, 1, 1)).astype(np.float32)
    s = rng.standard_normal(7).astype(np.float32)
    r = rng.standard_normal(64).astype(np.float32) * 0.3
    y = run_func(module, "f", [x, w, s, r])[0]
    conv = np.einsum("nchw,oc->nohw", x, w[:, :, 0, 0])
    for oc in (1, 2):
        want = conv[0, oc] * s[1 + 2 * oc] + r[16 + 16 * oc:32 + 16 * oc].reshape(4, 4)
        np.testing.assert_allclose(y[0, oc], np.clip(want, -0.5, 0.5), rtol=1e-6)
    assert y[0, 0, 0, 0] == 9.0


FUSED = """
func @f(%x: tensor<1x3x9x9xf32>, %w: tensor<5x3x3x3xf32>, %a: tensor<{ashape}xf32>, %r: tensor<1x5x9x9xf32>) -> tensor<1x5x9x9x{dt}> attributes {{kernel, outputs = ["y"]}} {{
^entry:
  %y = tensor.fused_conv2d %x, %w, %a, %r {{stride = [1, 1], padding = [1, 1]}} : (tensor<1x3x9x9xf32>, tensor<5x3x3x3xf32>, tensor<{ashape}xf32>, tensor<1x5x9x9xf32>) -> tensor<1x5x9x9x{dt}> {{
  ^bb0(%v: f32, %p: f32, %q: f32):
{body}
  }}
  return %y : tensor<1x5x9x9x{dt}>
}}
"""


@pytest.mark.parametrize("body,ashape,dt,fused", [
    ("%0 = arith.add %v, %p : f32\n    %z = arith.constant 0.0 : f32\n    %1 = arith.max %0, %z : f32\n"
     "    yield %1 : f32", "5x1x1", "f32", True),
    ("%0 = arith.mul %p, %v : f32\n    yield %0 : f32", "1x5x1x1", "f32", True),
    ("%0 = arith.add %v, %p : f32\n    yield %0 : f32", "1x1x1", "f32", True),   # one value, step 0
    # max(0, x) orders -0.0 and 0.0 the other way round: not the op's clamp
    ("%z = arith.constant 0.0 : f32\n    %0 = arith.max %z, %v : f32\n    yield %0 : f32", "5x1x1", "f32", False),
    # min before max, a NaN bound, a shift before the scale
    ("%z = arith.constant 1.0 : f32\n    %0 = arith.min %v, %z : f32\n    %o = arith.constant 0.0 : f32\n"
     "    %1 = arith.max %0, %o : f32\n    yield %1 : f32", "5x1x1", "f32", False),
    ("%z = arith.constant nan : f32\n    %0 = arith.max %v, %z : f32\n    yield %0 : f32", "5x1x1", "f32", False),
    ("%0 = arith.add %v, %p : f32\n    %1 = arith.mul %0, %p : f32\n    yield %1 : f32", "5x1x1", "f32", False),
    # a residual laid out as the output; one added before the shift (the rounding order)
    ("%0 = arith.add %q, %v : f32\n    yield %0 : f32", "5x1x1", "f32", True),
    ("%0 = arith.mul %v, %p : f32\n    %1 = arith.add %0, %q : f32\n    %z = arith.constant 0.0 : f32\n"
     "    %2 = arith.max %1, %z : f32\n    yield %2 : f32", "5x1x1", "f32", True),
    ("%0 = arith.add %v, %q : f32\n    %1 = arith.add %0, %p : f32\n    yield %1 : f32", "5x1x1", "f32", False),
    # an operand laid out along the width, a subtraction
    ("%0 = arith.add %v, %p : f32\n    yield %0 : f32", "9", "f32", False),
    ("%0 = arith.sub %v, %p : f32\n    yield %0 : f32", "5x1x1", "f32", False),
    # a result of another dtype is written to a buffer of its own: not in place
    ("%0 = arith.add %v, %p : f32\n    %1 = arith.cast %0 : f32 -> f64\n    yield %1 : f64", "5x1x1", "f64",
     False),
])
def test_which_epilogues_go_into_the_op(body: str, ashape: str, dt: str, fused: bool) -> None:
    tensor = parse_module(FUSED.format(body="    " + body, ashape=ashape, dt=dt))
    verify(tensor)
    rng = np.random.default_rng(5)
    shapes = [(1, 3, 9, 9), (5, 3, 3, 3), tuple(int(d) for d in ashape.split("x")), (1, 5, 9, 9)]
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    loops = lower_module(tensor, {"f": shapes})
    verify(loops)
    text = print_module(loops)
    assert ("clamp = [" in text) == fused
    assert ("loop.load %a" in text) != fused
    np.testing.assert_allclose(run_func(loops, "f", args)[0], run_func(tensor, "f", args)[0],
                               rtol=1e-5, atol=1e-6)
