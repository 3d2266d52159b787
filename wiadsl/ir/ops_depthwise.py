"""Depthwise convolution: ``tensor.depthwise_conv2d`` and its loop form
``loop.depthwise2d``; the max pool's loop form ``loop.maxpool2d`` (the same kernel
structure, backends/llvm/depthwise.py, with ``max`` for the multiply-add).

Neither is a DSL builtin. The CPU backend's ``depthwise`` pass (passes/depthwise.py)
makes the tensor op from what a depthwise convolution is written as -- a sum over
taps of strided windows of a zero-padded input, each times that tap's per-channel
weight -- and the loop lowering turns it into one ``loop.depthwise2d`` per channel
plane, a kernel that handles the padding with masked loads instead of a padded copy.

Text forms:
    %y = tensor.depthwise_conv2d %x, %w {stride = [1, 1], dilation = [1, 1], padding = [1, 1]}
         : (tensor<?x64x32x32xf32>, tensor<3x3x64xf32>) -> tensor<?x64x32x32xf32>
    loop.depthwise2d %x, %w, %y, %xoff, %woff, %yoff, %wstride, %h, %wd, %ho, %wo, %planes
         {kernel = [3, 3], stride = [1, 1], dilation = [1, 1], padding = [1, 1]} : (...) -> ()

Semantics (``x`` NCHW, ``w`` [kh, kw, C], zero outside the input):

    y[n, c, oh, ow] = sum_{i < kh, j < kw} w[i, j, c] * x[n, c, oh*sh + i*dh - pt, ow*sw + j*dw - pl]

for every ``oh < Ho, ow < Wo`` of the result type (static). ``padding`` is the begin
padding [pt, pl]; it may be negative (the windows start inside the input), and the
end padding is whatever the output extents imply: every read outside the input is
a zero. The taps are added in order (i, j) = (0, 0), (0, 1), ..., as the sum they
replace; a backend may fuse each multiply-add (float results then differ by rounding).
``loop.maxpool2d %x, %y, %xoff, %yoff, %h, %wd, %ho, %wo, %planes {kernel, stride}`` is
``tensor.max_pool``'s on consecutive planes: y[k, oh, ow] = the maximum over taps of
x[k, oh*sh + i - pt, ow*sw + j - pl] (NumPy's ``maximum``: NaN wins), the taps outside
the plane left out; ``padding = [pt, pl]`` (the begin padding, each less than the
kernel; [0, 0] when absent) and the output extents place the windows.
``loop.depthwise2d`` is ``planes`` consecutive channel planes of one image: plane k
reads ``x[xoff + k*h*wd + r*wd + s]`` for r < h, s < wd and the taps
``w[woff + k + (i*kw + j)*wstride]``, and writes ``y[yoff + k*ho*wo + oh*wo + ow]``
(never accumulated); its attribute ``block``, if any, is the most planes a call
covers (a cost hint). Both ops take f32 or f64 only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..diagnostics import WiaRuntimeError
from ..dtypes import DType
from .core import Operation
from .numerics import finish
from .ops_base import (
    PURE,
    attr_ints,
    expect_counts,
    expect_index,
    expect_result_shape,
    expect_same_dtype,
    expect_tensor,
    has_dynamic_shape,
    register,
)
from .types import TensorType

#: element types the depthwise ops take
DTYPES = (DType.F32, DType.F64)


def check_geometry(op: Operation) -> tuple[list[int], list[int], list[int]]:
    """(stride, dilation, padding) attributes, each of two ints; stride and dilation >= 1."""
    stride, dilation = attr_ints(op, "stride", 2), attr_ints(op, "dilation", 2)
    padding = attr_ints(op, "padding", 2)
    if min(stride) < 1 or min(dilation) < 1:
        raise op.error(f"needs stride >= 1 and dilation >= 1, got {stride}, {dilation}")
    return stride, dilation, padding


def depthwise_numpy(x: np.ndarray, w: np.ndarray, stride: list[int], dilation: list[int],
                    padding: list[int], out_hw: tuple[int, int]) -> np.ndarray:
    """The reference: ``x`` [..., C, H, W], ``w`` [kh, kw, C] -> [..., C, Ho, Wo], the taps
    added in order, each product rounded to the dtype (no fused multiply-add)."""
    (sh, sw), (dh, dw), (pt, pl), (ho, wo) = stride, dilation, padding, out_hw
    kh, kw = w.shape[:2]
    h, wd = x.shape[-2:]
    top, left = max(pt, 0), max(pl, 0)
    bottom = max(0, (ho - 1) * sh + (kh - 1) * dh - pt - (h - 1))
    right = max(0, (wo - 1) * sw + (kw - 1) * dw - pl - (wd - 1))
    xp = np.pad(x, [(0, 0)] * (x.ndim - 2) + [(top, bottom), (left, right)])
    out = None
    with np.errstate(all="ignore"):
        for i in range(kh):
            for j in range(kw):
                r0, c0 = i * dh - pt + top, j * dw - pl + left
                win = xp[..., r0:r0 + sh * (ho - 1) + 1:sh, c0:c0 + sw * (wo - 1) + 1:sw]
                term = win * w[i, j].reshape(-1, 1, 1).astype(x.dtype)
                out = term if out is None else out + term
    assert out is not None
    return out.astype(x.dtype)


@register
class DepthwiseConv2dOp(Operation):
    """``tensor.depthwise_conv2d {stride, dilation, padding}``: NCHW input, [kh, kw, C]
    weight (module docstring); the output extents are the result type's (static)."""

    name = "tensor.depthwise_conv2d"
    traits = PURE

    def verify(self) -> None:
        expect_counts(self, 2, 1)
        x = expect_tensor(self, self.operand_types[0], "input")
        w = expect_tensor(self, self.operand_types[1], "weight")
        dtype = expect_same_dtype(self, [x, w])
        if dtype not in DTYPES:
            raise self.error(f"takes f32 or f64, got {dtype.ir_name}")
        if x.rank != 4 or w.rank != 3 or None in w.shape[:2]:
            raise self.error(f"takes an NCHW input and a [kh, kw, C] weight with static kh, kw, "
                             f"got {x} and {w}")
        check_geometry(self)
        if None not in (x.shape[1], w.shape[2]) and x.shape[1] != w.shape[2]:
            raise self.error(f"input has {x.shape[1]} channels, weight {w.shape[2]}")
        r = expect_tensor(self, self.result.type, "result")
        if r.rank != 4 or any(d is None or d < 1 for d in r.shape[2:]):
            raise self.error(f"the result needs static output extents >= 1, got {r}")
        expect_result_shape(self, r, dtype, [x.shape[0], x.shape[1], *r.shape[2:]])

    def may_trap(self) -> bool:
        return has_dynamic_shape(self)  # the channel counts are checked at run time

    def evaluate(self, args: list[Any]) -> list[Any]:
        x, w = (np.asarray(a) for a in args)
        if x.shape[1] != w.shape[2]:
            raise WiaRuntimeError(f"'{self.name}': input has {x.shape[1]} channels, weight "
                                  f"{w.shape[2]}")
        stride, dilation, padding = check_geometry(self)
        r = self.result.type
        assert isinstance(r, TensorType)
        ho, wo = (int(d or 0) for d in r.shape[2:])  # static (verify)
        out = depthwise_numpy(x, w, stride, dilation, padding, (ho, wo))
        return [finish(out, self.result.type)]


