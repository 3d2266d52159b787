"""Canonicalization patterns, registered per op in ``pattern.OWNED``.

Every pattern is exact (bit-for-bit the same results, NaN and -0.0 included):
float ``x + 0.0`` is *not* ``x`` (it turns -0.0 into 0.0), so only ``x - 0.0``,
``x + -0.0``, ``x * 1`` and ``x / 1`` simplify for floats; integer identities are
all exact. Patterns never change a result type: an identity that would drop a
broadcast (``tensor<4xf32> + tensor<3x4xf32>`` of zeros) does not fire.
Shape and layout patterns live in ``canonical_shape``; ``_register`` installs both.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..ir.core import Operation, Trait, Value
from ..ir.ops import constant_of, create_op
from ..ir.types import IndexType, IRType, TensorType
from .canonical_shape import (
    BroadcastNoop,
    CastChain,
    ReshapeChain,
    ScalarBroadcastOperand,
    TransposeChain,
    TransposeThroughElementwise,
    _identity,
)
from .pattern import OWNED, PatternRewriter, RewritePattern
from .utils import producer

__all__ = ["AlgebraicIdentity", "BroadcastNoop", "CastChain", "ConstantCondBranch", "InfCompare",
           "Involution", "ReshapeChain", "ScalarBroadcastOperand", "SelectSimplify",
           "TransposeChain", "TransposeThroughElementwise", "splat"]


def splat(value: Value) -> Any | None:
    """The one value of a constant (scalar, or tensor whose elements are all equal)."""
    c = constant_of(value)
    if c is None:
        return None
    arr = np.asarray(c)
    if arr.size == 0:
        return None
    first = arr.reshape(-1)[0]
    return first if np.all(arr == first) or (arr.dtype.kind == "f" and np.all(np.isnan(arr)) and np.isnan(first)) else None


def is_neg_zero(x: Any) -> bool:
    return x is not None and float(x) == 0.0 and math.copysign(1.0, float(x)) < 0


def is_float(t: IRType) -> bool:
    return not isinstance(t, IndexType) and t.dtype.is_float


class AlgebraicIdentity(RewritePattern):
    """x+0, 0+x, x-0, x*1, 1*x, x/1 -> x; int x-x -> 0, int x*0 -> 0."""

    def __init__(self, fn: str):
        self.fn = fn

    @property
    def label(self) -> str:
        return f"identity-{self.fn}"

    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> bool:
        a, b = op.operands
        ca, cb = splat(a), splat(b)
        flt = is_float(op.result.type)
        fn = self.fn
        if fn == "add":
            if cb is not None and cb == 0 and (not flt or is_neg_zero(cb)):
                return _identity(op, rw, a)
            if ca is not None and ca == 0 and (not flt or is_neg_zero(ca)):
                return _identity(op, rw, b)
        elif fn == "sub":
            if cb is not None and cb == 0 and (not flt or not is_neg_zero(cb)):
                return _identity(op, rw, a)
            if a is b and not flt and op.result.type.__class__ is not TensorType:
                if isinstance(op.result.type, IndexType) or op.result.type.dtype.kind == 1:
                    rw.replace_op(op, [rw.constant(op, 0, op.result.type)])
                    return True
        elif fn == "mul":
            if cb is not None and cb == 1:
                return _identity(op, rw, a)
            if ca is not None and ca == 1:
                return _identity(op, rw, b)
        elif fn == "div":
            if cb is not None and cb == 1:
                return _identity(op, rw, a)
        return False


class Involution(RewritePattern):
    """neg(neg(x)) -> x, not(not(x)) -> x."""

    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> bool:
        inner = producer(op.operands[0])
        if inner is None or inner.name != op.name:
            return False
        return _identity(op, rw, inner.operands[0])


class ConstantCondBranch(RewritePattern):
    """cond_br on a constant -> br; cond_br with equal edges -> br."""

    root = "cf.cond_br"

    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> bool:
        c = constant_of(op.operands[0])
        t, f = op.successors
        if c is None and not (t.block is f.block and t.args == f.args):
            return False
        succ = t if c is None or bool(c) else f
        br = create_op("cf.br", successors=[(succ.block, list(succ.args))])
        rw.insert_before(op, br)
        rw.erase_op(op)
        return True


class SelectSimplify(RewritePattern):
    """select(c, x, x) -> x; select(const, x, y) -> x or y (types permitting)."""

    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> bool:
        c, x, y = op.operands
        if x is y:
            return _identity(op, rw, x)
        cv = splat(c)
        if cv is None:
            return False
        return _identity(op, rw, x if bool(cv) else y)


class InfCompare(RewritePattern):
    """cmpf ogt x, +inf and cmpf olt x, -inf are false for every x (NaN too)."""

    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> bool:
        pred, b = op.attributes.get("predicate"), splat(op.operands[1])
        if b is None or not np.isinf(b):
            return False
        t = op.result.type
        if isinstance(t, TensorType) and not t.is_static:  # no constant of a dynamic shape
            return False
        if (pred == "ogt" and b > 0) or (pred == "olt" and b < 0):
            value = np.zeros(getattr(op.result.type, "shape", ()), dtype=bool) \
                if isinstance(op.result.type, TensorType) else False
            rw.replace_op(op, [rw.constant(op, value, op.result.type)])
            return True
        return False


def _register() -> None:
    for dialect in ("arith", "tensor"):
        for fn in ("add", "sub", "mul", "div"):
            OWNED.setdefault(f"{dialect}.{fn}", []).append(AlgebraicIdentity(fn))
        for fn in ("neg", "not"):
            OWNED.setdefault(f"{dialect}.{fn}", []).append(Involution())
        OWNED.setdefault(f"{dialect}.cast", []).append(CastChain())
        OWNED.setdefault(f"{dialect}.select", []).append(SelectSimplify())
        OWNED.setdefault(f"{dialect}.cmpf", []).append(InfCompare())
    for p in (TransposeChain(), TransposeThroughElementwise(), ReshapeChain(), BroadcastNoop(), ConstantCondBranch()):
        OWNED.setdefault(p.root, []).append(p)
    from ..ir.ops import OPS
    for name, cls in OPS.items():
        if name.startswith("tensor.") and (Trait.ELEMENTWISE in cls.traits or name == "tensor.select"):
            OWNED.setdefault(name, []).append(ScalarBroadcastOperand())


_register()
