"""``quantize-int8``: post-training int8 quantization of f32 matmul and conv2d.

Each 2-D ``tensor.matmul`` / NCHW ``tensor.conv2d`` with f32 operands (fused or
not) becomes a product of two i8 tensors widened to i32 (the backends run it as
an int8 GEMM with int32 accumulation: ``loop.qgemm`` on CPU, the array's native
mode in the systolic simulator) whose body dequantizes the accumulator and then
runs the original epilogue (``wiadsl/quant/epilogue.py``).

- Activation (operand 0): with a ``quant_range = [lo, hi]`` attribute on the op
  (``wiadsl.quantize`` calibrates and sets it), static per-tensor parameters,
  asymmetric unless ``symmetric`` (conv2d: always symmetric, since its zero
  padding must stay zero); without one and ``dynamic``, per-tensor symmetric
  parameters computed at run time from ``max |x|``; else the op is left alone.
- Weight (operand 1): symmetric, per output channel when ``per_channel`` (matmul
  axis 1, conv2d axis 0), else per tensor. A constant weight is quantized now
  (``method`` minmax or percentile); any other weight at run time (abs-max).
- ``requantize``: a ``tensor.quantize`` with constant parameters whose input is
  a quantized product used only there moves into that product's body, which then
  yields i8 (the next layer's input leaves the kernel as int8, never as f32).
- Elementwise users of a quantized product (bias, activation, an unfused
  ``fused_elementwise``) move into its body first (``wiadsl/quant/absorb.py``).

Reports: statistics ``products quantized`` / ``requantize fused``; one remark per
op (its parameters, and for a constant weight the max and mean absolute error of
its fake-quantized copy). Error against f32 *outputs* needs data: see
``wiadsl.quant.api.quantize``, which runs both and reports max and mean error.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from ..dtypes import DType
from ..ir.builder import Builder
from ..ir.core import Block, Operation, OpResult, Value
from ..ir.module import ModuleOp
from ..ir.ops import constant_of, op_class
from ..ir.ops_fused import new_body
from ..ir.types import ScalarType, TensorType
from ..quant import params as qp
from ..quant.absorb import absorb
from ..quant.epilogue import F32, I32, dequantize_prologue, finish, requantize, splice_body
from ..records import record
from .base import Pass, PassContext, register_pass

PRODUCTS = {"tensor.matmul": "matmul", "tensor.fused_matmul": "matmul",
            "tensor.conv2d": "conv2d", "tensor.fused_conv2d": "conv2d"}
QUANTIZED = "quantized"  # unit attribute on the products this pass made


@register_pass
@record(frozen=True)
class QuantizeInt8(Pass):
    """Options: ``per_channel``, ``symmetric`` (activations), ``method`` (minmax |
    percentile, constant weights), ``percentile``, ``requantize``, ``dynamic``."""

    name: ClassVar[str] = "quantize-int8"
    per_channel: bool = True
    symmetric: bool = False
    method: str = "minmax"
    percentile: float = 99.99
    requantize: bool = True
    dynamic: bool = True

    def run(self, module: ModuleOp, ctx: PassContext) -> None:
        for f in module:
            for block in f.blocks:
                for op in list(block.ops):
                    if op.name in PRODUCTS and not op.attributes.get(QUANTIZED):
                        self.rewrite(op, ctx)
                if self.requantize:
                    fold_requantize(block, ctx)

    # ------------------------------------------------------------------ one op

    def rewrite(self, op: Operation, ctx: PassContext) -> None:
        kind = PRODUCTS[op.name]
        x, w = op.operands[0], op.operands[1]
        xt, wt = x.type, w.type
        f32 = [isinstance(t, TensorType) and t.dtype is DType.F32 for t in (xt, wt)]
        if not all(f32) or not isinstance(op.results[0].type, TensorType):
            return
        assert isinstance(xt, TensorType) and isinstance(wt, TensorType)
        if kind == "matmul" and (xt.rank != 2 or wt.rank != 2):
            ctx.remark("missed", "not quantized: only 2-D x 2-D matmuls are", op)
            return
        rng = op.attributes.get("quant_range")
        if rng is None and not self.dynamic:
            ctx.remark("missed", "not quantized: no calibration range (dynamic=false)", op)
            return
        b = Builder(op.parent)
        b.set_insertion_point_before(op)
        symmetric = self.symmetric or kind == "conv2d"
        if rng is not None:
            s, z = qp.choose(float(rng[0]), float(rng[1]), symmetric)
            sx, zp = b.constant(float(s), F32), int(z)
        else:
            ax = b.value("tensor.abs", [x], xt)
            mx = b.value("tensor.reduce_max", [ax], F32, {"axes": list(range(xt.rank))})
            mx = b.value("arith.max", [mx, b.constant(float(qp.TINY_SCALE) * 127.0, F32)], F32)
            sx, zp = b.value("arith.div", [mx, b.constant(127.0, F32)], F32), 0
        qx = b.value("tensor.quantize", [x, sx, b.constant(zp, I32)], TensorType(DType.I8, xt.shape),
                     name=(x.name_hint or "x") + ".q")
        qw, sw, corr, note = self.weight(b, w, wt, kind, zp, ctx)
        if qw is None:
            return
        scale = _mul_scale(b, sw, sx)
        i32 = lambda v: b.value("tensor.cast", [v], TensorType(DType.I32, v.type.shape))  # noqa: E731
        epi = list(op.operands[2:])
        old = op.regions[0].blocks[0] if op.regions else None
        extra_types = [ScalarType(v.type.dtype) for v in epi]  # type: ignore[union-attr]
        region, body = new_body([I32, F32, *([I32] if corr is not None else []), *extra_types])
        bb = Builder(body)
        y = dequantize_prologue(bb, body.args[0], body.args[1], body.args[2] if corr is not None else None)
        outs = splice_body(body, old, y, body.args[-len(epi):] if epi else [])
        finish(body, outs)
        attrs = {k: v for k, v in op.attributes.items() if k not in ("quant_range", "kernel")}
        attrs.update({QUANTIZED: True, "kernel": "q" + str(op.attributes.get("kernel", kind))})
        operands = [i32(qx), i32(qw), scale, *([corr] if corr is not None else []), *epi]
        new = op_class(f"tensor.fused_{kind}")(operands, list(op.result_types), attrs, (), [region],
                                                [op.results[0].name_hint])
        new.loc = op.loc
        op.insert_before(new)
        op.results[0].replace_all_uses_with(new.results[0])
        op.erase()
        ctx.count("products quantized")
        new, absorbed = absorb(new)
        if absorbed:
            ctx.count("epilogue ops absorbed", absorbed)
        where = f"x: scale {float(s) if rng is not None else 'dynamic'}, zero point {zp}" if rng is not None \
            else "x: dynamic per-tensor scale"
        ctx.remark("analysis", f"quantized {kind} to int8 ({where}; {note})", new)

    def weight(self, b: Builder, w: Value, wt: TensorType, kind: str, zp: int, ctx: PassContext
               ) -> tuple[Value, Value, Value | None, str]:
        """(i8 weight, f32 scale broadcastable into the product, i32 correction or None, note)."""
        axis = (1 if kind == "matmul" else 0) if self.per_channel else None
        c = constant_of(w)
        if c is not None:
            p = qp.weight_params(np.asarray(c), axis, self.method, self.percentile)
            q = qp.quantize(c, p.scale_for(wt.rank), 0)
            err = np.abs(qp.dequantize(q, p.scale_for(wt.rank), 0) - np.asarray(c, np.float32))
            note = (f"w: {'per-channel' if axis is not None else 'per-tensor'} {self.method}, "
                    f"max error {err.max():.3g}, mean error {err.mean():.3g}")
            qw = b.constant(q, TensorType(DType.I8, wt.shape))
            sw_np = p.scale.reshape(-1, 1, 1) if (kind == "conv2d" and axis is not None) else p.scale
            sw = b.constant(sw_np, TensorType(DType.F32, sw_np.shape)) if sw_np.ndim else \
                b.constant(float(sw_np), F32)
            corr = None
            if zp and kind == "matmul":
                col = (q.astype(np.int64).sum(axis=0) * zp).astype(np.int32)
                corr = b.constant(col, TensorType(DType.I32, col.shape))
            return qw, sw, corr, note
        if kind == "conv2d" and axis is not None and wt.shape[0] is None:
            axis = None  # the per-channel scale needs a static channel count to reshape
        aw = b.value("tensor.abs", [w], wt)
        tiny = b.constant(float(qp.TINY_SCALE) * 127.0, F32)
        if axis is None:
            mx = b.value("tensor.reduce_max", [aw], F32, {"axes": list(range(wt.rank))})
            sw = b.value("arith.div", [b.value("arith.max", [mx, tiny], F32), b.constant(127.0, F32)], F32)
            sq = sw
        else:
            axes = [0] if kind == "matmul" else [1, 2, 3]
            shape = (wt.shape[1],) if kind == "matmul" else (wt.shape[0], 1, 1, 1)
            mt = TensorType(DType.F32, shape)
            mx = b.value("tensor.reduce_max", [aw], mt, {"axes": axes, **({"keepdims": True} if kind != "matmul" else {})})
            sq = b.value("tensor.div", [b.value("tensor.max", [mx, tiny], mt), b.constant(127.0, F32)], mt)
            sw = sq if kind == "matmul" else b.value(
                "tensor.reshape", [sq], TensorType(DType.F32, (wt.shape[0], 1, 1)))
        qw = b.value("tensor.quantize", [w, sq, b.constant(0, I32)], TensorType(DType.I8, wt.shape),
                     name=(w.name_hint or "w") + ".q")
        corr = None
        if zp and kind == "matmul":
            # column sums in i64 (a cast of its own: the product's i32 cast stays single-use,
            # so backends read the i8 weight directly), exact, then back to i32
            nt = TensorType(DType.I32, (wt.shape[1],))
            wide = b.value("tensor.cast", [qw], TensorType(DType.I64, wt.shape))
            col = b.value("tensor.reduce_sum", [wide], TensorType(DType.I64, (wt.shape[1],)), {"axes": [0]})
            col = b.value("tensor.cast", [col], nt)
            corr = b.value("tensor.mul", [col, b.constant(zp, I32)], nt)
        mode = "per-channel" if axis is not None else "per-tensor"
        return qw, sw, corr, f"w: {mode} abs-max at run time"


def _mul_scale(b: Builder, sw: Value, sx: Value) -> Value:
    """``f32(s_w) * f32(s_x)``: the combined dequantization scale (folded when constant)."""
    if isinstance(sw.type, TensorType):
        return b.value("tensor.mul", [sw, sx], sw.type)
    return b.value("arith.mul", [sw, sx], F32)


def fold_requantize(block: Block, ctx: PassContext) -> None:
    """Move ``tensor.quantize(p)`` with constant parameters into the body of the
    quantized product ``p`` when that is p's only use and the shapes agree."""
    for q in list(block.ops):
        if q.name != "tensor.quantize" or q.parent is None:
            continue
        v = q.operands[0]
        p = v.op if isinstance(v, OpResult) else None
        if p is None or not p.attributes.get(QUANTIZED) or p.parent is not block or len(v.uses) != 1:
            continue
        s, z = constant_of(q.operands[1]), constant_of(q.operands[2])
        qt, vt = q.result.type, v.type
        if s is None or z is None or np.size(s) != 1 or np.size(z) != 1 or not (
                isinstance(qt, TensorType) and isinstance(vt, TensorType) and qt.shape == vt.shape):
            continue
        old = p.regions[0].blocks[0]
        region, body = new_body(old.arg_types)
        outs = splice_body(body, old, body.args[0], body.args[1:])
        bb = Builder(body)
        finish(body, [requantize(bb, outs[0], float(np.asarray(s).reshape(())),
                                 int(np.asarray(z).reshape(())))])
        attrs = {**p.attributes, "kernel": str(p.attributes.get("kernel", "q")) + "_requant"}
        new = op_class(p.name)(list(p.operands), [q.result.type], attrs, (), [region], [q.result.name_hint])
        new.loc = p.loc
        q.insert_before(new)
        q.result.replace_all_uses_with(new.result)
        q.erase()
        p.erase()
        ctx.count("requantize fused")
        ctx.remark("fused", "fused the next layer's quantize into the int8 product (requantize)", new)