@register
class Depthwise2dOp(Operation):
    """``loop.depthwise2d``: buffers x, w, y, then nine ``index`` values xoff, woff, yoff,
    wstride, h, wd, ho, wo, planes; attributes ``kernel``, ``stride``, ``dilation``,
    ``padding``. Consecutive channel planes of a depthwise convolution (module docstring)."""

    name = "loop.depthwise2d"

    def verify(self) -> None:
        expect_counts(self, 12, 0)
        types = [expect_tensor(self, t, f"operand {i}") for i, t in enumerate(self.operand_types[:3])]
        if len({t.dtype for t in types}) != 1 or types[0].dtype not in DTYPES:
            raise self.error(f"takes f32 or f64 buffers of one dtype, got {', '.join(map(str, types))}")
        for i, t in enumerate(self.operand_types[3:]):
            expect_index(self, t, f"operand {i + 3}")
        if min(attr_ints(self, "kernel", 2)) < 1:
            raise self.error(f"needs a kernel of at least 1x1, got {self.attributes['kernel']}")
        check_geometry(self)

    def evaluate(self, args: list[Any]) -> list[Any]:
        x, w, y = (a.reshape(-1) for a in args[:3])
        xoff, woff, yoff, wstride, h, wd, ho, wo, planes = (int(v) for v in args[3:])
        kh, kw = attr_ints(self, "kernel", 2)
        stride, dilation, padding = check_geometry(self)
        if min(xoff, woff, yoff, planes) < 0 or xoff + planes * h * wd > x.size \
                or yoff + planes * ho * wo > y.size \
                or (planes and woff + planes - 1 + (kh * kw - 1) * wstride >= w.size):
            raise WiaRuntimeError(f"'{self.name}': a plane or its taps lie outside the buffers")
        block = x[xoff:xoff + planes * h * wd].reshape(planes, h, wd)
        taps = w[woff + np.arange(planes)[None, :] + np.arange(kh * kw)[:, None] * wstride]
        out = depthwise_numpy(block, taps.reshape(kh, kw, planes), stride, dilation, padding,
                              (ho, wo))
        y[yoff:yoff + planes * ho * wo] = out.reshape(-1)
        return []


