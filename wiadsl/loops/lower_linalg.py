"""Matmul (plain, batched, fused epilogue), transpose, conv2d and pooling.

f32/f64 products go to ``loop.gemm`` (the backend's packed micro-kernel);
float conv2d is an implicit GEMM (``loop.conv2d``, conv.py) on a zero-padded copy. An i32
matmul of two ``tensor.cast``s from i8 (the int8 GEMM with int32 accumulation)
reads the i8 buffers and goes to ``loop.qgemm`` (the widened operands are never
materialized when the casts have no other user). Other dtypes get plain loops
(f16/bf16 accumulate in f32 as NumPy does).
"""

from __future__ import annotations

import numpy as np

from ..dtypes import DType
from ..ir.core import Operation, OpResult, Value
from ..ir.ops_loop import QGemmOp
from ..ir.ops_tensor import pool_padding
from ..ir.types import ScalarType, TensorType
from .builder import LoopBuilder, const_value, contiguous_strides
from .conv import implicit_gemm, phase_split, phase_split_pays, rows_pays, winograd_tile
from .epilogue import Epilogue
from .expr import Expr, Leaf, MapExpr, broadcast_extents, broadcast_ivs, buffer_leaf
from .lower import Ctx, Lowered, lowering
from .scalar import cast, clone_body, clone_body_value, materialize

GEMM_DTYPES = (DType.F32, DType.F64)


def _acc(dtype: DType) -> DType:
    return DType.F32 if dtype in (DType.F16, DType.BF16) else dtype


def widened_i8(v: Value) -> Value | None:
    """The i8 source of ``v`` when ``v = tensor.cast(i8 tensor) -> i32 tensor``."""
    p = v.op if isinstance(v, OpResult) else None
    if p is None or p.name != "tensor.cast" or not isinstance(p.operand_types[0], TensorType):
        return None
    src, dst = p.operand_types[0], p.result.type
    ok = src.dtype is DType.I8 and isinstance(dst, TensorType) and dst.dtype is DType.I32
    return p.operands[0] if ok else None


def _narrow_fused(v: Value) -> tuple[Operation, Value] | None:
    """(op, body value) when ``v`` is a one-result ``fused_elementwise`` whose body
    yields ``cast(t: i8) -> i32`` (e.g. a fused quantize-then-widen): t is the i8 value."""
    p = v.op if isinstance(v, OpResult) else None
    if p is None or p.name != "tensor.fused_elementwise" or len(p.results) != 1:
        return None
    body = p.regions[0].blocks[0]
    y = body.ops[-1].operands[0]
    c = y.op if isinstance(y, OpResult) else None
    if c is None or c.name != "arith.cast" or c.operand_types[0] != ScalarType(DType.I8) \
            or y.type != ScalarType(DType.I32):
        return None
    return p, c.operands[0]


def int8_operand(ctx: Ctx, v: Value) -> Leaf | None:
    """An i8 buffer whose widening is ``v`` (an i8 -> i32 cast, or a fused body ending
    in one), or None. The i32 values are never materialized for a single-use ``v``."""
    src = widened_i8(v)
    if src is not None:
        return ctx.buffer(src)
    found = _narrow_fused(v)
    if found is None:
        return None
    p, target = found
    body = p.regions[0].blocks[0]
    expr = MapExpr(lambda lb, args: clone_body_value(lb, body, args, target),
                   [ctx.operand(x) for x in p.operands], ctx.operand(v).extents, DType.I8)
    return materialize(ctx.lb, expr)


