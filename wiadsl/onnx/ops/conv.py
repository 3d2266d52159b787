"""ONNX Conv: every geometry the spec allows for 2-D NCHW, as WIA DSL expressions.

``conv2d`` takes one stride and one symmetric padding for both spatial axes and no
groups or dilation. The rest of what exporters write is built around it:

- asymmetric ``pads`` and ``auto_pad=SAME_*`` with any stride: the input is padded
  explicitly (``concat`` with zero bands), then ``conv2d(padding=0)``;
- strides that differ per axis: ``conv2d`` at stride 1, then a strided slice;
- depthwise (``group`` = input channels = output channels, MobileNet's 3x3 layers):
  a sum over the kernel's taps of a strided (and dilated) window of the padded input
  times that tap's per-channel weight: ``kh * kw`` fused multiply-adds per output,
  no im2col, with every stride, dilation and padding;
- other groups (ResNeXt, a channel multiplier): one convolution per group on its
  slice of channels, concatenated along the channel axis.

Dilation on a convolution that is not depthwise is an error naming the attribute.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..graph import Node, Val, const_val
from ..shapes import Dim, Shape
from .registry import op


@dataclass(frozen=True)
class ConvGeometry:
    """Where the windows of one 2-D convolution or pool fall."""

    kernel: tuple[int, int]
    strides: tuple[int, int]
    dilations: tuple[int, int]
    pads: tuple[int, int, int, int]  # ONNX order: top, left, bottom, right

    def out_extent(self, axis: int, extent: int) -> int:
        """Output extent along spatial axis ``axis`` (0: height, 1: width)."""
        span = self.dilations[axis] * (self.kernel[axis] - 1) + 1
        return (extent + self.pads[axis] + self.pads[axis + 2] - span) // self.strides[axis] + 1

    @property
    def symmetric_pad(self) -> int | None:
        """The padding when all four sides are the same, else None."""
        return self.pads[0] if len(set(self.pads)) == 1 else None


def _pair(n: Node, name: str, default: int) -> tuple[int, int]:
    values = [int(v) for v in n.attr(name, [default, default])]
    if len(values) != 2:
        raise n.fail(f"{name}={values} must have 2 entries for a 2-D input")
    if any(v < 1 for v in values):
        raise n.fail(f"{name}={values} must be positive")
    return values[0], values[1]


def _same_pads(n: Node, extents: tuple[int, int], kernel: tuple[int, int],
               strides: tuple[int, int], dilations: tuple[int, int]) -> tuple[int, int, int, int]:
    """ONNX's SAME_UPPER / SAME_LOWER: output = ceil(input / stride), the odd pad at
    the end (UPPER) or the start (LOWER)."""
    begin, end = [], []
    for e, k, s, d in zip(extents, kernel, strides, dilations, strict=True):
        total = max((-(-e // s) - 1) * s + d * (k - 1) + 1 - e, 0)
        small, large = total // 2, total - total // 2
        upper = n.attr("auto_pad") == "SAME_UPPER"
        begin.append(small if upper else large)
        end.append(large if upper else small)
    return begin[0], begin[1], end[0], end[1]


def conv_geometry(n: Node, x: Val, kernel: tuple[int, int]) -> ConvGeometry:
    """The geometry from ``strides``, ``dilations``, ``pads`` and ``auto_pad``."""
    if x.rank != 4:
        raise n.fail(f"only 2-D NCHW inputs are supported (input rank {x.rank})")
    for d in x.shape[2:]:
        if not d.is_static:
            raise n.fail(f"a symbolic spatial extent ({d}) is not supported; fix it at import")
    strides, dilations = _pair(n, "strides", 1), _pair(n, "dilations", 1)
    auto_pad = n.attr("auto_pad", "NOTSET")
    if auto_pad == "NOTSET":
        pads = [int(p) for p in n.attr("pads", [0, 0, 0, 0])]
        if len(pads) != 4 or any(p < 0 for p in pads):
            raise n.fail(f"pads={pads} must be 4 non-negative entries for a 2-D input")
        sides = (pads[0], pads[1], pads[2], pads[3])
    elif auto_pad == "VALID":
        sides = (0, 0, 0, 0)
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        extents = (x.shape[2].value, x.shape[3].value)
        sides = _same_pads(n, extents, kernel, strides, dilations)
    else:
        raise n.fail(f"auto_pad={auto_pad} is not supported")
    return ConvGeometry(kernel, strides, dilations, sides)


def pad_spatial(n: Node, x: Val, pads: tuple[int, int, int, int], fill: str) -> Val:
    """``x`` with bands of ``fill`` on its spatial axes (ONNX order top, left, bottom, right)."""
    if not any(pads):
        return x
    before, after = [0, 0, pads[0], pads[1]], [0, 0, pads[2], pads[3]]
    return n.em.pad_constant(x, n.ref(x), before, after, fill)


def _window(ref: str, start: tuple[int, int], step: tuple[int, int], out: tuple[int, int]) -> str:
    """``ref[:, :, ...]``: the ``out`` positions from ``start`` every ``step`` per axis."""
    axes = []
    for a, s, o in zip(start, step, out, strict=True):
        stop = a + s * (o - 1) + 1
        axes.append(f"{a}:{stop}" + (f":{s}" if s != 1 else ""))
    return f"{ref}[:, :, {', '.join(axes)}]"


def _depthwise(n: Node, x: Val, w: np.ndarray, g: ConvGeometry, out: tuple[int, int]) -> str:
    """Sum over taps of a window of the padded input times the tap's channel weights."""
    padded = pad_spatial(n, x, g.pads, "0.0")
    kh, kw = g.kernel
    # One constant [kh*kw, C, 1, 1]: tap t's weights broadcast over the spatial axes.
    taps = np.ascontiguousarray(w[:, 0].transpose(1, 2, 0).reshape(kh * kw, -1, 1, 1))
    wt = n.ref(const_val(taps, x.dtype, hint=f"{n.label}_taps"))
    terms = []
    for i in range(kh):
        for j in range(kw):
            start = (i * g.dilations[0], j * g.dilations[1])
            terms.append(f"{_window(n.ref(padded), start, g.strides, out)} * {wt}[{i * kw + j}]")
    return " + ".join(terms)


