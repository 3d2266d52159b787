"""Building fused ops: which tensor ops a body can hold and how they become scalar ops.

Invariants:
- ``is_fusible`` ops are pure tensor ops that compute each result element from
  the same element of their (broadcast) operands: the elementwise table, compare,
  select and cast. Each maps to its ``arith`` twin on the element dtype.
- ``emit`` clones cluster ops into a body block in program order; operands come
  from the value -> body value ``mapping``; scalar constants (and one-element
  tensor constants) are re-created inside the body instead of becoming operands.
- ``tensor.quantize``/``dequantize``/``fake_quant`` are fusible too: ``emit``
  expands them into the scalar ops of their definition, op for op as the
  interpreter computes them (``quant_ops``), so results stay bit-identical.
- Body ops take the ``loc`` of the tensor op they came from.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ..dtypes import DType
from ..ir.core import Block, Operation, Trait, Value
from ..ir.ops import constant_of, create_op, op_class
from ..ir.ops_fused import new_body
from ..ir.types import IndexType, ScalarType, TensorType

_EXTRA = {"tensor.cmpf", "tensor.cmpi", "tensor.select", "tensor.cast"}
QUANT = {"tensor.quantize", "tensor.dequantize", "tensor.fake_quant"}


def is_fusible(op: Operation) -> bool:
    if not op.name.startswith("tensor.") or len(op.results) != 1 or op.regions:
        return False
    if not isinstance(op.result.type, TensorType):
        return False
    if any(isinstance(t, IndexType) for t in op.operand_types):
        return False
    return Trait.ELEMENTWISE in op.traits or op.name in _EXTRA or op.name in QUANT


def inlinable_constant(value: Value, rank: int) -> bool:
    """A constant re-created inside a body: a scalar, or a one-element tensor that
    cannot grow the iteration shape."""
    c = constant_of(value)
    if c is None:
        return False
    if isinstance(value.type, TensorType):
        return value.type.rank <= rank and np.size(c) == 1
    return isinstance(value.type, ScalarType)


def cluster_inputs(ops: Sequence[Operation], rank: int, skip: Iterable[Value] = ()) -> list[Value]:
    """External operands of ``ops`` in first-use order, without inlinable constants."""
    inside = {id(r) for op in ops for r in op.results} | {id(v) for v in skip}
    out: list[Value] = []
    seen: set[int] = set()
    for op in ops:
        for v in op.operands:
            if id(v) in inside or id(v) in seen or inlinable_constant(v, rank):
                continue
            seen.add(id(v))
            out.append(v)
    return out


def emit(block: Block, ops: Sequence[Operation], mapping: dict[int, Value]) -> None:
    """Append the scalar twin of each op of ``ops`` (program order) to ``block``."""
    for op in ops:
        operands = []
        for v in op.operands:
            if id(v) not in mapping:
                c = constant_of(v)
                if c is None:
                    raise ValueError(f"fusion: operand of {op.name} has no body value")
                t = ScalarType(v.type.dtype)  # type: ignore[union-attr]
                scalar = np.asarray(c).reshape(-1)[0].item()
                k = create_op("arith.constant", [], [t], {"value": scalar})
                k.loc = op.loc
                block.append(k)
                mapping[id(v)] = k.result
            operands.append(mapping[id(v)])
        if op.name in QUANT:
            xd = op.operand_types[0].dtype  # type: ignore[union-attr]
            mapping[id(op.result)] = quant_ops(block, op.name[7:], operands, xd, op.loc)
            continue
        twin = "arith." + op.name.split(".", 1)[1]
        rt = ScalarType(op.result.type.dtype)  # type: ignore[union-attr]
        new = op_class(twin)(operands, [rt], dict(op.attributes), (), (), [None])
        new.loc = op.loc
        block.append(new)
        mapping[id(op.result)] = new.result


def quant_ops(block: Block, kind: str, args: Sequence[Value], xd: DType, loc: Any = None) -> Value:
    """Append ``tensor.<kind>`` of scalars ``args = (x, scale, zp)`` as scalar ops.

    quantize: ``q = rint(x / scale)`` in x's dtype, ``+ cast(zp)``, clamped to
    [-128, 127] with max/min, cast to i8; dequantize: ``(f32(q) - f32(zp)) *
    f32(scale)``; fake_quant: both. Every step rounds to its dtype, as ``QuantOp``.
    """
    def op(name: str, operands: Sequence[Value], dtype: DType, attrs: dict | None = None) -> Value:
        new = create_op(name, list(operands), [ScalarType(dtype)], attrs or {})
        new.loc = loc
        block.append(new)
        return new.result

    def cast(v: Value, dtype: DType) -> Value:
        return v if v.type == ScalarType(dtype) else op("arith.cast", [v], dtype)

    x, scale, zp = args
    if kind != "dequantize":
        q = op("arith.rint", [op("arith.div", [x, scale], xd)], xd)
        q = op("arith.add", [q, cast(zp, xd)], xd)
        lo = op("arith.constant", [], xd, {"value": -128.0})
        hi = op("arith.constant", [], xd, {"value": 127.0})
        q = op("arith.min", [op("arith.max", [q, lo], xd), hi], xd)
        x = op("arith.cast", [q], DType.I8)
        if kind == "quantize":
            return x
    f32 = DType.F32
    d = op("arith.sub", [cast(x, f32), cast(zp, f32)], f32)
    # exact: never contracted into an FMA with what consumes it (loops/scalar.py)
    return op("arith.mul", [d, cast(scale, f32)], f32, {"exact": True})


def make_body(inputs: Sequence[Value], ops: Sequence[Operation], outputs: Sequence[Value],
              lead: Sequence[ScalarType] = (), lead_values: Sequence[Value] = ()):
    """A region: block args = ``lead`` types then one scalar per input; ``ops``
    emitted; ``outputs`` yielded. ``lead_values`` map to the leading args."""
    region, block = new_body([*lead, *(ScalarType(v.type.dtype) for v in inputs)])  # type: ignore[union-attr]
    mapping: dict[int, Value] = {}
    for v, a in zip([*lead_values, *inputs], block.args, strict=True):
        mapping[id(v)] = a
    emit(block, ops, mapping)
    block.append(create_op("tensor.yield", [mapping[id(v)] for v in outputs]))
    return region, block, mapping


def short(op: Operation) -> str:
    return op.name.split(".", 1)[1]


def kernel_name(prefix: str, ops: Sequence[Operation], product_shape: Sequence | None = None) -> str:
    """``conv_bias_relu_fused`` style: a bias add is ``bias``, sub/mul/mul/add is ``bn``."""
    names: list[str] = []
    for op in ops:
        n = short(op)
        if n in ("add", "sub") and product_shape is not None:
            others = [v.type for v in op.operands if isinstance(v.type, TensorType)]
            if any(len(t.shape) < len(product_shape) or 1 in t.shape for t in others):
                n = "bias" if n == "add" else n
            elif n == "add":
                n = "residual"
        names.append(n)
    text = "_".join(names)
    text = text.replace("sub_mul_mul_bias", "bn").replace("sub_mul_mul_add", "bn")
    parts = [prefix] if prefix else []
    dedup: list[str] = []
    for p in text.split("_"):
        if not dedup or dedup[-1] != p:
            dedup.append(p)
    parts += dedup[:6]
    return "_".join(parts) + "_fused"
