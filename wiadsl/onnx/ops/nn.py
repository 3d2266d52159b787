"""ONNX normalizations (batch, instance, layer), softmax, quantization (Conv:
``conv``, pools: ``pool``).

Per-channel constants (the batch-norm affine, per-axis quantization parameters)
are reshaped here, in NumPy, so they broadcast along the channel axis.
"""

from __future__ import annotations

import numpy as np

from ...dtypes import DType
from ..graph import U8_OFFSET, Node, Val, const_val, literal
from ..shapes import Dim
from ..storage import HELD
from .elementwise import round_half_even
from .registry import op


def _along(v: Val, axis: int, rank: int) -> Val:
    """A per-channel constant ``[C]`` reshaped to ``[C, 1, ...]`` for axis ``axis``."""
    assert v.const is not None
    if v.const.ndim != 1:
        return v
    shape = (v.const.size,) + (1,) * (rank - axis - 1)
    return Val(v.dtype, tuple(Dim(d) for d in shape), const=v.const.reshape(shape),
               offset=v.offset, hint=v.hint)


@op("BatchNormalization")
def _batch_norm(n: Node) -> list[Val]:
    """Inference form; constant statistics fold into one per-channel ``x * a + b``."""
    x, scale, bias, mean, var = (n.x(i) for i in range(5))
    if int(n.attr("training_mode", 0)) or any(o for o in n.proto.output[1:]):
        raise n.fail("training mode (running statistics outputs) is not supported")
    eps = float(n.attr("epsilon", 1e-5))
    if x.rank < 2:
        raise n.fail(f"the input must have a channel axis (rank {x.rank})")
    params = (scale, bias, mean, var)
    if all(v.const is not None for v in params):
        dt = x.dtype.numpy
        s, b, m, v = (np.asarray(p.const, dt) for p in params)  # type: ignore[arg-type]
        a = (s / np.sqrt(v + np.asarray(eps, dt))).astype(dt)
        shift = (b - m * a).astype(dt)
        av, bv = (_along(const_val(c, x.dtype, hint=f"{scale.hint or 'bn'}_{what}"), 1, x.rank)
                  for c, what in ((a, "a"), (shift, "b")))
        return [n.out(f"{n.ref(x)} * {n.ref(av, x.rank)} + {n.ref(bv, x.rank)}",
                      x.dtype, x.shape)]
    c = x.shape[1].text()
    ones = ", 1" * (x.rank - 2)
    r = [f"reshape({n.ref(p)}, [{c}{ones}])" for p in params]
    expr = (f"({n.ref(x)} - {r[2]}) * rsqrt({r[3]} + {literal(eps, x.dtype)}) * {r[0]} "
            f"+ {r[1]}")
    return [n.out(expr, x.dtype, x.shape)]


def _qparams(n: Node, x: Val, quantize: bool) -> tuple[Val, Val]:
    """(scale, stored zero point), both broadcasting against ``x``."""
    if int(n.attr("block_size", 0)):
        raise n.fail("blocked quantization (block_size) is not supported")
    scale, zp = n.x(1), n.input(2, required=False)
    if zp is None:
        to = int(n.attr("output_dtype", 2)) if quantize else (2 if x.offset else 3)
        if to in HELD and to != 2:  # int16, uint16: a zero point of 0 in the held form
            zp = Val(DType.I32, (), const=np.array(0, np.int32), held=HELD[to])
        elif to in (2, 3):
            offset = U8_OFFSET if to == 2 else 0
            zp = Val(DType.I8, (), const=np.array(-offset, np.int8), offset=offset)
        else:
            raise n.fail(f"output_dtype={n.attr('output_dtype')} is not supported")
    if zp.dtype not in (DType.I8, DType.I32):
        raise n.fail(f"zero points of type {zp.dtype} are not supported (int8/uint8/int32)")
    if scale.rank == 1 and scale.shape[0] != Dim(1):
        if scale.const is None or zp.const is None:
            raise n.fail("per-axis quantization needs constant scales and zero points")
        axis = n.axis(int(n.attr("axis", 1)), max(x.rank, 1))  # (per-tensor ignores it)
        scale, zp = _along(scale, axis, x.rank), _along(zp, axis, x.rank)
    return scale, zp


@op("QuantizeLinear")
def _quantize(n: Node) -> list[Val]:
    """``quantize`` to int8; uint8 is int8 with the zero point shifted by -128."""
    x = n.x()
    if not x.dtype.is_float:
        raise n.fail(f"the input must be a float tensor, got {x.dtype}")
    if n.attr("saturate", 1) != 1:
        raise n.fail("saturate=0 is not supported")
    wide = n.input(2, required=False)
    scale, zp = _qparams(n, x, True)
    held = (wide or zp).held
    if held is not None and held.storage is DType.I32:  # int16, uint16
        return [_quantize_wide(n, x, scale, zp, held.numpy)]
    v = n.out(f"quantize({n.ref(x)}, {n.ref(scale, x.rank)}, {n.ref(zp, x.rank)})",
              DType.I8, x.shape)
    v.offset = zp.offset
    return [v]