def matmul(ctx: Ctx, op: Operation) -> tuple[Leaf | Value, list[Value]]:
    """The product of operands 0 and 1: a buffer (or a scalar for vector . vector)."""
    lb = ctx.lb
    int8 = all(widened_i8(v) is not None or _narrow_fused(v) is not None for v in op.operands[:2])
    if int8:
        a, b = int8_operand(ctx, op.operands[0]), int8_operand(ctx, op.operands[1])
        assert a is not None and b is not None
    else:
        a, b = ctx.buffer(op.operands[0]), ctx.buffer(op.operands[1])
    ae = a.extents if a.rank > 1 else [lb.idx(1), *a.extents]
    be = b.extents if b.rank > 1 else [*b.extents, lb.idx(1)]
    m, k, k2, n = ae[-2], ae[-1], be[-2], be[-1]
    lb.check(lb.cmp("eq", k, k2), ctx.message(op, "inner extents differ"))
    batch = broadcast_extents(lb, [ae[:-2], be[:-2]], ctx.message(op, "batch"))
    dtype = DType.I32 if int8 else a.dtype
    out_ext = [*batch, *([m] if a.rank > 1 else []), *([n] if b.rank > 1 else [])]
    if not out_ext:
        if int8:
            a, b = ctx.buffer(op.operands[0]), ctx.buffer(op.operands[1])
        return _dot(lb, a, b, k), []
    c = lb.alloc(dtype, out_ext)
    a_bs, b_bs = contiguous_strides(lb, ae[:-2]), contiguous_strides(lb, be[:-2])
    c_bs = contiguous_strides(lb, batch)
    mk, kn, mn = lb.mul(m, k), lb.mul(k, n), lb.mul(m, n)

    def one(lb2: LoopBuilder, ivs: list[Value]) -> None:
        aoff = lb2.mul(lb2.linear(broadcast_ivs(lb2, ae[:-2], ivs), a_bs), mk)
        boff = lb2.mul(lb2.linear(broadcast_ivs(lb2, be[:-2], ivs), b_bs), kn)
        coff = lb2.mul(lb2.linear(ivs, c_bs), mn)
        if int8:
            lb2.b.create(QGemmOp.name, [a.buf, b.buf, c, aoff, boff, coff, m, n, k, k, n, n])
        elif dtype in GEMM_DTYPES:
            lb2.b.create("loop.gemm", [a.buf, b.buf, c, aoff, boff, coff, m, n, k, k, n, n],
                         attributes={"accumulate": False})
        else:
            _naive(lb2, a.buf, b.buf, c, (aoff, boff, coff), m, n, k)
    lb.nest(batch, one)
    return buffer_leaf(lb, c, owned=True), out_ext


def _dot(lb: LoopBuilder, a: Leaf, b: Leaf, k: Value) -> Value:
    acc = _acc(a.dtype)

    def step(lb2: LoopBuilder, i: Value, it: list[Value]) -> list[Value]:
        x, y = cast(lb2, lb2.load(a.buf, i), acc), cast(lb2, lb2.load(b.buf, i), acc)
        return [lb2.op("arith.add", [it[0], lb2.op("arith.mul", [x, y], ScalarType(acc))],
                       ScalarType(acc), {"reassoc": True})]
    zero = lb.const(0.0 if acc.is_float else (False if acc is DType.BOOL else 0), ScalarType(acc))
    (r,) = lb.loop(lb.idx(0), k, step, [zero])
    return cast(lb, r, a.dtype)


def _naive(lb: LoopBuilder, a: Value, b: Value, c: Value, offs: tuple[Value, Value, Value],
           m: Value, n: Value, k: Value) -> None:
    dtype = a.type.dtype  # type: ignore[union-attr]
    acc = _acc(dtype)
    t = ScalarType(acc)
    aoff, boff, coff = offs

    def cell(lb2: LoopBuilder, ivs: list[Value]) -> None:
        i, j = ivs
        zero = lb2.const(0.0 if acc.is_float else (False if acc is DType.BOOL else 0), t)

        def step(lb3: LoopBuilder, p: Value, it: list[Value]) -> list[Value]:
            x = cast(lb3, lb3.load(a, lb3.add(aoff, lb3.add(lb3.mul(i, k), p))), acc)
            y = cast(lb3, lb3.load(b, lb3.add(boff, lb3.add(lb3.mul(p, n), j))), acc)
            return [lb3.op("arith.add", [it[0], lb3.op("arith.mul", [x, y], t)], t)]
        (r,) = lb2.loop(lb2.idx(0), k, step, [zero])
        lb2.store(cast(lb2, r, dtype), c, lb2.add(coff, lb2.add(lb2.mul(i, n), j)))
    lb.nest([m, n], cell)


@lowering("tensor.matmul")
def _matmul(ctx: Ctx, op: Operation) -> list[Lowered]:
    return [matmul(ctx, op)[0]]


def _epilogue(ctx: Ctx, op: Operation, product: Leaf) -> list[Lowered]:
    body = op.regions[0].blocks[0]
    extra = [ctx.operand(v) for v in op.operands[2:]]
    return [MapExpr(lambda lb, args: clone_body(lb, body, args)[0], [product, *extra],
                    product.extents, op.result.type.dtype)]  # type: ignore[union-attr]


@lowering("tensor.fused_matmul")
def _fused_matmul(ctx: Ctx, op: Operation) -> list[Lowered]:
    product, _ = matmul(ctx, op)
    assert isinstance(product, Leaf)
    return _epilogue(ctx, op, product)