@register
class MaxPool2dOp(Operation):
    """``loop.maxpool2d``: buffers x, y, then seven ``index`` values xoff, yoff, h, wd, ho,
    wo, planes; attributes ``kernel``, ``stride`` and, optionally, ``padding`` (module
    docstring). Every window reaches into its plane: ``(ho - 1) * sh - pt < h`` and the
    same for the width (the first windows do too: the padding is less than the kernel)."""

    name = "loop.maxpool2d"

    def verify(self) -> None:
        expect_counts(self, 9, 0)
        types = [expect_tensor(self, t, f"operand {i}") for i, t in enumerate(self.operand_types[:2])]
        if len({t.dtype for t in types}) != 1 or types[0].dtype not in DTYPES:
            raise self.error(f"takes f32 or f64 buffers of one dtype, got {', '.join(map(str, types))}")
        for i, t in enumerate(self.operand_types[2:]):
            expect_index(self, t, f"operand {i + 2}")
        kernel = attr_ints(self, "kernel", 2)
        if min(kernel) < 1 or min(attr_ints(self, "stride", 2)) < 1:
            raise self.error("needs a kernel and a stride of at least 1")
        pad = self.padding
        if min(pad) < 0 or pad[0] >= kernel[0] or pad[1] >= kernel[1]:
            raise self.error(f"padding {pad} must be at least 0 and less than the kernel {kernel}")

    @property
    def padding(self) -> list[int]:
        """[pt, pl]: [0, 0] when the op has none."""
        return attr_ints(self, "padding", 2) if "padding" in self.attributes else [0, 0]

    def evaluate(self, args: list[Any]) -> list[Any]:
        x, y = (a.reshape(-1) for a in args[:2])
        xoff, yoff, h, wd, ho, wo, planes = (int(v) for v in args[2:])
        (kh, kw), (sh, sw) = attr_ints(self, "kernel", 2), attr_ints(self, "stride", 2)
        pt, pl = self.padding
        if min(xoff, yoff, planes) < 0 or xoff + planes * h * wd > x.size \
                or yoff + planes * ho * wo > y.size or (ho - 1) * sh - pt >= h or (wo - 1) * sw - pl >= wd:
            raise WiaRuntimeError(f"'{self.name}': a plane or a window lies outside the buffers")
        block = x[xoff:xoff + planes * h * wd].reshape(planes, h, wd)
        # taps outside the plane read -inf: the maximum of the others
        pb, pr = max(0, (ho - 1) * sh + kh - pt - h), max(0, (wo - 1) * sw + kw - pl - wd)
        block = np.pad(block, [(0, 0), (pt, pb), (pl, pr)], constant_values=-np.inf)
        out = None
        for i in range(kh):
            for j in range(kw):
                win = block[:, i:i + sh * (ho - 1) + 1:sh, j:j + sw * (wo - 1) + 1:sw]
                out = win if out is None else np.maximum(out, win)
        y[yoff:yoff + planes * ho * wo] = np.asarray(out).reshape(-1)
        return []


__all__ = ["DTYPES", "DepthwiseConv2dOp", "Depthwise2dOp", "MaxPool2dOp", "depthwise_numpy"]
