"""Tensor level -> loop level: every function of a module, op by op, table-driven.

Invariants:
- The result is a new module; the input is not modified. Function signatures,
  names and attributes are kept (tensor types now name buffers).
- Each tensor op is lowered by the entry for its name in ``LOWERINGS``; an op
  without one is an error (never skipped).
- A tensor result with exactly one user, later in the same block and with no
  possibly-in-place op (insert) in between, stays a deferred ``Expr`` and is
  computed inside its user's loop (fusion). Every other result is materialized
  into a buffer where it is defined.
- Buffers reached through block arguments are owned by that argument: a value
  that is not owned, or that stays live in the target, is copied on the edge.
  So ``insert``/``insert_slice`` may update their destination in place when it
  is owned and dead afterwards (loops that fill a tensor row by row stay O(n)).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..diagnostics import WiaIRError
from ..ir.core import Block, Operation, Value
from ..ir.module import FuncOp, ModuleOp
from ..ir.types import IRType, TensorType
from ..records import field, record
from .analysis import Liveness
from .builder import LoopBuilder, const_value, contiguous_strides
from .expr import Expr, Leaf, ScalarExpr, buffer_leaf
from .scalar import copy_leaf, materialize, op_message

Lowered = Expr | Value
Lowering = Callable[["Ctx", Operation], list[Lowered]]

#: op name -> lowering; filled by the lower_* modules (imported at the bottom).
LOWERINGS: dict[str, Lowering] = {}
#: Ops that may write their destination operand's buffer in place.
IN_PLACE_OPS = frozenset({"tensor.insert", "tensor.insert_slice"})


def lowering(*names: str) -> Callable[[Lowering], Lowering]:
    def register(fn: Lowering) -> Lowering:
        for n in names:
            LOWERINGS[n] = fn
        return fn
    return register


@record
class Ctx:
    """What an op lowering sees: the builder, the value map, the liveness facts."""

    lb: LoopBuilder
    live: Liveness
    env: dict[int, Lowered] = field(default_factory=dict)
    #: the function's frozen arguments (``lower_module``), by value id
    frozen: frozenset[int] = frozenset()
    #: bits of a row of the target's direct convolution tile (``lower_module``)
    panel_bits: int = 0

    def get(self, v: Value) -> Lowered:
        try:
            return self.env[id(v)]
        except KeyError:
            raise WiaIRError(f"value %{v.name_hint or '?'} used before it was lowered") from None

    def scalar(self, v: Value) -> Value:
        x = self.get(v)
        assert not isinstance(x, Expr), "a scalar operand lowered to a tensor"
        return x

    def operand(self, v: Value) -> Expr:
        """A tensor or scalar operand as an expression (scalars broadcast)."""
        x = self.get(v)
        return x if isinstance(x, Expr) else ScalarExpr(x)

    def buffer(self, v: Value) -> Leaf:
        """The operand in a whole buffer of its own (materialized once)."""
        leaf = materialize(self.lb, self.operand(v))
        self.env[id(v)] = leaf
        return leaf

    @staticmethod
    def message(op: Operation, text: str) -> str:
        return op_message(op, text)


def lower_module(module: ModuleOp, shapes: dict[str, Sequence[tuple[int, ...]]] | None = None,
                 frozen: dict[str, frozenset[int]] | None = None, panel_bits: int = 0) -> ModuleOp:
    """The loop-level module of ``module`` (every function lowered).

    ``shapes`` specializes functions to the concrete shapes of their tensor
    parameters (the types stay as declared; the extents become constants, so
    trip counts, allocations and offsets fold). ``frozen``: the positions of a
    function's parameters whose contents never change between calls (a model's
    weights), which some lowerings lay out for (loops/conv.py's ``rows``).
    ``panel_bits``: the bits of a row of the target's direct convolution tile (its
    output pixels' vector lanes; 0: not known), which loops/conv.py's ``rows_pays``
    weighs a small plane against.
    """
    shapes, frozen = shapes or {}, frozen or {}
    return ModuleOp([lower_func(f, shapes.get(f.name), frozen.get(f.name, frozenset()), panel_bits)
                     for f in module])


def lower_func(src: FuncOp, shapes: Sequence[tuple[int, ...]] | None = None,
               frozen: frozenset[int] = frozenset(), panel_bits: int = 0) -> FuncOp:
    dst = FuncOp(src.name, src.arg_types, src.result_types, src.arg_names,
                 dict(src.attributes), entry_name=src.entry.name_hint or "entry")
    blocks: dict[int, Block] = {id(src.entry): dst.entry}
    for b in src.blocks[1:]:
        blocks[id(b)] = dst.add_block(b.arg_types, [a.name_hint for a in b.args], b.name_hint)
    lb = LoopBuilder(dst, dst.entry)
    ctx = Ctx(lb, Liveness(src), frozen=frozenset(id(a) for i, a in enumerate(src.args) if i in frozen),
              panel_bits=panel_bits)
    for b in src.blocks:
        lb.move_to(blocks[id(b)])
        owned = b is not src.entry
        for a, d in zip(b.args, blocks[id(b)].args, strict=True):
            ctx.env[id(a)] = buffer_leaf(lb, d, owned) if isinstance(a.type, TensorType) else d
        if b is src.entry and shapes is not None:
            for a, shape in zip(b.args, shapes, strict=True):
                if isinstance(a.type, TensorType):
                    leaf = ctx.env[id(a)]
                    assert isinstance(leaf, Leaf)
                    # a None extent stays the parameter's run-time extent (tensor.dim)
                    leaf.extents = [old if n is None else lb.idx(n)
                                    for n, old in zip(shape, leaf.extents, strict=True)]
                    leaf.strides = contiguous_strides(lb, leaf.extents)
        if b is src.entry:
            _share_named_extents(ctx, b.args, src.attributes.get("arg_dims"))
        for i, op in enumerate(b.ops):
            lb.b.loc = op.loc  # loop-level ops keep the source location of their tensor op
            if op.is_terminator:
                _lower_terminator(ctx, op, blocks)
            else:
                _lower_op(ctx, op, i)
    return dst


def _share_named_extents(ctx: Ctx, args: Sequence[Value], arg_dims: object) -> None:
    """Parameter axes of one dim name (``arg_dims``, passes/extents.py) get one extent
    value: the first such axis's, after a check that each agrees with it (the jit's
    binding ensures it; the check keeps an AOT caller's bad extents out of the loops).
    Lowerings then see equal extents as the same value, so an elementwise op of two
    ``f32[N]`` inputs needs no run-time broadcast select in its loop."""
    if not isinstance(arg_dims, list):
        return
    lb = ctx.lb
    named: dict[str, Value] = {}
    for a, names in zip(args, arg_dims, strict=False):
        leaf = ctx.env.get(id(a))
        if not isinstance(leaf, Leaf) or not isinstance(names, list) or len(names) != len(leaf.extents):
            continue
        for axis, name in enumerate(names):
            if not (isinstance(name, str) and name):
                continue
            first = named.setdefault(name, leaf.extents[axis])
            mine = leaf.extents[axis]
            if mine is first or const_value(mine) is not None and const_value(mine) == const_value(first):
                continue
            lb.check(lb.cmp("eq", mine, first),
                     f"dim '{name}' has two different extents among the arguments")
            leaf.extents[axis] = first
        leaf.strides = contiguous_strides(lb, leaf.extents)


def _lower_op(ctx: Ctx, op: Operation, position: int) -> None:
    """Lower ``op``, the ``position``-th op of its block."""
    fn = LOWERINGS.get(op.name)
    if fn is None:
        raise WiaIRError(f"no loop-level lowering for '{op.name}'")
    results = fn(ctx, op)
    for r, x in zip(op.results, results, strict=True):
        if isinstance(x, Expr) and isinstance(r.type, TensorType) and not _may_defer(op, r, position):
            x = materialize(ctx.lb, x)
        ctx.env[id(r)] = x


def _may_defer(op: Operation, result: Value, position: int) -> bool:
    if len(result.uses) != 1:
        return False
    user = result.uses[0].owner
    block = op.parent
    if user.parent is not block or user.is_terminator or user.name == "func.call":
        return False
    assert block is not None
    # Searched from ``position`` on: a whole-block index() per op made long blocks quadratic.
    between = block.ops[position + 1:block.ops.index(user, position + 1)]
    return not any(o.name in IN_PLACE_OPS for o in between)


def _lower_terminator(ctx: Ctx, op: Operation, blocks: dict[int, Block]) -> None:
    lb = ctx.lb
    if op.name == "func.return":
        types = ctx.lb.func.result_types
        lb.b.ret([_materialized(ctx, v, t) for v, t in zip(op.operands, types, strict=True)])
        return
    succs = []
    for s in op.successors:
        args: list[Value] = []
        for v in s.args:
            if not isinstance(v.type, TensorType):
                args.append(ctx.scalar(v))
                continue
            leaf = ctx.buffer(v)
            shared = (not leaf.owned or id(v) in ctx.live.live_in[id(s.block)]
                      or sum(a is v for a in s.args) > 1)
            buf = copy_leaf(lb, leaf).buf if shared else leaf.buf
            args.append(retyped(lb, buf, s.block.args[len(args)].type))
        succs.append((blocks[id(s.block)], args))
    operands = [ctx.scalar(v) for v in op.operands]
    lb.b.create(op.name, operands, successors=succs)


def _materialized(ctx: Ctx, v: Value, want: IRType | None = None) -> Value:
    """A buffer (or scalar) for ``v``, retyped to ``want`` (default: v's own type)."""
    if not isinstance(v.type, TensorType):
        return ctx.scalar(v)
    return retyped(ctx.lb, ctx.buffer(v).buf, want or v.type)


def retyped(lb: LoopBuilder, buf: Value, want: IRType) -> Value:
    if buf.type == want:
        return buf
    return lb.op("loop.retype", [buf], want)


@lowering("func.call")
def _call(ctx: Ctx, op: Operation) -> list[Lowered]:
    args = [_materialized(ctx, v) for v in op.operands]
    new = ctx.lb.b.create("func.call", args, list(op.result_types), dict(op.attributes))
    # The callee may return one of its parameters: results are not owned.
    return [buffer_leaf(ctx.lb, r, owned=False) if isinstance(r.type, TensorType) else r
            for r in new.results]


from . import depthwise, lower_elementwise, lower_index, lower_linalg, lower_reduce  # noqa: E402, F401
