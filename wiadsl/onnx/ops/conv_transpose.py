"""ONNX ConvTranspose (1-D, 2-D and 3-D): a convolution of the zero-inserted input.

A transposed convolution with stride ``s``, dilation ``d``, kernel ``k`` and pads
``(pb, pe)`` per axis equals a stride-1 convolution, with the same dilation, of the
input spread ``s`` apart (``s - 1`` zeros between neighbours) and padded by
``d * (k - 1) - pb`` before and ``d * (k - 1) - pe + output_padding`` after (a
negative pad crops), by the kernel flipped along its spatial axes with its two
channel axes swapped (per group). The spread and the padding are one zero buffer
and one strided slice assignment; the convolution is Conv's own (``conv_expr``:
dense, grouped, depthwise, dilated). It computes ``s * s`` times the products the
result needs (most are by zero): a per-phase decomposition would not.

``output_shape`` fixes the output extents and the pads follow from it, split by
``auto_pad`` (SAME_UPPER: the odd one at the end); explicit pads are then ignored,
as the spec says. A constant weight is flipped at import, a run-time one in the
kernel (a transpose and a reversed slice).
"""

from __future__ import annotations

import numpy as np

from ..graph import Node, Val, const_val
from ..shapes import Dim, Shape
from .conv import ConvGeometry, as_2d, conv3d, conv_expr, with_bias
from .registry import op


def _ints(n: Node, name: str, default: int, rank: int) -> list[int]:
    values = [int(v) for v in n.attr(name, [default] * rank)]
    if len(values) != rank:
        raise n.fail(f"{name}={values} must have {rank} entries for a {rank}-D input")
    return values


