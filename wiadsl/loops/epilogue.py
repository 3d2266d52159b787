"""A fused product's epilogue applied to a range of output pixels right after the
product wrote them (convolutions: loops/conv.py per pixel chunk, loops/depthwise.py
per channel plane), while they are still in cache, instead of as a pass over the
whole output.

    for p in [p_lo, p_hi):  out[base + p] = body(raw[base + p], operands at (n, c, p))

``p`` is the flat output pixel ``oh * wo + ow`` of one (image, channel) plane.
When every operand is per-channel or laid out like the planes (``plane_flat``) the
loop indexes them by ``p`` directly (one vectorizable loop); otherwise each pixel
is split into (oh, ow) first.

Invariant: each element of ``out`` in the range is written once, from the same
element of ``raw`` (which may be ``out`` itself: read before written).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..ir.core import Block, Operation, Value
from ..ir.types import ScalarType
from ..records import record
from .builder import LoopBuilder, const_value
from .expr import Expr, Leaf, MapExpr, ScalarExpr, broadcast_ivs, same_extents
from .scalar import clone_body


def _is(v: Value, n: int) -> bool:
    return const_value(v) == n


def plane_flat(e: Expr, ho: int, wo: int) -> bool:
    """Whether ``e`` may be read at ivs (n, c, 0, p) for the flat pixel p of an
    ``ho x wo`` plane: its last two axes broadcast (extent 1) or are the plane's, with
    contiguous strides (nested expressions: all their leaves)."""
    if isinstance(e, ScalarExpr) or e.rank == 0:
        return True
    tail = e.extents[-2:]
    if len(tail) == 2 and all(_is(x, 1) for x in tail):
        return True
    if e.rank < 2 or not (_is(tail[0], ho) and _is(tail[1], wo)):
        return False
    if isinstance(e, Leaf):
        return _is(e.strides[-1], 1) and _is(e.strides[-2], wo)
    if isinstance(e, MapExpr):
        # a map reads its operands through broadcast_ivs, which sends an axis of
        # extent 1 to index 0: a plane one pixel wide (wo == 1 < ho) would read its
        # first pixel for every p (fuzz seed 5500000000512: reduce_sum of an i32[4, 1],
        # cast to i64, summed the first element four times)
        return (wo != 1 or ho == 1) and all(plane_flat(o, ho, wo) for o in e.operands)
    return False


@record
class Epilogue:
    """A fused body and its operands (beyond the accumulator), broadcast to ``extents``
    (the product's [n, c, ho, wo])."""

    body: Block
    operands: list[Expr]
    extents: list[Value]
    shape: tuple[int, int]  # (ho, wo), static

    @property
    def flat(self) -> bool:
        return all(plane_flat(e, *self.shape) for e in self.operands)

    def apply(self, lb: LoopBuilder, raw: Value, out: Value, n: Value, c: Value, base: Value,
              lo: Value, hi: Value) -> None:
        """``out[base + p] = body(raw[base + p], ...)`` for ``p`` in [lo, hi) of plane (n, c)."""
        wo = self.shape[1]
        flat = self.flat

        def pixel(lb2: LoopBuilder, p: Value, _: list[Value]) -> list[Value]:
            at: Sequence[Value] = [n, c, lb2.idx(0), p] if flat else \
                [n, c, lb2.floordiv(p, lb2.idx(wo)), lb2.mod(p, lb2.idx(wo))]
            args = [e.at(lb2, broadcast_ivs(lb2, e.extents, at, self.extents)) for e in self.operands]
            off = lb2.add(base, p)
            lb2.store(clone_body(lb2, self.body, [lb2.load(raw, off), *args])[0], out, off)
            return []
        lb.loop(lo, hi, pixel)


@record
class ChannelClamp:
    """An epilogue that is ``clamp(raw * scale[c] + shift[c] + residual[n, c, p], lo, hi)``
    of output channel c and pixel p: what ``loop.conv2d``'s own epilogue (``affine``,
    ``clamp``) computes as its micro-kernels store, with no pass over the output.
    ``scale`` / ``shift``: None, or (buffer, offset, step): channel c's value at ``offset
    + c * step``; ``residual``: None, or (buffer, offset) of a tensor laid out as the
    output (element (n, c, p) at ``offset + (n * C + c) * HO * WO + p``); the bounds
    -inf / inf where the body has none."""

    scale: tuple[Value, Value, Value] | None
    shift: tuple[Value, Value, Value] | None
    residual: tuple[Value, Value] | None
    lo: float
    hi: float


#: the steps of a ``ChannelClamp`` body, in the order they may appear (each at most once)
_STAGES = ("scale", "shift", "residual", "lo", "hi")


def channel_clamp(lb: LoopBuilder, epi: Epilogue) -> ChannelClamp | None:
    """``epi`` as a ``ChannelClamp``, if its body is the chain ``raw [* s] [+ t] [+ r]
    [max lo] [min hi]``, s and t operands that vary with the channel only, r one laid
    out as the output, the bounds constants (not NaN) after the value (``max(x, 0)``:
    ``max(0, x)`` orders -0.0 and 0.0 the other way); else None. The order is the
    body's rounding order: ``raw + r + t`` is not ``raw + t + r``."""
    block = epi.body
    value: Value = block.args[0]
    operands = {id(a): e for a, e in zip(block.args[1:], epi.operands, strict=True)}
    found: dict[str, object] = {}
    stage = 0
    for op in block.ops[:-1]:
        if op.name == "arith.constant":
            continue
        if len(op.operands) != 2 or all(v is not value for v in op.operands):
            return None
        step, part = _step(lb, op, value, operands, epi.extents)
        if step is None or _STAGES.index(step) < stage:
            return None
        stage = _STAGES.index(step) + 1
        found[step] = part
        value = op.results[0]
    last = block.ops[-1]
    if last.name != "tensor.yield" or list(last.operands) != [value]:
        return None
    return ChannelClamp(found.get("scale"), found.get("shift"), found.get("residual"),  # type: ignore[arg-type]
                        found.get("lo", -math.inf), found.get("hi", math.inf))  # type: ignore[arg-type]


def _step(lb: LoopBuilder, op: Operation, value: Value, operands: dict[int, Expr],
          extents: list[Value]) -> tuple[str | None, object]:
    """Which step of the chain ``op`` (of ``value`` and one other operand) is, and its
    part: the per-channel operand, the residual's (buffer, offset) or the bound; None
    for an op that is none of them."""
    other = op.operands[1] if op.operands[0] is value else op.operands[0]
    if op.name in ("arith.max", "arith.min"):
        bound = const_value(other)
        if op.operands[1] is not other or not isinstance(bound, float) or bound != bound:
            return None, None
        return ("lo" if op.name == "arith.max" else "hi"), bound
    e = operands.get(id(other))
    if op.name not in ("arith.mul", "arith.add") or e is None or ScalarType(e.dtype) != value.type:
        return None, None
    per_channel = _per_channel(lb, e, extents)
    if per_channel is not None:
        return ("scale" if op.name == "arith.mul" else "shift"), per_channel
    if op.name == "arith.add" and isinstance(e, Leaf) and e.is_flat(extents):
        return "residual", (e.buf, e.offset)
    return None, None


def _per_channel(lb: LoopBuilder, e: Expr, extents: list[Value]) -> tuple[Value, Value, Value] | None:
    """(buffer, offset, step) of an operand that, broadcast to ``extents`` (n, c, ho, wo),
    varies with c only; None for any other."""
    if not isinstance(e, Leaf) or e.rank > len(extents):
        return None
    axis = 1 - (len(extents) - e.rank)  # c's axis in the operand (right-aligned)
    for k, extent in enumerate(e.extents):
        if k != axis and const_value(extent) != 1:
            return None
    if axis < 0 or const_value(e.extents[axis]) == 1:
        return e.buf, e.offset, lb.idx(0)
    if not same_extents([e.extents[axis]], [extents[1]]):
        return None
    return e.buf, e.offset, e.strides[axis]
