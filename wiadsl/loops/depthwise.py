"""Lowering ``tensor.(fused_)depthwise_conv2d`` (ir/ops_depthwise.py): a parallel loop
over the channel planes, each one ``loop.depthwise2d`` then the fused epilogue.

    for q in [0, N * C) parallel:            plane q = (n, c)
      loop.depthwise2d x, w, raw, q*H*W, c, q*Ho*Wo, C, H, W, Ho, Wo {...}
      for p in [0, Ho*Wo):  out[q*Ho*Wo + p] = body(raw[q*Ho*Wo + p], operands at (n, c, p))

The input is read in place (no padded copy: the kernel masks the reads outside
it, backends/llvm/depthwise.py). The epilogue (bias, batch norm, clip, a residual
add) runs on the plane just written, while it is in L1, instead of as a pass over
the whole output; when every epilogue operand is per-channel or laid out like the
plane its loop runs over the plane's flat index (one vectorizable loop, even for
4x4 planes), else over (oh, ow).

Invariants: iterations write disjoint planes and read only inputs (the loop is
marked parallel); the result buffer is the raw output itself when the epilogue
keeps the dtype (in place, element by element), else a buffer of its own.
"""

from __future__ import annotations

from ..ir.core import Operation, Value
from ..ir.ops_depthwise import Depthwise2dOp
from ..ir.types import TensorType
from .builder import LoopBuilder, const_value
from .expr import Expr, Leaf, MapExpr, ScalarExpr, broadcast_ivs, buffer_leaf
from .lower import Ctx, Lowered, lowering
from .scalar import clone_body

NAME = Depthwise2dOp.name


def _flat_leaf(ctx: Ctx, v: Value) -> Leaf:
    """``v`` as a contiguous leaf: a view of a buffer read in place when it is one."""
    e = ctx.operand(v)
    if isinstance(e, Leaf) and e.flat:
        return e
    return ctx.buffer(v)


def _is_const(v: Value, n: int) -> bool:
    return const_value(v) == n


def plane_flat(e: Expr, ho: int, wo: int) -> bool:
    """Whether ``e`` may be read at ivs (n, c, 0, p) for the plane's flat pixel p: its last
    two axes broadcast (extent 1) or are the plane's, contiguous."""
    if isinstance(e, ScalarExpr) or e.rank == 0:
        return True
    tail = e.extents[-2:]
    if all(_is_const(x, 1) for x in tail) and len(tail) == 2:
        return True
    if e.rank < 2 or not (_is_const(tail[0], ho) and _is_const(tail[1], wo)):
        return False
    if isinstance(e, Leaf):
        return _is_const(e.strides[-1], 1) and _is_const(e.strides[-2], wo)
    if isinstance(e, MapExpr):
        return all(plane_flat(o, ho, wo) for o in e.operands)
    return False


def _epilogue(lb: LoopBuilder, op: Operation, extra: list[Expr], raw: Value, out: Value,
              ivs: tuple[Value, Value], plane: Value, shape: tuple[int, int],
              extents: list[Value]) -> None:
    """``out[plane + p] = body(raw[plane + p], extra at (n, c, p))`` over one plane."""
    body = op.regions[0].blocks[0]
    (n, c), (ho, wo) = ivs, shape

    def store(lb2: LoopBuilder, at: list[Value], off: Value) -> None:
        args = [e.at(lb2, broadcast_ivs(lb2, e.extents, at, extents)) for e in extra]
        lb2.store(clone_body(lb2, body, [lb2.load(raw, off), *args])[0], out, off)

    if all(plane_flat(e, ho, wo) for e in extra):
        def pixel(lb2: LoopBuilder, p: Value, _: list[Value]) -> list[Value]:
            store(lb2, [n, c, lb2.idx(0), p], lb2.add(plane, p))
            return []
        lb.loop(lb.idx(0), lb.idx(ho * wo), pixel)
        return

    def cell(lb2: LoopBuilder, hw: list[Value]) -> None:
        oh, ow = hw
        store(lb2, [n, c, oh, ow], lb2.add(plane, lb2.add(lb2.mul(oh, lb2.idx(wo)), ow)))
    lb.nest([lb.idx(ho), lb.idx(wo)], cell)


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
    extra = [ctx.operand(v) for v in op.operands[2:]] if fused else []
    hw, plane = lb.mul(h, wd), lb.mul(ho, wo)
    attrs = {"kernel": [kh, kw], "stride": list(op.attributes["stride"]),
             "dilation": list(op.attributes["dilation"]), "padding": list(op.attributes["padding"])}

    def one(lb2: LoopBuilder, ivs: list[Value]) -> None:
        (q,) = ivs
        ci = lb2.mod(q, c)
        yoff = lb2.mul(q, plane)
        lb2.b.create(NAME, [x.buf, w.buf, raw, lb2.add(x.offset, lb2.mul(q, hw)),
                            lb2.add(w.offset, ci), yoff, c, h, wd, ho, wo], attributes=attrs)
        if fused:
            _epilogue(lb2, op, extra, raw, out, (lb2.floordiv(q, c), ci), yoff, shape, extents)
    # planes are disjoint: a batch, or the channels of one image, split over the threads
    lb.nest([lb.mul(nb, c)], one, parallel=True)
    return buffer_leaf(lb, out, owned=True)


@lowering("tensor.depthwise_conv2d", "tensor.fused_depthwise_conv2d")
def _depthwise(ctx: Ctx, op: Operation) -> list[Lowered]:
    return [depthwise(ctx, op)]
