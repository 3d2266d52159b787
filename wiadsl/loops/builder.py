"""``LoopBuilder``: emits loop-level IR (CFG loops, index arithmetic, memory ops).

Invariants:
- The insertion point is always the end of ``self.block``, a block without a
  terminator yet; emitting a loop moves it to the loop's exit block.
- Index arithmetic on two known constants folds in Python, so shape-specialized
  kernels come out with static extents, static trip counts and static ``alloc``
  types (the LLVM level then sees constants, not loads).
- A loop is ``br ^header(lo, inits)``; ``^header(%iv, %iters)`` compares and
  ``cond_br``s to ``^body`` or ``^exit(%iters)``; ``^body`` ends in the back edge.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..dtypes import DType
from ..ir.builder import Builder
from ..ir.core import Block, OpResult, Value
from ..ir.module import FuncOp
from ..ir.ops_arith import keeps_value
from ..ir.types import INDEX, IndexType, IRType, ScalarType, TensorType

I1 = ScalarType(DType.BOOL)
LoopBody = Callable[["LoopBuilder", Value, list[Value]], Sequence[Value]]


def const_value(v: Value) -> int | float | bool | None:
    """The Python value of an ``arith.constant``, also through casts between ``index``
    and ``i64`` (which keep the value: a kernel's batch extent, static once the shapes
    are, reaches the loops as ``cast(cast(constant))``), else None."""
    while isinstance(v, OpResult) and keeps_value(v.op):
        v = v.op.operands[0]
    if isinstance(v, OpResult) and v.op.name == "arith.constant":
        return v.op.attributes["value"]
    return None



class LoopBuilder:
    """Builds one loop-level function; tracks the current block."""

    def __init__(self, func: FuncOp, block: Block):
        self.func = func
        self.block = block
        self.b = Builder(block)
        self._consts: dict[tuple[str, object], Value] = {}

    # ------------------------------------------------------------- placement

    def move_to(self, block: Block) -> None:
        self.block = block
        self.b.set_insertion_point_to_end(block)
        self._consts = {}  # constants must dominate their uses: one cache per block

    def new_block(self, types: Sequence[IRType] = (), name: str | None = None) -> Block:
        return self.func.add_block(list(types), None, name)

    # ------------------------------------------------------------- scalars

    def const(self, value: int | float | bool, t: IRType) -> Value:
        key = (str(t), value if not isinstance(value, float) else repr(value))
        if key not in self._consts:
            self._consts[key] = self.b.constant(value, t)
        return self._consts[key]

    def idx(self, n: int) -> Value:
        return self.const(int(n), INDEX)

    def op(self, name: str, operands: Sequence[Value], t: IRType, attrs: dict | None = None) -> Value:
        return self.b.value(name, list(operands), t, attrs)

    def _index_op(self, fn: str, a: Value, b: Value) -> Value:
        ca, cb = const_value(a), const_value(b)
        if ca is not None and cb is not None:
            return self.idx(_FOLD[fn](int(ca), int(cb)))
        if fn == "add" and ca == 0 or fn == "mul" and ca == 1:
            return b
        if fn in ("add", "sub") and cb == 0 or fn in ("mul", "div") and cb == 1:
            return a
        if fn == "mul" and (ca == 0 or cb == 0):
            return self.idx(0)
        return self.op(f"arith.{fn}", [a, b], INDEX)

    def add(self, a: Value, b: Value) -> Value:
        return self._index_op("add", a, b)

    def sub(self, a: Value, b: Value) -> Value:
        return self._index_op("sub", a, b)

    def mul(self, a: Value, b: Value) -> Value:
        return self._index_op("mul", a, b)

    def floordiv(self, a: Value, b: Value) -> Value:
        return self._index_op("div", a, b)

    def mod(self, a: Value, b: Value) -> Value:
        return self._index_op("rem", a, b)

    def max(self, a: Value, b: Value) -> Value:
        return self._index_op("max", a, b)

    def min(self, a: Value, b: Value) -> Value:
        return self._index_op("min", a, b)

    def cmp(self, pred: str, a: Value, b: Value) -> Value:
        ca, cb = const_value(a), const_value(b)
        if ca is not None and cb is not None and a.type == b.type and isinstance(a.type, IndexType):
            return self.const(bool(_CMP[pred](int(ca), int(cb))), I1)
        return self.b.value("arith.cmpi", [a, b], I1, {"predicate": pred})

    def select(self, c: Value, a: Value, b: Value) -> Value:
        cc = const_value(c)
        if cc is not None:
            return a if cc else b
        return self.op("arith.select", [c, a, b], a.type)

    def and_(self, a: Value, b: Value) -> Value:
        ca, cb = const_value(a), const_value(b)
        if ca is False or cb is False:
            return self.const(False, I1)
        if ca is True:
            return b
        if cb is True:
            return a
        return self.op("arith.and", [a, b], I1)

    def or_(self, a: Value, b: Value) -> Value:
        ca, cb = const_value(a), const_value(b)
        if ca is True or cb is True:  # a check that always holds disappears (check())
            return self.const(True, I1)
        if ca is False:
            return b
        if cb is False:
            return a
        return self.op("arith.or", [a, b], I1)

    def to_index(self, v: Value) -> Value:
        if isinstance(v.type, IndexType):
            return v
        c = const_value(v)
        if c is not None:
            return self.idx(int(c))
        return self.op("arith.cast", [v], INDEX)

    # ------------------------------------------------------------- memory

    def dim(self, buf: Value, axis: int) -> Value:
        t = buf.type
        assert isinstance(t, TensorType)
        if t.shape[axis] is not None:
            return self.idx(t.shape[axis])
        if isinstance(buf, OpResult) and buf.op.name == "loop.alloc":
            # the extent the buffer was made with: the same value, so lowerings see
            # the two as equal (no run-time broadcast select, shape-generic code)
            return buf.op.operands[sum(d is None for d in t.shape[:axis])]
        return self.b.value("tensor.dim", [buf], INDEX, {"axis": axis})

    def dims(self, buf: Value) -> list[Value]:
        t = buf.type
        return [self.dim(buf, a) for a in range(t.rank)] if isinstance(t, TensorType) else []

    def alloc(self, dtype: DType, extents: Sequence[Value]) -> Value:
        static = [const_value(e) for e in extents]
        t = TensorType(dtype, tuple(None if s is None else int(s) for s in static))
        dyn = [e for e, s in zip(extents, static, strict=True) if s is None]
        return self.op("loop.alloc", dyn, t)

    def load(self, buf: Value, offset: Value) -> Value:
        return self.op("loop.load", [buf, offset], ScalarType(buf.type.dtype))  # type: ignore[union-attr]

    def store(self, value: Value, buf: Value, offset: Value) -> None:
        self.b.create("loop.store", [value, buf, offset])

    def check(self, ok: Value, message: str) -> None:
        if const_value(ok) is True:
            return
        self.b.create("loop.check", [ok], attributes={"message": message})

    def numel(self, extents: Sequence[Value]) -> Value:
        n = self.idx(1)
        for e in extents:
            n = self.mul(n, e)
        return n

    # -------------------------------------------------------------- loops

    def loop(self, lo: Value, hi: Value, body: LoopBody, inits: Sequence[Value] = (),
             step: int = 1, parallel: bool = False) -> list[Value]:
        """``for iv in range(lo, hi, step)`` carrying ``inits``; returns the final values.

        ``body(lb, iv, iters)`` emits the body at ``lb``'s insertion point and
        returns the next iteration values. A trip count known to be 0 emits nothing;
        one known to be 1 emits the body once, with ``iv`` = ``lo``, and no loop.
        ``parallel`` (only without ``inits``) marks the header's ``cond_br`` with the
        unit attribute ``parallel``: a promise that iterations write disjoint memory
        and read nothing another iteration writes (the ``parallelize`` pass relies on it).
        """
        assert not (parallel and inits), "a parallel loop carries no values"
        clo, chi = const_value(lo), const_value(hi)
        if clo is not None and chi is not None and int(chi) <= int(clo):
            return list(inits)
        if clo is not None and chi is not None and int(chi) - int(clo) <= step:
            # one iteration: its body, inline (a loop costs LLVM ~1-5 ms of optimization
            # whatever its trip count: a batch of one image, a 3x3 kernel's padding column)
            return list(body(self, lo, list(inits)))
        types = [INDEX, *(v.type for v in inits)]
        header = self.new_block(types, "loop")
        body_block = self.new_block((), "body")
        exit_block = self.new_block([v.type for v in inits], "done")
        self.b.br(header, [lo, *inits])
        self.move_to(header)
        iv, iters = header.args[0], list(header.args[1:])
        iv.name_hint = "i"
        branch = self.b.cond_br(self.cmp("slt", iv, hi), body_block, [], exit_block, iters)
        if parallel:
            branch.attributes["parallel"] = True
        self.move_to(body_block)
        nexts = list(body(self, iv, iters))
        self.b.br(header, [self.add(iv, self.idx(step)), *nexts])
        self.move_to(exit_block)
        return list(exit_block.args)

    def nest(self, extents: Sequence[Value], body: Callable[[LoopBuilder, list[Value]], None],
             parallel: bool = False) -> None:
        """A perfect nest over ``extents`` (outermost first); ``body(lb, ivs)``.
        ``parallel`` marks the outermost loop that is not of the static extent 1 (see
        ``loop``): a batch of one image splits over its channels, not over nothing."""
        split = next((k for k, e in enumerate(extents) if const_value(e) != 1), 0)

        def level(lb: LoopBuilder, ivs: list[Value], rest: Sequence[Value]) -> None:
            if not rest:
                body(lb, ivs)
                return
            lb.loop(lb.idx(0), rest[0], lambda lb2, iv, _: (level(lb2, [*ivs, iv], rest[1:]), [])[1],
                    parallel=parallel and len(ivs) == split)
        level(self, [], list(extents))

    def if_then(self, cond: Value, then: Callable[[LoopBuilder], None]) -> None:
        """Run ``then`` only when ``cond`` holds (no values flow out)."""
        c = const_value(cond)
        if c is False:
            return
        if c is True:
            then(self)
            return
        then_block, join = self.new_block((), "then"), self.new_block((), "join")
        self.b.cond_br(cond, then_block, [], join, [])
        self.move_to(then_block)
        then(self)
        self.b.br(join, [])
        self.move_to(join)

    def linear(self, ivs: Sequence[Value], strides: Sequence[Value]) -> Value:
        off = self.idx(0)
        for i, s in zip(ivs, strides, strict=True):
            off = self.add(off, self.mul(i, s))
        return off


def contiguous_strides(lb: LoopBuilder, extents: Sequence[Value]) -> list[Value]:
    """C-order strides of a buffer with ``extents``."""
    strides, s = [], lb.idx(1)
    for e in reversed(extents):
        strides.append(s)
        s = lb.mul(s, e)
    return strides[::-1]


def _floordiv(a: int, b: int) -> int:
    return 0 if b == 0 else a // b


def _mod(a: int, b: int) -> int:
    return 0 if b == 0 else a % b


_FOLD: dict[str, Callable[[int, int], int]] = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": _floordiv, "rem": _mod, "max": max, "min": min,
}
_CMP: dict[str, Callable[[int, int], bool]] = {
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "slt": lambda a, b: a < b,
    "sle": lambda a, b: a <= b, "sgt": lambda a, b: a > b, "sge": lambda a, b: a >= b,
}
