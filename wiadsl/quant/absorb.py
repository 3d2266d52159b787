"""Absorb elementwise consumers into a quantized product's body (bias, activation...).

``absorb(p)`` repeatedly takes the only user ``u`` of the quantized product
``p``'s result and, when ``u`` is an elementwise tensor op or a one-result
``tensor.fused_elementwise`` of the same shape whose other operands broadcast
*into* that shape, rebuilds ``p`` at ``u``'s position with ``u``'s computation
appended to its body (``u``'s other operands become epilogue operands).

Invariants: the rebuilt op computes exactly what ``p`` then ``u`` computed (the
body ops are the scalar twins of ``u``'s ops, in order); ``tensor.quantize`` is
never absorbed here (``fold_requantize`` turns it into the requantize tail);
every operand of the new op is defined before ``u``, where it is placed.
"""

from __future__ import annotations

from ..ir.core import Operation, Value
from ..ir.ops import op_class
from ..ir.ops_fused import new_body
from ..ir.types import ScalarType, TensorType
from ..passes.fusion_body import emit, inlinable_constant, is_fusible
from .epilogue import finish, splice_body


def fits_into(t: object, shape: tuple) -> bool:
    """``t`` broadcasts into ``shape`` without growing it (a dynamic extent matches itself)."""
    if not isinstance(t, TensorType):
        return True
    if t.rank > len(shape):
        return False
    return all(d == 1 or d == s for d, s in zip(t.shape, shape[len(shape) - t.rank:], strict=True))


def _absorbable(p: Operation, u: Operation) -> bool:
    t = p.results[0].type
    if u.parent is not p.parent or len(u.results) != 1 or u.name == "tensor.quantize":
        return False
    if not (is_fusible(u) or (u.name == "tensor.fused_elementwise" and len(u.regions) == 1)):
        return False
    if not isinstance(t, TensorType) or u.results[0].type.shape != t.shape:  # type: ignore[union-attr]
        return False
    others = [v for v in u.operands if v is not p.results[0]]
    return all(fits_into(v.type, t.shape) for v in others)


def absorb_one(p: Operation) -> Operation | None:
    """``p`` with its single user absorbed (the new op), or None when it cannot be."""
    r = p.results[0]
    if len(r.uses) != 1:
        return None
    u = r.uses[0].owner
    if not _absorbable(p, u):
        return None
    rank = r.type.rank  # type: ignore[union-attr]
    extra: list[Value] = []
    for v in u.operands:
        if v is r or any(v is e for e in extra):
            continue
        if u.name != "tensor.fused_elementwise" and inlinable_constant(v, rank):
            continue
        extra.append(v)
    old = p.regions[0].blocks[0]
    region, body = new_body([*old.arg_types, *(ScalarType(v.type.dtype) for v in extra)])  # type: ignore[union-attr]
    n_old = len(old.args)
    (y,) = splice_body(body, old, body.args[0], body.args[1:n_old])
    arg_of = {id(r): y, **{id(v): a for v, a in zip(extra, body.args[n_old:], strict=True)}}
    if u.name == "tensor.fused_elementwise":
        ub = u.regions[0].blocks[0]
        outs = splice_body(body, ub, arg_of[id(u.operands[0])],
                           [arg_of[id(v)] for v in u.operands[1:]])
    else:
        mapping = dict(arg_of)
        emit(body, [u], mapping)
        outs = [mapping[id(u.results[0])]]
    finish(body, outs)
    attrs = dict(p.attributes)
    new = op_class(p.name)([*p.operands, *extra], [u.results[0].type], attrs, (), [region],
                           [u.results[0].name_hint])
    new.loc = p.loc
    u.insert_before(new)
    u.results[0].replace_all_uses_with(new.results[0])
    u.erase()
    p.erase()
    return new


def absorb(p: Operation, limit: int = 16) -> tuple[Operation, int]:
    """Absorb users while possible (at most ``limit``); the final op and the count."""
    n = 0
    while n < limit:
        nxt = absorb_one(p)
        if nxt is None:
            break
        p, n = nxt, n + 1
    return p, n