@lowering("tensor.transpose")
def _transpose(ctx: Ctx, op: Operation) -> list[Lowered]:
    x = ctx.operand(op.operands[0])
    leaf = x if isinstance(x, Leaf) else ctx.buffer(op.operands[0])
    perm = op.attributes["perm"]
    return [Leaf(leaf.buf, [leaf.extents[p] for p in perm], [leaf.strides[p] for p in perm],
                 leaf.offset, False, False)]


def _window(lb: LoopBuilder, size: Value, k: Value, stride: int, pad: int) -> Value:
    return lb.add(lb.floordiv(lb.sub(lb.add(size, lb.idx(2 * pad)), k), lb.idx(stride)), lb.idx(1))


def conv2d(ctx: Ctx, op: Operation) -> tuple[Leaf, bool]:
    """The convolution's result, and whether a ``fused_conv2d``'s epilogue ran in it
    (chunk by chunk: ``fused_in_chunks``) or is still to apply."""
    lb = ctx.lb
    x, w = ctx.buffer(op.operands[0]), ctx.buffer(op.operands[1])
    (sh, sw), (ph, pw) = op.attributes["stride"], op.attributes["padding"]
    nb, c, h, wd = x.extents
    o, c2, kh, kw = w.extents
    lb.check(lb.cmp("eq", c, c2), ctx.message(op, "input and weight channels differ"))
    ho, wo = _window(lb, h, kh, sh, ph), _window(lb, wd, kw, sw, pw)
    ok = lb.and_(lb.cmp("sge", ho, lb.idx(1)), lb.cmp("sge", wo, lb.idx(1)))
    lb.check(ok, ctx.message(op, "kernel larger than the padded input"))
    out = lb.alloc(x.dtype, [nb, o, ho, wo])
    ckk, hw = lb.mul(c, lb.mul(kh, kw)), lb.mul(ho, wo)
    dtype = x.dtype
    t = ScalarType(dtype)
    if dtype in GEMM_DTYPES:
        epilogue, final = None, out
        rows, winograd, phases = image_layout(ctx, op, (c, o, kh, kw, ho, wo), (sh, sw))
        if fused_in_chunks(op) and not (rows or winograd):
            rt = op.result.type
            assert isinstance(rt, TensorType)
            final = out if rt.dtype is dtype else lb.alloc(rt.dtype, [nb, o, ho, wo])
            shape = (int(const_value(ho)), int(const_value(wo)))  # type: ignore[arg-type]
            epi = Epilogue(op.regions[0].blocks[0], [ctx.operand(v) for v in op.operands[2:]],
                           [nb, o, ho, wo], shape)
            epilogue = (epi, final)
        dims = (nb, c, h, wd, o, kh, kw, ho, wo)
        if phases:
            x, w, dims = phase_split(lb, x, w, dims, (ph, pw))
            (sh, sw), (ph, pw) = (1, 1), (0, 0)
        implicit_gemm(lb, x, w, out, dims, (sh, sw), (ph, pw), epilogue, rows, winograd)
        return buffer_leaf(lb, final, owned=True), epilogue is not None

    def image(lb2: LoopBuilder, ivs: list[Value]) -> None:
        (ni,) = ivs
        xoff = lb2.mul(ni, lb2.mul(c, lb2.mul(h, wd)))

        def element(lb3: LoopBuilder, ci: Value, i: Value, j: Value, oh: Value, ow: Value) -> Value:
            hh = lb3.sub(lb3.add(lb3.mul(oh, lb3.idx(sh)), i), lb3.idx(ph))
            ww = lb3.sub(lb3.add(lb3.mul(ow, lb3.idx(sw)), j), lb3.idx(pw))
            inside = lb3.and_(lb3.and_(lb3.cmp("sge", hh, lb3.idx(0)), lb3.cmp("slt", hh, h)),
                              lb3.and_(lb3.cmp("sge", ww, lb3.idx(0)), lb3.cmp("slt", ww, wd)))
            hc = lb3.min(lb3.max(hh, lb3.idx(0)), lb3.sub(h, lb3.idx(1)))
            wc = lb3.min(lb3.max(ww, lb3.idx(0)), lb3.sub(wd, lb3.idx(1)))
            off = lb3.add(xoff, lb3.add(lb3.mul(lb3.add(lb3.mul(ci, h), hc), wd), wc))
            return lb3.select(inside, lb3.load(x.buf, off), lb3.const(0.0 if dtype.is_float else 0, t))

        acc = _acc(dtype)
        ta = ScalarType(acc)

        def cell(lb3: LoopBuilder, v: list[Value]) -> None:
            oi, oh, ow = v

            total = lb3.const(0.0 if acc.is_float else 0, ta)

            def over(lb4: LoopBuilder, p: Value, it: list[Value]) -> list[Value]:
                ci = lb4.floordiv(p, lb4.mul(kh, kw))
                rest = lb4.mod(p, lb4.mul(kh, kw))
                i, j = lb4.floordiv(rest, kw), lb4.mod(rest, kw)
                xv = cast(lb4, element(lb4, ci, i, j, oh, ow), acc)
                wv = cast(lb4, lb4.load(w.buf, lb4.add(lb4.mul(oi, ckk), p)), acc)
                return [lb4.op("arith.add", [it[0], lb4.op("arith.mul", [xv, wv], ta)], ta)]
            (s,) = lb3.loop(lb3.idx(0), ckk, over, [total])
            off = lb3.add(lb3.mul(lb3.add(lb3.mul(ni, o), oi), hw), lb3.add(lb3.mul(oh, wo), ow))
            lb3.store(cast(lb3, s, dtype), out, off)
        lb2.nest([o, ho, wo], cell)
    lb.nest([nb], image)
    return buffer_leaf(lb, out, owned=True), False


