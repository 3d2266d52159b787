"""Result-shape inference used by ``shape-specialize``: refine ``?`` extents.

Invariants: ``refine_func`` only replaces a dynamic extent by a static one that
the op's semantics imply from its (now more static) operands; it never changes
a static extent or a dtype. Ops that build a tensor from ``index`` operands
(``reshape``, ``broadcast_to``, ``full``, ``arange``) absorb constant extent
operands into their type. Ops without an inference rule are left alone.
"""

from __future__ import annotations

from collections.abc import Callable

from ..ir.core import Operation, Trait, Value
from ..ir.module import FuncOp
from ..ir.ops import constant_of
from ..ir.ops_fused import FusedProductOp
from ..ir.ops_tensor import matmul_shape, pool_padding
from ..ir.types import TensorType, broadcast_shapes, shape_of

Shape = tuple[int | None, ...]


def _broadcast(op: Operation) -> Shape | None:
    try:
        return broadcast_shapes(*(shape_of(t) for t in op.operand_types))
    except ValueError:
        return None


def _reduce(op: Operation) -> Shape | None:
    x = op.operand_types[0]
    if not isinstance(x, TensorType):
        return None
    axes = {a % x.rank for a in op.attributes.get("axes", [])}
    keep = op.attributes.get("keepdims", False)
    return tuple(1 if i in axes else d for i, d in enumerate(x.shape) if keep or i not in axes)


def _window(n: int | None, k: int | None, s: int, p: int) -> int | None:
    return None if n is None or k is None else (n + 2 * p - k) // s + 1


def _conv(op: Operation) -> Shape | None:
    x, w = op.operand_types[:2]
    (sh, sw), (ph, pw) = op.attributes["stride"], op.attributes["padding"]
    return (x.shape[0], w.shape[0], _window(x.shape[2], w.shape[2], sh, ph),  # type: ignore[union-attr]
            _window(x.shape[3], w.shape[3], sw, pw))  # type: ignore[union-attr]


def _pool(op: Operation) -> Shape | None:
    x = op.operand_types[0]
    (kh, kw), (sh, sw) = op.attributes["kernel"], op.attributes["stride"]
    top, left, bottom, right = pool_padding(op)
    s = x.shape  # type: ignore[union-attr]
    h, w = (None if n is None else n + a + b for n, a, b in ((s[-2], top, bottom), (s[-1], left, right)))
    return (*s[:-2], _window(h, kh, sh, 0), _window(w, kw, sw, 0))


def _transpose(op: Operation) -> Shape | None:
    s = op.operand_types[0].shape  # type: ignore[union-attr]
    return tuple(s[p] for p in op.attributes["perm"])


RULES: dict[str, Callable[[Operation], Shape | None]] = {
    "tensor.select": _broadcast, "tensor.cmpf": _broadcast, "tensor.cmpi": _broadcast,
    "tensor.cast": lambda op: shape_of(op.operand_types[0]),
    "tensor.matmul": lambda op: matmul_shape(shape_of(op.operand_types[0]), shape_of(op.operand_types[1])),
    "tensor.transpose": _transpose, "tensor.conv2d": _conv,
    "tensor.max_pool": _pool, "tensor.avg_pool": _pool,
    "tensor.quantize": _broadcast, "tensor.dequantize": _broadcast, "tensor.fake_quant": _broadcast,
    "tensor.fused_elementwise": _broadcast,
    **{f"tensor.reduce_{k}": _reduce for k in ("sum", "mean", "max", "min", "prod")},
    "tensor.argmax": _reduce, "tensor.argmin": _reduce,
}
_MAKES = {"tensor.reshape": 1, "tensor.broadcast_to": 1, "tensor.full": 1, "tensor.arange": 0}


def infer(op: Operation) -> list[Shape | None]:
    if isinstance(op, FusedProductOp):
        try:
            return [op.product_type().shape]
        except Exception:  # noqa: BLE001 - an unverifiable op keeps its types
            return [None]
    rule = RULES.get(op.name)
    if rule is None and Trait.ELEMENTWISE in op.traits and op.name.startswith("tensor."):
        rule = _broadcast
    if rule is None or len(op.results) != 1:
        return [None] * len(op.results)
    try:
        return [rule(op)]
    except (ValueError, KeyError, IndexError, AttributeError, TypeError):
        return [None]


def absorb_constant_extents(op: Operation) -> bool:
    lead = _MAKES[op.name]
    t = op.result.type
    assert isinstance(t, TensorType)
    extents = list(op.operands[lead:])
    new_shape: list[int | None] = []
    keep: list[Value] = []
    it = iter(extents)
    changed = False
    for d in t.shape:
        if d is not None:
            new_shape.append(d)
            continue
        v = next(it)
        c = constant_of(v)
        if c is not None:
            new_shape.append(int(c))
            changed = True
        else:
            new_shape.append(None)
            keep.append(v)
    if changed:
        op.set_operands([*op.operands[:lead], *keep])
        op.result.type = TensorType(t.dtype, tuple(new_shape))
    return changed


def refine(op: Operation) -> bool:
    if op.name in _MAKES:
        return absorb_constant_extents(op)
    changed = False
    for r, shape in zip(op.results, infer(op), strict=True):
        t = r.type
        if shape is None or not isinstance(t, TensorType) or len(shape) != t.rank:
            continue
        new = tuple(o if o is not None else n for o, n in zip(t.shape, shape, strict=True))
        if new != t.shape:
            r.type = TensorType(t.dtype, new)
            changed = True
    return changed


def refine_func(func: FuncOp) -> None:
    changed = True
    while changed:
        changed = False
        for block in func.blocks:
            if block is not func.entry:
                for arg in block.args:
                    incoming = [s.args[arg.index].type for p in block.predecessors
                                for s in p.terminator.successors if s.block is block]  # type: ignore[union-attr]
                    if incoming and all(t == incoming[0] for t in incoming) and \
                            isinstance(arg.type, TensorType) and isinstance(incoming[0], TensorType) \
                            and incoming[0].num_dynamic < arg.type.num_dynamic:
                        arg.type = incoming[0]
                        changed = True
            for op in block.ops:
                changed |= refine(op)
    rets = [b.terminator.operand_types for b in func.blocks
            if b.terminator is not None and b.terminator.name == "func.return"]
    if rets and all(r == rets[0] for r in rets):
        func.result_types = tuple(rets[0])
