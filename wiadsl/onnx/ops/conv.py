"""ONNX Conv: every geometry the spec allows for 1-D, 2-D and 3-D inputs, as WIA DSL
expressions (a 1-D convolution is a 2-D one with a unit height axis; a 3-D one is a
sum of 2-D ones per output depth, ``conv3d``).

``conv2d`` takes one stride and one symmetric padding for both spatial axes and no
groups or dilation. The rest of what exporters write is built around it:

- asymmetric ``pads`` and ``auto_pad=SAME_*`` with any stride: the input is padded
  explicitly (``concat`` with zero bands), then ``conv2d(padding=0)``;
- strides that differ per axis: ``conv2d`` at stride 1, then a strided slice;
- depthwise (``group`` = input channels = output channels, MobileNet's 3x3 layers):
  a sum over the kernel's taps of a strided (and dilated) window of the padded input
  times that tap's per-channel weight: ``kh * kw`` fused multiply-adds per output,
  no im2col, with every stride, dilation and padding (the CPU backend recognizes the
  form and runs a direct kernel on the unpadded input, passes/depthwise.py);
- other groups (ResNeXt, a channel multiplier): one convolution per group on its
  slice of channels, concatenated along the channel axis.

- dilation (not depthwise): a sum over the kernel's taps of a 1x1 ``conv2d`` of the
  padded input's strided, dilated window.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...dtypes import DType
from ..graph import Node, Val, const_val
from ..shapes import Dim, Shape
from .gather import gather_loop
from .registry import op


@dataclass(frozen=True)
class ConvGeometry:
    """Where the windows of one convolution or pool fall, per spatial axis."""

    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads: tuple[int, ...]  # ONNX order: the begin of every axis, then every end

    @property
    def rank(self) -> int:
        return len(self.kernel)

    def span(self, axis: int) -> int:
        """Input positions one window covers along ``axis`` (dilation included)."""
        return self.dilations[axis] * (self.kernel[axis] - 1) + 1

    def out_extent(self, axis: int, extent: int) -> int:
        """Output extent along spatial axis ``axis`` (floor mode)."""
        padded = extent + self.pads[axis] + self.pads[axis + self.rank]
        return (padded - self.span(axis)) // self.strides[axis] + 1

    def ceil_extent(self, axis: int, extent: int) -> int:
        """Output extent in ``ceil_mode``: one more window where the floor leaves input
        over, unless that window would start past the input and its begin padding
        (ONNX's and PyTorch's rule)."""
        padded = extent + self.pads[axis] + self.pads[axis + self.rank]
        out = -(-(padded - self.span(axis)) // self.strides[axis]) + 1
        if (out - 1) * self.strides[axis] >= extent + self.pads[axis]:
            out -= 1
        return out

    @property
    def symmetric_pad(self) -> int | None:
        """The padding when every side is the same, else None."""
        return self.pads[0] if len(set(self.pads)) == 1 else None

    def lifted(self) -> ConvGeometry:
        """This 1-D geometry as 2-D with a unit first axis (a 1-D conv as conv2d). The
        unit axis takes the same stride: one position, one window, one output either
        way, and ``conv2d`` wants one stride for both axes."""
        assert self.rank == 1
        return ConvGeometry((1, *self.kernel), (self.strides[0], *self.strides),
                            (1, *self.dilations),
                            (0, self.pads[0], 0, self.pads[1]))


def _per_axis(n: Node, name: str, default: int, rank: int) -> tuple[int, ...]:
    values = [int(v) for v in n.attr(name, [default] * rank)]
    if len(values) != rank:
        raise n.fail(f"{name}={values} must have {rank} entries for a {rank}-D input")
    if any(v < 1 for v in values):
        raise n.fail(f"{name}={values} must be positive")
    return tuple(values)


def _same_pads(n: Node, extents: tuple[int, ...], kernel: tuple[int, ...],
               strides: tuple[int, ...], dilations: tuple[int, ...]) -> tuple[int, ...]:
    """ONNX's SAME_UPPER / SAME_LOWER: output = ceil(input / stride), the odd pad at
    the end (UPPER) or the start (LOWER)."""
    begin, end = [], []
    for e, k, s, d in zip(extents, kernel, strides, dilations, strict=True):
        total = max((-(-e // s) - 1) * s + d * (k - 1) + 1 - e, 0)
        small, large = total // 2, total - total // 2
        upper = n.attr("auto_pad") == "SAME_UPPER"
        begin.append(small if upper else large)
        end.append(large if upper else small)
    return (*begin, *end)


def conv_geometry(n: Node, x: Val, kernel: tuple[int, ...]) -> ConvGeometry:
    """The geometry from ``strides``, ``dilations``, ``pads`` and ``auto_pad``, for an
    ``[N, C, spatial...]`` input with as many spatial axes as ``kernel``."""
    rank = len(kernel)
    if x.rank != rank + 2:
        raise n.fail(f"a {rank}-D kernel needs an input of rank {rank + 2} (N, C and "
                     f"{rank} spatial axes), got rank {x.rank}")
    for d in x.shape[2:]:
        if not d.is_static:
            raise n.fail(f"a symbolic spatial extent ({d}) is not supported; fix it at import")
    strides = _per_axis(n, "strides", 1, rank)
    dilations = _per_axis(n, "dilations", 1, rank)
    auto_pad = n.attr("auto_pad", "NOTSET")
    if auto_pad == "NOTSET":
        pads = tuple(int(p) for p in n.attr("pads", [0] * 2 * rank))
        if len(pads) != 2 * rank or any(p < 0 for p in pads):
            raise n.fail(f"pads={list(pads)} must be {2 * rank} non-negative entries for a "
                         f"{rank}-D input")
    elif auto_pad == "VALID":
        pads = (0,) * 2 * rank
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        extents = tuple(d.value for d in x.shape[2:])
        pads = _same_pads(n, extents, kernel, strides, dilations)
    else:
        raise n.fail(f"auto_pad={auto_pad} is not supported")
    return ConvGeometry(kernel, strides, dilations, pads)


def pad_spatial(n: Node, x: Val, pads: tuple[int, ...], fill: str) -> Val:
    """``x`` with bands of ``fill`` on its spatial axes (ONNX order: every begin, then
    every end)."""
    if not any(pads):
        return x
    rank = len(pads) // 2
    before, after = [0, 0, *pads[:rank]], [0, 0, *pads[rank:]]
    return n.em.pad_constant(x, n.ref(x), before, after, fill)


def window(ref: str, start: tuple[int, ...], step: tuple[int, ...], out: tuple[int, ...]) -> str:
    """``ref[:, :, ...]``: the ``out`` positions from ``start`` every ``step`` per axis."""
    axes = []
    for a, s, o in zip(start, step, out, strict=True):
        stop = a + s * (o - 1) + 1
        axes.append(f"{a}:{stop}" + (f":{s}" if s != 1 else ""))
    return f"{ref}[:, :, {', '.join(axes)}]"


def _depthwise(n: Node, x: Val, w: np.ndarray, g: ConvGeometry, out: tuple[int, int]) -> str:
    """Sum over taps of a strided (dilated) window of the zero-padded input times the
    tap's channel weights. The CPU backend's ``depthwise`` pass (passes/depthwise.py)
    finds this form and runs it as one direct kernel that reads the input in place
    (the padding by masked loads): no padded copy, no stride-phase buffers."""
    kh, kw = g.kernel
    # One constant [kh*kw, C, 1, 1]: tap t's weights broadcast over the spatial axes.
    taps = np.ascontiguousarray(w[:, 0].transpose(1, 2, 0).reshape(kh * kw, -1, 1, 1))
    wt = n.ref(const_val(taps, x.dtype, hint=f"{n.label}_taps"))
    padded = pad_spatial(n, x, g.pads, "0.0")
    terms = [f"{window(n.ref(padded), (i * g.dilations[0], j * g.dilations[1]), g.strides, out)}"
             f" * {wt}[{i * kw + j}]" for i in range(kh) for j in range(kw)]
    return " + ".join(terms)


#: output pixels up to which a convolution with a constant weight runs as a matmul over
#: channels x taps: conv2d vectorizes over the pixels (16 lanes with AVX-512), so a 2x2
#: output filled a quarter of each vector (1x1, 80 -> 1280 channels at 2x2: 27 us; as
#: pixels x channels @ the weight transposed, packed once at load: 7 us; ONNX Runtime 9).
#: Not a kernel larger than 1x1 that conv2d takes as it is (``_few_pixels_pays``).
FEW_PIXELS = 8


def _few_pixels_pays(g: ConvGeometry, out: tuple[int, int]) -> bool:
    """Whether a constant weight's convolution to ``out`` runs as ``_few_pixels``' matmul.
    A kernel larger than 1x1, undilated, at one stride stays ``conv2d``: the CPU runs a
    frozen weight's small plane as a GEMM with the pixels as its rows (loops/conv.py's
    ``rows_pays``), packing the patches itself, where the gather of every tap was a loop
    of its own (64 -> 64 channels 3x3 at 2x2, as in the exported ResNet-18 at 1/8
    width: 3.3 -> 2.2 us a layer, one thread)."""
    direct = g.kernel != (1, 1) and g.dilations == (1, 1) and g.strides[0] == g.strides[1]
    return out[0] * out[1] <= FEW_PIXELS and not direct


def _few_pixels(n: Node, x: Val, w: np.ndarray, g: ConvGeometry, out: tuple[int, int]) -> str:
    """The convolution as ``patches [N, HW, C*kh*kw] @ weight [C*kh*kw, O]``, transposed
    back to ``[N, O, ho, wo]``: the patch matrix (im2col) is small at this few pixels."""
    (kh, kw), (o, c) = g.kernel, w.shape[:2]
    nb, hw = x.shape[0].text(), out[0] * out[1]
    wt = const_val(np.ascontiguousarray(w.reshape(o, -1).T), x.dtype, hint=f"{n.label}_wt")
    if g.kernel == (1, 1) and g.strides == (1, 1) and not any(g.pads):
        cols = f"reshape({n.ref(x)}, [{nb}, {c}, {hw}])"
    else:  # one gather of every tap's pixels (a concat of kh * kw windows compiled slowly)
        padded = pad_spatial(n, x, g.pads, "0.0")
        hp, wp = padded.shape[2].value, padded.shape[3].value
        flat = n.em.bind(f"reshape({n.ref(padded)}, [{nb}, {c}, {hp * wp}])", x.dtype,
                         (x.shape[0], Dim(c), Dim(hp * wp)), "planes")
        oh, ow = np.meshgrid(np.arange(out[0]) * g.strides[0], np.arange(out[1]) * g.strides[1],
                             indexing="ij")
        # tap t = i * kw + j of channel ci is row ci * kh * kw + t, as in the weight's rows
        idx = np.concatenate([((oh + i * g.dilations[0]) * wp + ow + j * g.dilations[1]).ravel()
                              for i in range(kh) for j in range(kw)])
        taps = gather_loop(n, flat, const_val(idx, DType.I64, hint=f"{n.label}_taps"), axis=2)
        cols = f"reshape({n.ref(taps)}, [{nb}, {c * kh * kw}, {hw}])"
    return (f"reshape(transpose(transpose({cols}, [0, 2, 1]) @ {n.ref(wt)}, [0, 2, 1]), "
            f"[{nb}, {o}, {out[0]}, {out[1]}])")


def _dense(n: Node, x: Val, w: Val, g: ConvGeometry, out: tuple[int, int]) -> str:
    """``conv2d`` for one group: explicit padding and a strided slice where it must."""
    if w.const is not None and _few_pixels_pays(g, out):
        return _few_pixels(n, x, w.const, g, out)
    if g.dilations != (1, 1):
        return _dilated(n, x, w, g, out)
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
    return window(n.ref(dense), (0, 0), g.strides, out)


def _dilated(n: Node, x: Val, w: Val, g: ConvGeometry, out: tuple[int, int]) -> str:
    """A dilated convolution as a sum over its taps of a 1x1 ``conv2d`` (a matmul over
    the channels) of the padded input's strided window at that tap (DeepLab's atrous
    layers): ``kh * kw`` products of the real size, no zero-inserted kernel."""
    padded = pad_spatial(n, x, g.pads, "0.0")
    kh, kw = g.kernel
    terms = []
    for i in range(kh):
        for j in range(kw):
            tap = window(n.ref(padded), (i * g.dilations[0], j * g.dilations[1]), g.strides, out)
            if w.const is not None:
                wt = const_val(np.ascontiguousarray(w.const[:, :, i:i + 1, j:j + 1]), w.dtype,
                               hint=f"{n.label}_tap")
                wref = n.ref(wt)
            else:
                wref = f"{n.ref(w)}[:, :, {i}:{i + 1}, {j}:{j + 1}]"
            terms.append(f"conv2d({tap}, {wref}, stride=1, padding=0)")
    return " + ".join(terms)


def _grouped(n: Node, x: Val, w: Val, groups: int, g: ConvGeometry,
             out: tuple[int, int]) -> str:
    """One ``conv2d`` per group on its channels, concatenated."""
    cg, og = w.shape[1].value, w.shape[0].value // groups
    parts = []
    for i in range(groups):
        xi = n.em.bind(f"{n.ref(x)}[:, {i * cg}:{(i + 1) * cg}]", x.dtype,
                       (x.shape[0], Dim(cg), *x.shape[2:]), "group_in")
        if w.const is not None:
            wi = const_val(w.const[i * og:(i + 1) * og], w.dtype, hint=f"{n.label}_w{i}")
        else:
            wi = n.em.bind(f"{n.ref(w)}[{i * og}:{(i + 1) * og}]", w.dtype,
                           (Dim(og), *w.shape[1:]), "group_w")
        parts.append(n.em.bind(_dense(n, xi, wi, g, out), x.dtype,
                               (x.shape[0], Dim(og), Dim(out[0]), Dim(out[1])), "group_out"))
    return f"concat([{', '.join(n.ref(p) for p in parts)}], axis=1)"


def as_2d(n: Node, x: Val, w: Val) -> tuple[Val, Val]:
    """A 1-D convolution's input ``[N, C, W]`` and weight ``[O, C, k]`` with a unit
    height axis, so ``conv2d`` computes it."""
    xs = (x.shape[0], x.shape[1], Dim(1), x.shape[2])
    x2 = n.em.bind(f"reshape({n.ref(x)}, [{', '.join(d.text() for d in xs)}])", x.dtype, xs,
                   "conv_in")
    ws = (w.shape[0], w.shape[1], Dim(1), w.shape[2])
    if w.const is not None:
        return x2, Val(w.dtype, ws, const=w.const.reshape([d.value for d in ws]),
                       offset=w.offset, hint=w.hint)
    return x2, n.em.bind(f"reshape({n.ref(w)}, [{', '.join(d.text() for d in ws)}])",
                         w.dtype, ws, "conv_w")


@op("Conv")
def _conv(n: Node) -> list[Val]:
    x, w, b = n.x(0), n.x(1), n.input(2, required=False)
    if w.rank not in (3, 4, 5) or not all(d.is_static for d in w.shape):
        raise n.fail(f"the weight must be [O, C, k...] with 1 to 3 static spatial extents, "
                     f"got rank {w.rank}")
    kernel = tuple(d.value for d in w.shape[2:])
    if n.attr("kernel_shape") is not None and tuple(n.attr("kernel_shape")) != kernel:
        raise n.fail(f"kernel_shape={n.attr('kernel_shape')} differs from the weight's "
                     f"{list(kernel)}")
    g = conv_geometry(n, x, kernel)
    out_1d = tuple(g.out_extent(a, d.value) for a, d in enumerate(x.shape[2:]))
    if min(out_1d) < 1:
        raise n.fail(f"the kernel {list(kernel)} does not fit the padded input "
                     f"{[d.value for d in x.shape[2:]]}")
    final: Shape = (x.shape[0], w.shape[0], *(Dim(e) for e in out_1d))
    if g.rank == 3:
        return [n.out(n.ref(conv3d(n, x, w, b, int(n.attr("group", 1)), g)), x.dtype, final)]
    if g.rank == 1:
        x, w = as_2d(n, x, w)
        g = g.lifted()
    expr = conv_expr(n, x, w, int(n.attr("group", 1)), g)
    return [n.out(with_bias(n, expr, b, w.shape[0], final), x.dtype, final)]


#: output depths x kernel depths a 3-D convolution may unroll into 2-D ones
MAX_DEPTH_TERMS = 1024


def conv3d(n: Node, x: Val, w: Val, b: Val | None, groups: int, g: ConvGeometry) -> Val:
    """A 3-D convolution as 2-D ones: the input padded once on all three axes, then
    output depth ``d`` is the sum over kernel depths ``t`` of the 2-D convolution (Conv's
    own forms) of input depth ``d * stride + t * dilation`` by the kernel's depth ``t``
    slice; the depths are stacked along axis 2. Unrolled: at most MAX_DEPTH_TERMS."""
    depth = g.out_extent(0, x.shape[2].value)
    if depth * g.kernel[0] > MAX_DEPTH_TERMS:
        raise n.fail(f"a 3-D convolution of {depth} output depths by {g.kernel[0]} kernel "
                     f"depths unrolls into more than {MAX_DEPTH_TERMS} 2-D convolutions")
    padded = pad_spatial(n, x, g.pads, "0.0")
    plane = ConvGeometry(g.kernel[1:], g.strides[1:], g.dilations[1:], (0, 0, 0, 0))
    hw = [Dim(plane.out_extent(a, padded.shape[3 + a].value)) for a in range(2)]
    o = w.shape[0]
    tap_w = []
    for t in range(g.kernel[0]):
        if w.const is not None:
            tap_w.append(const_val(np.ascontiguousarray(w.const[:, :, t]), w.dtype,
                                   hint=f"{n.label}_w{t}"))
        else:
            tap_w.append(n.em.bind(f"{n.ref(w)}[:, :, {t}]", w.dtype, (*w.shape[:2], *w.shape[3:]),
                                   "depth_w"))
    slices = []
    for d in range(depth):
        terms = []
        for t, wt in enumerate(tap_w):
            z = d * g.strides[0] + t * g.dilations[0]
            xs = n.em.bind(f"{n.ref(padded)}[:, :, {z}]", x.dtype,
                           (*padded.shape[:2], *padded.shape[3:]), "depth_in")
            terms.append(conv_expr(n, xs, wt, groups, plane))
        flat: Shape = (x.shape[0], o, *hw)
        expr = with_bias(n, " + ".join(terms), b, o, flat)
        one = n.em.bind(f"reshape({expr}, [{x.shape[0].text()}, {o.text()}, 1, "
                        f"{hw[0].text()}, {hw[1].text()}])", x.dtype,
                        (x.shape[0], o, Dim(1), *hw), "depth_out")
        slices.append(n.ref(one))
    shape = (x.shape[0], o, Dim(depth), *hw)
    if len(slices) == 1:
        return n.em.bind(slices[0], x.dtype, shape, "conv3d")
    return n.em.bind(f"concat([{', '.join(slices)}], axis=2)", x.dtype, shape, "conv3d")


def conv_expr(n: Node, x: Val, w: Val, groups: int, g: ConvGeometry) -> str:
    """The 2-D convolution of ``x`` [N, C, H, W] by ``w`` [O, C / groups, kh, kw] with
    geometry ``g``, by the cheapest form of its kind (module docstring)."""
    out = (g.out_extent(0, x.shape[2].value), g.out_extent(1, x.shape[3].value))
    o, cg = w.shape[0].value, w.shape[1].value
    channels = x.shape[1]
    if groups < 1 or o % groups or channels != Dim(cg * groups):
        raise n.fail(f"group={groups} does not divide the weight [{o}, {cg}, ...] and the "
                     f"input's {channels.text()} channels")
    if groups > 1 and cg == 1 and o == groups and w.const is not None:
        return _depthwise(n, x, w.const, g, out)
    if groups > 1:
        return _grouped(n, x, w, groups, g, out)
    return _dense(n, x, w, g, out)


def with_bias(n: Node, expr: str, b: Val | None, channels: Dim, final: Shape) -> str:
    """``expr`` (a 4-D result) plus the per-channel bias ``b``, reshaped to ``final``
    (a 1-D result's rank) where that differs."""
    if b is not None:
        expr = f"{expr} + {n.ref(_along_channels(n, b, channels), 4)}"
    if len(final) == 3:
        expr = f"reshape({expr}, [{', '.join(d.text() for d in final)}])"
    return expr


def _along_channels(n: Node, b: Val, channels: Dim) -> Val:
    """The bias ``[O]`` as ``[O, 1, 1]``, so it broadcasts over the spatial axes."""
    if b.const is not None:
        c = b.const.reshape(-1, 1, 1)
        return Val(b.dtype, (channels, Dim(1), Dim(1)), const=c, offset=b.offset, hint=b.hint)
    return Val(b.dtype, (channels, Dim(1), Dim(1)),
               ref=f"reshape({n.ref(b)}, [{channels.text()}, 1, 1])")
