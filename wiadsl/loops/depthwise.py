"""Lowering ``tensor.(fused_)depthwise_conv2d`` (ir/ops_depthwise.py): a parallel loop
over blocks of channel planes, each one ``loop.depthwise2d`` then the fused epilogue.

    for (n, c0) in images x channel blocks, parallel:          B planes from q0 = n*C + c0
      loop.depthwise2d x, w, raw, q0*H*W, c0, q0*Ho*Wo, C, H, W, Ho, Wo, B {...}
      for k < B: for p in [0, Ho*Wo):
        out[(q0+k)*Ho*Wo + p] = body(raw[(q0+k)*Ho*Wo + p], operands at (n, c0 + k, p))

The input is read in place (no padded copy: the kernel masks the reads outside
it, backends/llvm/depthwise.py). The epilogue (bias, batch norm, clip, a residual
add) runs on the plane just written, while it is in L1 (loops/epilogue.py), instead
of as a pass over the whole output.

Invariants: iterations write disjoint planes and read only inputs (the loop is
marked parallel); the result buffer is the raw output itself when the epilogue
keeps the dtype (in place, element by element), else a buffer of its own.
"""

from __future__ import annotations

from ..ir.core import Operation, Value
from ..ir.ops_depthwise import Depthwise2dOp
from ..ir.types import TensorType
from .builder import LoopBuilder, const_value
from .epilogue import Epilogue
from .expr import Leaf, buffer_leaf
from .lower import Ctx, Lowered, lowering

NAME = Depthwise2dOp.name
#: output elements of the channel planes one ``loop.depthwise2d`` call computes (at
#: least one plane): small planes (4x4, 2x2 in MobileNet's last stages) share the
#: kernel's per-call setup and its epilogue loop's, and the block's output (4 KiB of
#: f32) is still in L1 when the epilogue reads it
BLOCK_ELEMENTS = 1024


def _flat_leaf(ctx: Ctx, v: Value) -> Leaf:
    """``v`` as a contiguous leaf: a view of a buffer read in place when it is one."""
    e = ctx.operand(v)
    if isinstance(e, Leaf) and e.flat:
        return e
    return ctx.buffer(v)


def depthwise(ctx: Ctx, op: Operation) -> Leaf:
    """The planes of ``op``'s result, epilogue applied (when fused), in a fresh buffer."""
    lb = ctx.lb
    x, w = _flat_leaf(ctx, op.operands[0]), _flat_leaf(ctx, op.operands[1])
    nb, c, h, wd = x.extents
    kh, kw = (int(const_value(e)) for e in w.extents[:2])  # type: ignore[arg-type]
    c2 = w.extents[2]
    lb.check(lb.cmp("eq", c, c2), ctx.message(op, "input and weight channels differ"))
    rt = op.result.type
    assert isinstance(rt, TensorType)
    shape = (int(rt.shape[2]), int(rt.shape[3]))  # type: ignore[arg-type]
    ho, wo = lb.idx(shape[0]), lb.idx(shape[1])
    extents = [nb, c, ho, wo]
    raw = lb.alloc(x.dtype, extents)
    fused = op.name == "tensor.fused_depthwise_conv2d"
    out = raw if not fused or rt.dtype is x.dtype else lb.alloc(rt.dtype, extents)
    epi = Epilogue(op.regions[0].blocks[0], [ctx.operand(v) for v in op.operands[2:]], extents,
                   shape) if fused else None
    hw, plane = lb.mul(h, wd), lb.mul(ho, wo)
    block = lb.idx(max(1, BLOCK_ELEMENTS // (shape[0] * shape[1])))
    nblk = lb.floordiv(lb.add(c, lb.sub(block, lb.idx(1))), block)
    attrs = {"kernel": [kh, kw], "stride": list(op.attributes["stride"]),
             "dilation": list(op.attributes["dilation"]), "padding": list(op.attributes["padding"]),
             "block": const_value(block)}

    def one(lb2: LoopBuilder, ivs: list[Value]) -> None:
        (t,) = ivs
        n, c0 = lb2.floordiv(t, nblk), lb2.mul(lb2.mod(t, nblk), block)
        planes = lb2.min(block, lb2.sub(c, c0))
        q0 = lb2.add(lb2.mul(n, c), c0)  # the block's first plane
        lb2.b.create(NAME, [x.buf, w.buf, raw, lb2.add(x.offset, lb2.mul(q0, hw)),
                            lb2.add(w.offset, c0), lb2.mul(q0, plane), c, h, wd, ho, wo, planes],
                     attributes=attrs)
        if epi is not None:
            def each(lb3: LoopBuilder, k: Value, _: list[Value]) -> list[Value]:
                epi.apply(lb3, raw, out, n, lb3.add(c0, k), lb3.mul(lb3.add(q0, k), plane),
                          lb3.idx(0), plane)
                return []
            lb2.loop(lb2.idx(0), planes, each)
    # blocks are disjoint: a batch, or the channels of one image, split over the threads
    lb.nest([lb.mul(nb, nblk)], one, parallel=True)
    return buffer_leaf(lb, out, owned=True)


@lowering("tensor.depthwise_conv2d", "tensor.fused_depthwise_conv2d")
def _depthwise(ctx: Ctx, op: Operation) -> list[Lowered]:
    return [depthwise(ctx, op)]