def _quantize_wide(n: Node, x: Val, scale: Val, zp: Val, kind: np.dtype) -> Val:
    """``quantize``'s rule (``x / scale`` rounded half to even, plus the zero point,
    saturated) into a 16-bit range, held in i32."""
    info = np.iinfo(kind)
    scaled = n.em.bind(f"{n.ref(x)} / {n.ref(scale, x.rank)}", x.dtype, x.shape, "scaled")
    rounded = round_half_even(n, scaled)
    q = f"{rounded.ref} + cast({n.ref(zp, x.rank)}, {x.dtype})"
    lo, hi = literal(float(info.min), x.dtype), literal(float(info.max), x.dtype)
    return n.out(f"cast(min(max({q}, {lo}), {hi}), i32)", DType.I32, x.shape)


@op("DequantizeLinear")
def _dequantize(n: Node) -> list[Val]:
    """``(stored - stored_zp) * scale``: the uint8 shift cancels in the difference."""
    x = n.x()
    scale, zp = _qparams(n, x, False)
    if zp.offset != x.offset:
        raise n.fail("the zero point and the data have different element types")
    v = n.out(f"dequantize({n.ref(x)}, {n.ref(scale, x.rank)}, {n.ref(zp, x.rank)})",
              DType.F32, x.shape)
    if scale.const is not None and scale.const.size == 1 and zp.const is not None \
            and zp.const.size == 1 and x.dtype is DType.I8:
        v.dequantized = (x, scale, zp)
    return [v]


#: Ops that only move elements: their result holds uint8 data as their input does.
LAYOUT_OPS = frozenset({"Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose"})
#: Ops that read uint8 data (held shifted, ``Val.offset``) correctly.
READS_SHIFTED = LAYOUT_OPS | {"QuantizeLinear", "DequantizeLinear"}


# ------------------------------------------------------------------ normalizations


def _softmax_axis(n: Node, x: Val) -> int:
    default = -1 if n.opset >= 13 else 1
    axis = n.axis(int(n.attr("axis", default)), x.rank)
    if n.opset < 13 and axis != x.rank - 1:
        # Opset < 13 flattens [:axis] x [axis:] and normalizes whole rows.
        raise n.fail(f"axis={axis} of a rank-{x.rank} input before opset 13 (rows spanning "
                     "several axes) is not supported")
    return axis


@op("Softmax", "LogSoftmax")
def _softmax(n: Node) -> list[Val]:
    x = n.x()
    axis = _softmax_axis(n, x)
    fn = "softmax" if n.op == "Softmax" else "log_softmax"
    n.em.uses_nn = True
    axis_arg = "" if axis == x.rank - 1 else f", axis={axis}"
    return [n.out(f"nn.{fn}({n.ref(x)}{axis_arg})", x.dtype, x.shape)]


@op("LayerNormalization")
def _layer_norm(n: Node) -> list[Val]:
    x, scale, bias = n.x(0), n.x(1), n.input(2, required=False)
    axis = n.axis(int(n.attr("axis", -1)), x.rank)
    eps = literal(float(n.attr("epsilon", 1e-5)), x.dtype)
    beta = n.ref(bias, x.rank) if bias is not None else "0.0"
    extra = [o for o in n.proto.output[1:] if o]
    if axis == x.rank - 1 and not extra:
        n.em.uses_nn = True
        expr = f"nn.layer_norm({n.ref(x)}, {n.ref(scale, x.rank)}, {beta}, eps={eps})"
        return [n.out(expr, x.dtype, x.shape)]
    axes = list(range(axis, x.rank))
    stat_shape = x.shape[:axis] + (Dim(1),) * len(axes)
    xr = n.ref(x)
    mu = n.em.bind(f"reduce_mean({xr}, axis={axes}, keepdims=true)", x.dtype, stat_shape, "mean")
    xc = n.em.bind(f"{xr} - {mu.ref}", x.dtype, x.shape, "centered")
    inv = n.em.bind(f"rsqrt(reduce_mean({xc.ref} * {xc.ref}, axis={axes}, keepdims=true) + {eps})",
                    x.dtype, stat_shape, "inv_std")
    y = n.out(f"{xc.ref} * {inv.ref} * {n.ref(scale, x.rank)} + {beta}", x.dtype, x.shape)
    return [y, mu, inv][:len(n.proto.output)]