@lowering("tensor.conv2d")
def _conv2d(ctx: Ctx, op: Operation) -> list[Lowered]:
    return [conv2d(ctx, op)[0]]


def fused_in_chunks(op: Operation) -> bool:
    """Whether a ``fused_conv2d`` applies its epilogue chunk by chunk inside the
    convolution's loop (loops/conv.py): a float gemm dtype and static output extents."""
    x, rt = op.operand_types[0], op.result.type
    return (op.name == "tensor.fused_conv2d" and isinstance(x, TensorType) and x.dtype in GEMM_DTYPES
            and isinstance(rt, TensorType) and None not in rt.shape[2:])


def image_layout(ctx: Ctx, op: Operation, extents: tuple[Value, ...],
                  stride: tuple[int, int]) -> tuple[bool, int, bool]:
    """(rows, winograd, phases): whether a float convolution with static ``extents`` (c,
    o, kh, kw, ho, wo) is one ``loop.conv2d`` per image with its epilogue after it, with
    the hint ``rows`` (its weight a frozen parameter, loops/conv.py ``rows_pays``) and
    ``winograd`` (``winograd_tile``'s m, or 0; frozen or not); else whether it runs on
    its input's phases (``phase_split_pays``)."""
    sizes = [const_value(v) for v in extents]
    if None in sizes:
        return False, 0, False
    c, o, kh, kw, ho, wo = sizes
    frozen = id(op.operands[1]) in ctx.frozen
    winograd = winograd_tile(c, o, kh, kw, stride, ho, wo, frozen)  # type: ignore[arg-type]
    x_type = op.operand_types[0]
    lanes = ctx.panel_bits // x_type.dtype.bits if isinstance(x_type, TensorType) else 0
    rows = frozen and (bool(winograd) or rows_pays(c, o, kh, kw, ho, wo, lanes))  # type: ignore[arg-type]
    phases = not (rows or winograd) and phase_split_pays(c, o, kh, kw, stride, ho, wo)  # type: ignore[arg-type]
    return rows, winograd, phases


@lowering("tensor.fused_conv2d")
def _fused_conv2d(ctx: Ctx, op: Operation) -> list[Lowered]:
    result, fused = conv2d(ctx, op)
    return [result] if fused else _epilogue(ctx, op, result)


