"""ONNX MatMul and Gemm: NumPy's ``@``; a product of two dequantized int8 operands
becomes one integer matmul (the int8 GEMM) and one rescale."""

from __future__ import annotations

import numpy as np

from ...dtypes import DType
from ..graph import Node, Val, checked, literal
from ..shapes import Dim, Shape, broadcast
from .registry import op


def matmul_shape(n: Node, a: Shape, b: Shape) -> Shape:
    """NumPy ``matmul`` on symbolic shapes (1-D operands promoted, axis dropped)."""
    if not a or not b:
        raise n.fail("MatMul of a scalar")
    a2 = ((Dim(1),) + a) if len(a) == 1 else a
    b2 = (b + (Dim(1),)) if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        raise n.fail(f"inner extents differ: {a2[-1]} and {b2[-2]}")
    batch = checked(n, lambda: broadcast(a2[:-2], b2[:-2]))
    out = batch + (a2[-2],) * (len(a) > 1) + (b2[-1],) * (len(b) > 1)
    return tuple(out)


@op("MatMul")
def _matmul(n: Node) -> list[Val]:
    a, b = n.x(0), n.x(1)
    shape = matmul_shape(n, a.shape, b.shape)
    if a.dequantized and b.dequantized and a.rank >= 2 and b.rank >= 2:
        return [_integer_matmul(n, a.dequantized, b.dequantized, shape)]
    return [n.out(f"{n.ref(a)} @ {n.ref(b)}", a.dtype, shape)]


def _integer_matmul(n: Node, a: tuple[Val, Val, Val], b: tuple[Val, Val, Val],
                    shape: Shape) -> Val:
    """``DQ(aq) @ DQ(bq)`` as an exact i8 x i8 -> i32 product, rescaled once.

    (aq - za) @ (bq - zb) = aq @ bq - za * colsum(bq) - zb * rowsum(aq) + K * za * zb,
    all in i32 on the stored (uint8: shifted) values, whose differences are the
    real ones; then one multiply by sa * sb. Equal to the float product of the
    dequantized operands up to its rounding (the integer part is exact).
    """
    (aq, sa, za), (bq, sb, zb) = a, b
    assert za.const is not None and zb.const is not None
    assert sa.const is not None and sb.const is not None
    z_a, z_b = int(za.const.reshape(-1)[0]), int(zb.const.reshape(-1)[0])
    k = aq.shape[-1]
    expr = f"cast({n.ref(aq)}, i32) @ cast({n.ref(bq)}, i32)"
    if z_a and bq.const is not None:
        corr = z_a * bq.const.astype(np.int64).sum(axis=-2) - (k.value * z_a * z_b if z_b else 0)
        corr_val = Val(DType.I32, tuple(Dim(d) for d in corr.shape),
                       const=corr.astype(np.int32), hint=f"{bq.hint or 'b'}_colsum")
        expr += f" - {n.ref(corr_val, len(shape))}"
    elif z_a:
        expr += f" - {z_a} * reduce_sum(cast({n.ref(bq)}, i32), axis=-2, keepdims=true)"
        if z_b:
            expr += f" + {k.text()} * {z_a * z_b}"
    if z_b:
        expr += f" - {z_b} * reduce_sum(cast({n.ref(aq)}, i32), axis=-1, keepdims=true)"
    scale = np.float32(sa.const.reshape(-1)[0]) * np.float32(sb.const.reshape(-1)[0])
    return n.out(f"cast({expr}, f32) * {literal(scale, DType.F32)}", DType.F32, shape)


@op("Gemm")
def _gemm(n: Node) -> list[Val]:
    """``alpha * A' @ B' + beta * C``; constant B and C are transposed and scaled here."""
    a, b, c = n.x(0), n.x(1), n.input(2, required=False)
    alpha, beta = float(n.attr("alpha", 1.0)), float(n.attr("beta", 1.0))
    if b.const is not None:
        w = b.const.T if n.attr("transB", 0) else b.const
        if alpha != 1.0:
            w, alpha = (w * np.asarray(alpha, w.dtype)).astype(w.dtype), 1.0
        b = Val(b.dtype, tuple(Dim(d) for d in w.shape), const=np.ascontiguousarray(w),
                hint=b.hint)
    elif n.attr("transB", 0):
        b = Val(b.dtype, b.shape[::-1], ref=f"transpose({n.ref(b)})")
    a_ref = n.ref(a)
    if n.attr("transA", 0):
        a, a_ref = Val(a.dtype, a.shape[::-1]), f"transpose({a_ref})"
    shape = matmul_shape(n, a.shape, b.shape)
    expr = f"{a_ref} @ {n.ref(b)}"
    if alpha != 1.0:
        expr = f"{literal(alpha, a.dtype)} * ({expr})"
    if c is not None and beta != 0.0:
        if c.const is not None and beta != 1.0:
            c, beta = Val(c.dtype, c.shape, const=(c.const * beta).astype(c.const.dtype),
                          hint=c.hint), 1.0
        c_ref = n.ref(c, 2)
        expr += f" + {c_ref}" if beta == 1.0 else f" + {literal(beta, a.dtype)} * {c_ref}"
    return [n.out(expr, a.dtype, shape)]
