"""Symbolic extents: which run-time extents are provably equal.

Fusion changes where broadcasting happens: an epilogue operand of a fused
matmul broadcasts *into* the product, and the operands of a ``fused_reduce``
*form* its iteration shape. That is only the unfused program's meaning when
every dynamic extent involved is known to equal the one it is matched with, so
fusion asks this analysis instead of comparing ``?`` with ``?``.

An extent is an ``int`` (static) or a *symbol*: a hashable key naming where a
run-time extent comes from:
- ``("dim", name)``: a kernel parameter axis whose symbolic dim ``name`` the
  function attribute ``arg_dims`` records (``arg_dims = [["M", "K"], ["K"]]``,
  one list per parameter, ``""`` for an unnamed axis; the caller guarantees that
  axes of one name agree, as ``wiadsl.jit``'s binding checks);
- ``("arg", arg, axis)``: axis ``axis`` of a parameter without a name;
- ``("idx", value)``: the run-time value of an ``index`` SSA value (a
  ``tensor.dim`` resolves to the extent of its operand's axis instead);
- ``("opaque", value, axis)``: anything else - equal only to itself.

Invariant (soundness): two extents that compare equal are equal at run time on
every execution; unequal keys say nothing. Keys hold the ``Value`` objects
themselves (identity equality), never ``id()`` numbers that could be reused.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..ir.core import BlockArgument, Operation, OpResult, Trait, Value
from ..ir.ops_arith import keeps_value
from ..ir.ops_index import AxisSpec
from ..ir.types import TensorType

Extent = Any  # int | tuple (a symbol)

#: broadcasting ops that are not TensorElementwiseOp (no ELEMENTWISE trait)
BROADCASTING = {"tensor.cmpf", "tensor.cmpi", "tensor.select", "tensor.cast", "tensor.quantize",
                 "tensor.dequantize", "tensor.fake_quant", "tensor.fused_elementwise"}
_MAKES = {"tensor.reshape", "tensor.broadcast_to", "tensor.full", "tensor.arange"}
_MAX_DEPTH = 400


def fits(extents: Sequence[Extent], target: Sequence[Extent]) -> bool:
    """``extents`` broadcast into ``target`` (right-aligned) without growing it, on
    every execution: each extent is a static 1 or provably equal to its target."""
    if len(extents) > len(target):
        return False
    tail = target[len(target) - len(extents):]
    return all(e == 1 or _same(e, t) for e, t in zip(extents, tail, strict=True))


def _same(a: Extent, b: Extent) -> bool:
    if isinstance(a, int) or isinstance(b, int):
        return isinstance(a, int) and isinstance(b, int) and a == b
    return a == b


class Extents:
    """Extent symbols of values, computed on demand and memoized per value.

    Create one per query batch; the memo keeps the values it describes alive,
    and IR changes after a query are not reflected in memoized answers."""

    def __init__(self) -> None:
        self._memo: dict[int, tuple[Value, tuple[Extent, ...]]] = {}
        self._depth = 0

    # ------------------------------------------------------------- queries

    def of(self, v: Value) -> tuple[Extent, ...]:
        """One extent per axis of ``v`` (``()`` for scalars and index values)."""
        t = v.type
        if not isinstance(t, TensorType):
            return ()
        hit = self._memo.get(id(v))
        if hit is not None and hit[0] is v:
            return hit[1]
        if self._depth > _MAX_DEPTH:
            return tuple(d if d is not None else ("opaque", v, i) for i, d in enumerate(t.shape))
        self._depth += 1
        try:
            raw = self._compute(v, t)
        finally:
            self._depth -= 1
        out = tuple(d if d is not None else (raw[i] if raw is not None else ("opaque", v, i))
                    for i, d in enumerate(t.shape))
        self._memo[id(v)] = (v, out)
        return out

    def index(self, v: Value) -> Extent:
        """The extent an ``index`` value stands for (a constant, a dim, or itself)."""
        if isinstance(v, OpResult):
            op = v.op
            if op.name == "tensor.dim":
                ext = self.of(op.operands[0])
                return ext[op.attributes["axis"] % len(ext)]
            if op.name == "arith.constant":
                return int(op.attributes["value"])
            if keeps_value(op):
                return self.index(op.operands[0])
        return ("idx", v)

    def fits(self, v: Value, target: Sequence[Extent]) -> bool:
        """``v`` (a scalar, or a tensor) broadcasts into ``target`` without growing it."""
        return fits(self.of(v), target)

    # ------------------------------------------------------------ per kind

    def _compute(self, v: Value, t: TensorType) -> list[Extent] | None:
        if isinstance(v, BlockArgument):
            return self._argument(v, t)
        assert isinstance(v, OpResult)
        op = v.op
        if Trait.ELEMENTWISE in op.traits or op.name in BROADCASTING:
            return self._broadcast([self.of(x) for x in op.operands], t.rank, v)
        if op.name.startswith("tensor.reduce_") or op.name in ("tensor.argmax", "tensor.argmin"):
            return self._reduced(self.of(op.operands[0]), op, t.rank)
        if op.name == "tensor.fused_reduce":
            it = self._broadcast([self.of(x) for x in op.operands], None, v)
            n = len(op.attributes.get("kinds", [None]))
            return self._reduced(tuple(it), op, t.rank) if v.index < n else it
        if op.name in ("tensor.matmul", "tensor.fused_matmul"):
            return self._matmul(self.of(op.operands[0]), self.of(op.operands[1]), t.rank, v)
        if op.name in ("tensor.conv2d", "tensor.fused_conv2d"):
            x, w = self.of(op.operands[0]), self.of(op.operands[1])
            return [x[0], w[0], ("opaque", v, 2), ("opaque", v, 3)]
        if op.name in ("tensor.depthwise_conv2d", "tensor.fused_depthwise_conv2d"):
            x = self.of(op.operands[0])
            return [x[0], x[1], ("opaque", v, 2), ("opaque", v, 3)]
        if op.name in ("tensor.insert_slice", "tensor.insert"):  # the updated destination
            return list(self.of(op.operands[1]))
        if op.name == "tensor.extract_slice":
            return self._sliced(self.of(op.operands[0]), op, v)
        if op.name == "tensor.transpose":
            x = self.of(op.operands[0])
            return [x[p] for p in op.attributes["perm"]]
        if op.name in _MAKES:
            n_dyn = sum(d is None for d in t.shape)
            dyn = iter(self.index(x) for x in op.operands[len(op.operands) - n_dyn:])
            return [d if d is not None else next(dyn) for d in t.shape]
        return None

    @staticmethod
    def _sliced(src: tuple[Extent, ...], op: Operation, v: Value) -> list[Extent] | None:
        """An axis an ``extract_slice`` keeps whole (``:``) keeps its extent; an index
        drops its axis; any other slice's extent is opaque."""
        raw = op.attributes.get("layout")
        specs = [AxisSpec.parse(x) for x in raw] if isinstance(raw, list) else [None]
        if None in specs or len(specs) > len(src):
            return None
        whole = AxisSpec(False)
        out: list[Extent] = []
        for axis, extent in enumerate(src):
            spec = specs[axis] if axis < len(specs) else whole
            if spec.is_index:  # type: ignore[union-attr]
                continue
            out.append(extent if spec == whole else ("opaque", v, len(out)))
        return out

    def _argument(self, arg: BlockArgument, t: TensorType) -> list[Extent] | None:
        region = arg.block.parent
        func = region.parent if region is not None else None
        attrs = getattr(func, "attributes", None)
        if attrs is None or getattr(func, "entry", None) is not arg.block:
            return None  # a loop-carried or body argument: opaque
        names = attrs.get("arg_dims")
        mine = names[arg.index] if isinstance(names, list) and arg.index < len(names) else None
        out: list[Extent] = []
        for axis in range(t.rank):
            name = mine[axis] if isinstance(mine, list) and axis < len(mine) else None
            out.append(("dim", name) if isinstance(name, str) and name else ("arg", arg, axis))
        return out

    @staticmethod
    def _broadcast(shapes: list[tuple[Extent, ...]], rank: int | None, v: Value) -> list[Extent]:
        """NumPy broadcasting over symbols: static 1s drop out; one remaining
        symbol (or a static extent > 1) is the result, several are opaque."""
        rank = max((len(s) for s in shapes), default=0) if rank is None else rank
        out: list[Extent] = []
        for axis in range(rank):
            cands = []
            for s in shapes:
                k = len(s) - rank + axis
                if k >= 0 and s[k] != 1:
                    cands.append(s[k])
            statics = [c for c in cands if isinstance(c, int)]
            if statics:
                out.append(max(statics))
            elif not cands:
                out.append(1)
            elif all(_same(c, cands[0]) for c in cands):
                out.append(cands[0])
            else:
                out.append(("opaque", v, axis))
        return out

    @staticmethod
    def _reduced(x: tuple[Extent, ...], op: Operation, rank: int) -> list[Extent] | None:
        axes = op.attributes.get("axes")
        if axes is None:
            axes = [op.attributes["axis"]] if "axis" in op.attributes else list(range(len(x)))
        axes = {a % len(x) for a in axes} if x else set()
        keep = bool(op.attributes.get("keepdims", False))
        out = [1 if i in axes else e for i, e in enumerate(x) if keep or i not in axes]
        return out if len(out) == rank else None

    def _matmul(self, a: tuple[Extent, ...], b: tuple[Extent, ...], rank: int, v: Value
                ) -> list[Extent] | None:
        if len(a) == 1:
            out = [*b[:-2], b[-1]] if len(b) >= 2 else []
        elif len(b) == 1:
            out = list(a[:-1])
        else:
            batch = self._broadcast([a[:-2], b[:-2]], None, v)
            out = [*batch, a[-2], b[-1]]
        return out if len(out) == rank else None