def _dense(n: Node, x: Val, w: Val, g: ConvGeometry, out: tuple[int, int]) -> str:
    """``conv2d`` for one group: explicit padding and a strided slice where it must."""
    if g.dilations != (1, 1):
        raise n.fail(f"dilations={list(g.dilations)} on a convolution that is not depthwise "
                     "is not supported")
    pad = g.symmetric_pad
    src = x if pad is not None else pad_spatial(n, x, g.pads, "0.0")
    pad = pad or 0
    if g.strides[0] == g.strides[1]:
        return f"conv2d({n.ref(src)}, {n.ref(w)}, stride={g.strides[0]}, padding={pad})"
    # Strides that differ per axis: every window at stride 1, then every s-th one.
    full = tuple(Dim(d.value + 2 * pad - k + 1) for d, k in zip(src.shape[2:], g.kernel,
                                                                 strict=True))
    dense = n.em.bind(f"conv2d({n.ref(src)}, {n.ref(w)}, stride=1, padding={pad})", x.dtype,
                      (x.shape[0], w.shape[0], *full), "conv")
    return _window(n.ref(dense), (0, 0), g.strides, out)


def _grouped(n: Node, x: Val, w: Val, groups: int, g: ConvGeometry,
             out: tuple[int, int]) -> str:
    """One ``conv2d`` per group on its channels, concatenated."""
    cg, og = w.shape[1].value, w.shape[0].value // groups
    parts = []
    for i in range(groups):
        xi = n.em.bind(f"{n.ref(x)}[:, {i * cg}:{(i + 1) * cg}]", x.dtype,
                       (x.shape[0], Dim(cg), *x.shape[2:]), "group_in")
        assert w.const is not None
        wi = const_val(w.const[i * og:(i + 1) * og], w.dtype, hint=f"{n.label}_w{i}")
        parts.append(n.em.bind(_dense(n, xi, wi, g, out), x.dtype,
                               (x.shape[0], Dim(og), Dim(out[0]), Dim(out[1])), "group_out"))
    return f"concat([{', '.join(n.ref(p) for p in parts)}], axis=1)"


@op("Conv")
def _conv(n: Node) -> list[Val]:
    x, w, b = n.x(0), n.x(1), n.input(2, required=False)
    if w.rank != 4 or not all(d.is_static for d in w.shape):
        raise n.fail("the weight must be [O, C, kh, kw] with static extents")
    kernel = (w.shape[2].value, w.shape[3].value)
    if n.attr("kernel_shape") is not None and tuple(n.attr("kernel_shape")) != kernel:
        raise n.fail(f"kernel_shape={n.attr('kernel_shape')} differs from the weight's "
                     f"{list(kernel)}")
    g = conv_geometry(n, x, kernel)
    out = (g.out_extent(0, x.shape[2].value), g.out_extent(1, x.shape[3].value))
    if min(out) < 1:
        raise n.fail(f"the kernel {list(kernel)} does not fit the padded input "
                     f"{[d.value for d in x.shape[2:]]}")
    groups, o, cg = int(n.attr("group", 1)), w.shape[0].value, w.shape[1].value
    channels = x.shape[1]
    if groups < 1 or o % groups or channels != Dim(cg * groups):
        raise n.fail(f"group={groups} does not divide the weight [{o}, {cg}, ...] and the "
                     f"input's {channels.text()} channels")
    if groups > 1 and w.const is None:
        raise n.fail("a grouped convolution needs a constant weight")
    if groups > 1 and cg == 1 and o == groups:
        assert w.const is not None
        expr = _depthwise(n, x, w.const, g, out)
    elif groups > 1:
        expr = _grouped(n, x, w, groups, g, out)
    else:
        expr = _dense(n, x, w, g, out)
    shape: Shape = (x.shape[0], w.shape[0], Dim(out[0]), Dim(out[1]))
    if b is not None:
        bias = _along_channels(n, b, w.shape[0])
        expr = f"{expr} + {n.ref(bias, 4)}"
    return [n.out(expr, x.dtype, shape)]


def _along_channels(n: Node, b: Val, channels: Dim) -> Val:
    """The bias ``[O]`` as ``[O, 1, 1]``, so it broadcasts over the spatial axes."""
    if b.const is not None:
        c = b.const.reshape(-1, 1, 1)
        return Val(b.dtype, (channels, Dim(1), Dim(1)), const=c, offset=b.offset, hint=b.hint)
    return Val(b.dtype, (channels, Dim(1), Dim(1)),
               ref=f"reshape({n.ref(b)}, [{channels.text()}, 1, 1])")
