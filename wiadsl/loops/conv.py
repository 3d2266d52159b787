"""``loop.conv2d``: one image of a float convolution as an implicit GEMM.

    loop.conv2d %x, %w, %y, %xoff, %yoff, %c, %hp, %wp, %o, %kh, %kw, %ho, %wo {stride = [sh, sw]} : (...) -> ()

Semantics (cross-correlation, one group, no padding: the lowering passes an
input that is already zero-padded, ``hp x wp`` per channel):

    y[yoff + (oc * ho + oh) * wo + ow] =
        sum_{ci, i, j} w[((oc * c + ci) * kh + i) * kw + j]
                       * x[xoff + (ci * hp + oh * sh + i) * wp + ow * sw + j]

written (never accumulated) for every ``oc < o, oh < ho, ow < wo``.

Invariants:
- f32/f64 buffers of one dtype; ``w`` is the contiguous OIHW weight at offset 0.
- ``(ho - 1) * sh + kh <= hp`` and ``(wo - 1) * sw + kw <= wp`` (the lowering
  derives ho, wo from the padded extents, so every read is inside the image).
- The backend never materializes the im2col matrix: it packs K-panels of input
  patches straight from ``x`` into the micro-kernel's B layout (implicit GEMM).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..dtypes import DType
from ..ir.core import Operation, Value
from ..ir.ops_base import OPS, attr_ints, expect_counts, expect_index, expect_tensor, register
from ..ir.types import ScalarType
from .builder import LoopBuilder
from .expr import Leaf

NAME = "loop.conv2d"


class Conv2dOp(Operation):
    """``loop.conv2d``: buffers x (padded input), w (weights), y (output), then ten
    ``index`` values xoff, yoff, c, hp, wp, o, kh, kw, ho, wo; attribute ``stride``."""

    name = NAME

    def verify(self) -> None:
        expect_counts(self, 13, 0)
        types = [expect_tensor(self, t, f"operand {i}") for i, t in enumerate(self.operand_types[:3])]
        if len({t.dtype for t in types}) != 1 or types[0].dtype not in (DType.F32, DType.F64):
            raise self.error(f"takes f32 or f64 buffers of one dtype, got {', '.join(map(str, types))}")
        for i, t in enumerate(self.operand_types[3:]):
            expect_index(self, t, f"operand {i + 3}")
        stride = attr_ints(self, "stride", 2)
        if min(stride) < 1:
            raise self.error(f"needs stride >= 1, got {stride}")

    def evaluate(self, args: list[Any]) -> list[Any]:
        x, w, y = (a.reshape(-1) for a in args[:3])
        xoff, yoff, c, hp, wp, o, kh, kw, ho, wo = (int(v) for v in args[3:])
        sh, sw = self.attributes["stride"]
        image = x[xoff:xoff + c * hp * wp].reshape(c, hp, wp)
        win = np.lib.stride_tricks.sliding_window_view(image, (kh, kw), axis=(1, 2))
        win = win[:, ::sh, ::sw][:, :ho, :wo]  # (c, ho, wo, kh, kw)
        weight = w[:o * c * kh * kw].reshape(o, c, kh, kw)
        out = np.tensordot(weight, win, axes=([1, 2, 3], [0, 3, 4]))  # (o, ho, wo)
        y[yoff:yoff + o * ho * wo] = out.reshape(-1).astype(y.dtype)
        return []


def implicit_gemm(lb: LoopBuilder, x: Leaf, w: Leaf, out: Value, dims: tuple[Value, ...],
                  stride: tuple[int, int], pad: tuple[int, int]) -> None:
    """Emit ``out = conv2d(x, w)`` for float ``x``: a zero-padded copy of the input
    (when padding) and one ``loop.conv2d`` per image.

    ``dims`` is (nb, c, h, wd, o, kh, kw, ho, wo). The padded copy is one contiguous
    ``loop.copy`` per input row plus zeros in the border only (the top and bottom
    ``ph`` rows of each plane, ``pw`` elements at each end of a row: not a memset
    of the whole buffer first), so the micro-kernel's packing reads every patch
    without bounds checks (the "pre-padded copy" of border handling).
    """
    nb, c, h, wd, o, kh, kw, ho, wo = dims
    (sh, sw), (ph, pw) = stride, pad
    xbuf, hp, wp = x.buf, h, wd
    if ph or pw:
        hp, wp = lb.add(h, lb.idx(2 * ph)), lb.add(wd, lb.idx(2 * pw))
        xbuf = lb.alloc(x.dtype, [nb, c, hp, wp])
        st = ScalarType(x.dtype)

        def zeros(lb2: LoopBuilder, start: Value, count: Value) -> None:
            def one(lb3: LoopBuilder, j: Value, _: list[Value]) -> list[Value]:
                lb3.store(lb3.const(0.0, st), xbuf, lb3.add(start, j))
                return []
            lb2.loop(lb2.idx(0), count, one)

        if ph:  # the top and bottom padding rows of every plane
            def border(lb2: LoopBuilder, ivs: list[Value]) -> None:
                plane, r = ivs
                first = lb2.mul(plane, hp)
                zeros(lb2, lb2.mul(lb2.add(first, r), wp), wp)
                last = lb2.sub(lb2.add(first, hp), lb2.idx(1))
                zeros(lb2, lb2.mul(lb2.sub(last, r), wp), wp)
            lb.nest([lb.mul(nb, c), lb.idx(ph)], border)

        def row(lb2: LoopBuilder, ivs: list[Value]) -> None:
            n, ci, hh = ivs
            plane = lb2.add(lb2.mul(n, c), ci)
            src = lb2.add(x.offset, lb2.mul(lb2.add(lb2.mul(plane, h), hh), wd))
            dst = lb2.add(lb2.mul(lb2.add(lb2.mul(plane, hp), lb2.add(hh, lb2.idx(ph))), wp), lb2.idx(pw))
            lb2.b.create("loop.copy", [x.buf, xbuf, src, dst, wd])
            if pw:  # the left and right padding of this row
                zeros(lb2, lb2.sub(dst, lb2.idx(pw)), lb2.idx(pw))
                zeros(lb2, lb2.add(dst, wd), lb2.idx(pw))
        lb.nest([nb, c, h], row)
    base = lb.idx(0) if xbuf is not x.buf else x.offset

    def image(lb2: LoopBuilder, ivs: list[Value]) -> None:
        (n,) = ivs
        xoff = lb2.add(base, lb2.mul(n, lb2.mul(c, lb2.mul(hp, wp))))
        yoff = lb2.mul(n, lb2.mul(o, lb2.mul(ho, wo)))
        lb2.b.create(NAME, [xbuf, w.buf, out, xoff, yoff, c, hp, wp, o, kh, kw, ho, wo],
                     attributes={"stride": [sh, sw]})
    lb.nest([nb], image)


if NAME not in OPS:  # re-imports (reloads in tests) keep the first registration
    register(Conv2dOp)