def _pads(n: Node, extents: list[int], kernel: list[int], strides: list[int],
          dilations: list[int], extra: list[int]) -> list[int]:
    """(begin..., end...) pads of the output, from ``pads`` or from ``output_shape``."""
    rank = len(extents)
    shape = n.attr("output_shape")
    auto_pad = n.attr("auto_pad", "NOTSET")
    if shape is None and auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        shape = [e * s for e, s in zip(extents, strides, strict=True)]
    if shape is None:
        if auto_pad not in ("NOTSET", "VALID"):
            raise n.fail(f"auto_pad={auto_pad} is not supported")
        pads = [0] * 2 * rank if auto_pad == "VALID" else _ints(n, "pads", 0, 2 * rank)
        if any(p < 0 for p in pads):
            raise n.fail(f"pads={pads} must be non-negative")
        return pads
    wanted = [int(v) for v in shape][-rank:]
    total = [s * (e - 1) + x + (k - 1) * d + 1 - o for e, k, s, d, x, o
             in zip(extents, kernel, strides, dilations, extra, wanted, strict=True)]
    # a negative total (an output_shape beyond what the pads make) extends the end, as
    # output_padding does
    upper = auto_pad == "SAME_UPPER"
    begin = [t // 2 if upper else t - t // 2 for t in total]
    return begin + [t - b for t, b in zip(total, begin, strict=True)]


def _spread(n: Node, x: Val, strides: list[int], before: list[int], after: list[int]) -> Val:
    """``x`` with ``s - 1`` zeros between neighbours along each spatial axis and
    ``before`` / ``after`` zeros at the ends (negative: that many positions cut)."""
    spatial = [d.value for d in x.shape[2:]]
    full = [(e - 1) * s + 1 for e, s in zip(spatial, strides, strict=True)]
    room = [max(b, 0) + f + max(a, 0) for b, f, a in zip(before, full, after, strict=True)]
    name = n.em.names.fresh("spread")
    dims = ", ".join([x.shape[0].text(), x.shape[1].text(), *map(str, room)])
    window = ", ".join(f"{max(b, 0)}:{max(b, 0) + f}" + (f":{s}" if s > 1 else "")
                       for b, f, s in zip(before, full, strides, strict=True))
    n.em.body += [f"    {name} = full([{dims}], 0.0, {x.dtype});",
                  f"    {name}[:, :, {window}] = {n.ref(x)};"]
    out = Val(x.dtype, (*x.shape[:2], *(Dim(r) for r in room)), ref=name)
    if all(b >= 0 for b in before) and all(a >= 0 for a in after):
        return out
    cut = [(-min(b, 0), r - -min(a, 0)) for b, a, r in zip(before, after, room, strict=True)]
    shape = (*x.shape[:2], *(Dim(hi - lo) for lo, hi in cut))
    return n.em.bind(f"{name}[:, :, {', '.join(f'{lo}:{hi}' for lo, hi in cut)}]", x.dtype,
                     shape, "spread")


def _flipped(n: Node, w: Val, groups: int) -> Val:
    """[C, O/g, k...] -> the forward convolution's [O, C/g, k...], flipped spatially."""
    c, og, *ks = (d.value for d in w.shape)
    shape = (Dim(groups * og), Dim(c // groups), *(Dim(k) for k in ks))
    spatial = len(ks)
    if w.const is not None:
        per = w.const.reshape(groups, c // groups, og, *ks).swapaxes(1, 2)
        flipped = per.reshape(groups * og, c // groups, *ks)[(slice(None),) * 2
                                                            + (slice(None, None, -1),) * spatial]
        return const_val(np.ascontiguousarray(flipped), w.dtype, hint=f"{n.label}_w")
    split = f"reshape({n.ref(w)}, [{groups}, {c // groups}, {og}, {', '.join(map(str, ks))}])"
    perm = ", ".join(map(str, [0, 2, 1, *range(3, 3 + spatial)]))
    dims = ", ".join(d.text() for d in shape)
    reverse = ", ".join([":", ":"] + ["::-1"] * spatial)
    return n.em.bind(f"reshape(transpose({split}, [{perm}]), [{dims}])[{reverse}]",
                     w.dtype, shape, "flipped")


@op("ConvTranspose")
def _conv_transpose(n: Node) -> list[Val]:
    x, w, b = n.x(0), n.x(1), n.input(2, required=False)
    if w.rank not in (3, 4, 5) or not all(d.is_static for d in w.shape):
        raise n.fail(f"the weight must be [C, O/group, k...] with 1 to 3 static spatial "
                     f"extents, got rank {w.rank}")
    rank = w.rank - 2
    if x.rank != rank + 2 or not all(d.is_static for d in x.shape[2:]):
        raise n.fail(f"a {rank}-D kernel needs an input of rank {rank + 2} with static spatial "
                     f"extents, got {x.rank}")
    kernel = [d.value for d in w.shape[2:]]
    strides = _ints(n, "strides", 1, rank)
    dilations = _ints(n, "dilations", 1, rank)
    extra = _ints(n, "output_padding", 0, rank)
    if min(strides + dilations) < 1 or any(not 0 <= e < max(s, d) for e, s, d
                                            in zip(extra, strides, dilations, strict=True)):
        raise n.fail(f"strides={strides} and dilations={dilations} must be positive and "
                     f"output_padding={extra} below them")
    groups = int(n.attr("group", 1))
    if groups < 1 or w.shape[0] != x.shape[1] or w.shape[0].value % groups:
        raise n.fail(f"the weight's {w.shape[0].text()} input channels and group={groups} "
                     f"do not match the input's {x.shape[1].text()} channels")
    extents = [d.value for d in x.shape[2:]]
    pads = _pads(n, extents, kernel, strides, dilations, extra)
    span = [(k - 1) * d for k, d in zip(kernel, dilations, strict=True)]
    before = [s - p for s, p in zip(span, pads[:rank], strict=True)]
    after = [s - p + e for s, p, e in zip(span, pads[rank:], extra, strict=True)]
    out = [(e - 1) * s + 1 + b + a - sp for e, s, b, a, sp
           in zip(extents, strides, before, after, span, strict=True)]
    if min(out) < 1:
        raise n.fail(f"pads={pads} leave no output")
    final: Shape = (x.shape[0], Dim(w.shape[1].value * groups), *(Dim(o) for o in out))
    if rank == 1:
        x, w = as_2d(n, x, w)
        strides, dilations, before, after = ([1, *v] for v in (strides, dilations, before, after))
        before[0] = after[0] = 0
    weight = _flipped(n, w, groups)
    spread = _spread(n, x, strides, before, after)
    g = ConvGeometry(tuple(d.value for d in weight.shape[2:]), (1,) * len(dilations),
                     tuple(dilations), (0,) * 2 * len(dilations))
    if g.rank == 3:
        return [n.out(n.ref(conv3d(n, spread, weight, b, groups, g)), x.dtype, final)]
    expr = conv_expr(n, spread, weight, groups, g)
    return [n.out(with_bias(n, expr, b, final[1], final), x.dtype, final)]