@lowering("tensor.max_pool", "tensor.avg_pool")
def _pool(ctx: Ctx, op: Operation) -> list[Lowered]:
    lb = ctx.lb
    x: Expr = ctx.operand(op.operands[0])
    (kh, kw), (sh, sw) = op.attributes["kernel"], op.attributes["stride"]
    top, left, bottom, right = pool_padding(op)
    *lead, h, wd = x.extents
    ho = _window(lb, lb.add(h, lb.idx(top + bottom)), lb.idx(kh), sh, 0)
    wo = _window(lb, lb.add(wd, lb.idx(left + right)), lb.idx(kw), sw, 0)
    ok = lb.and_(lb.cmp("sge", ho, lb.idx(1)), lb.cmp("sge", wo, lb.idx(1)))
    lb.check(ok, ctx.message(op, "kernel larger than the input"))
    is_max = op.name == "tensor.max_pool"
    dtype = x.dtype
    acc = DType.F32 if dtype is DType.BF16 else dtype
    ta = ScalarType(acc)
    out_ext = [*lead, ho, wo]
    out = lb.alloc(dtype, out_ext)
    strides = contiguous_strides(lb, out_ext)
    if is_max and dtype in GEMM_DTYPES:
        _max_pool_planes(lb, ctx.buffer(op.operands[0]), out, (h, wd, ho, wo), (kh, kw), (sh, sw),
                         (top, left))
        return [buffer_leaf(lb, out, owned=True)]

    def cell(lb2: LoopBuilder, ivs: list[Value]) -> None:
        *li, oh, ow = ivs
        vals = []
        for i in range(kh):
            for j in range(kw):
                hh = lb2.add(lb2.mul(oh, lb2.idx(sh)), lb2.idx(i - top))
                ww = lb2.add(lb2.mul(ow, lb2.idx(sw)), lb2.idx(j - left))
                vals.append(_pool_tap(lb2, x, [*li, hh, ww], (h, wd), acc, bool(top or left or bottom or right)))
        r = vals[0]
        for v in vals[1:]:
            r = lb2.op("arith.max" if is_max else "arith.add", [r, v], ta)
        if not is_max:
            r = lb2.op("arith.div", [r, lb2.const(float(kh * kw), ta)], ta)
        lb2.store(cast(lb2, r, dtype), out, lb2.linear(ivs, strides))
    lb.nest(out_ext, cell, parallel=True)
    return [buffer_leaf(lb, out, owned=True)]


def _pool_tap(lb: LoopBuilder, x: Expr, ivs: list[Value], plane: tuple[Value, Value], acc: DType,
              padded: bool) -> Value:
    """``x`` at ``ivs`` as ``acc``; with ``padded`` (a max pool's padding), the lowest value
    of ``acc`` where (row, column) lies outside ``plane``, read at a clamped position."""
    if not padded:
        return cast(lb, x.at(lb, ivs), acc)
    *li, hh, ww = ivs
    (h, wd), zero = plane, lb.idx(0)
    inside = lb.and_(lb.and_(lb.cmp("sge", hh, zero), lb.cmp("slt", hh, h)),
                     lb.and_(lb.cmp("sge", ww, zero), lb.cmp("slt", ww, wd)))
    at = [*li, lb.min(lb.max(hh, zero), lb.sub(h, lb.idx(1))), lb.min(lb.max(ww, zero), lb.sub(wd, lb.idx(1)))]
    lowest: float | int | bool = float("-inf") if acc.is_float else \
        False if acc is DType.BOOL else int(np.iinfo(acc.numpy).min)
    return lb.select(inside, cast(lb, x.at(lb, at), acc), lb.const(lowest, ScalarType(acc)))


def _max_pool_planes(lb: LoopBuilder, x: Leaf, out: Value, dims: tuple[Value, ...],
                     kernel: tuple[int, int], stride: tuple[int, int], pad: tuple[int, int]) -> None:
    """A float max pool as ``loop.maxpool2d`` on blocks of planes (the leading axes
    flattened), the depthwise kernel's structure (backends/llvm/depthwise.py):
    vectors over output columns instead of a scalar loop per output element, and the
    padding ``pad`` (top, left; the bottom and right ones follow from the output's
    extents) by masked loads."""
    from .depthwise import BLOCK_ELEMENTS
    h, wd, ho, wo = dims
    planes = lb.numel(x.extents[:-2])
    pixels = const_value(lb.mul(ho, wo))
    block = lb.idx(max(1, BLOCK_ELEMENTS // int(pixels)) if pixels else 1)
    count = lb.floordiv(lb.add(planes, lb.sub(block, lb.idx(1))), block)
    hw, ohw = lb.mul(h, wd), lb.mul(ho, wo)

    def one(lb2: LoopBuilder, ivs: list[Value]) -> None:
        q0 = lb2.mul(ivs[0], block)
        lb2.b.create("loop.maxpool2d", [x.buf, out, lb2.mul(q0, hw), lb2.mul(q0, ohw), h, wd, ho, wo,
                                        lb2.min(block, lb2.sub(planes, q0))],
                     attributes={"kernel": list(kernel), "stride": list(stride),
                                 **({"padding": list(pad)} if any(pad) else {})})
    lb.nest([count], one, parallel=True)
