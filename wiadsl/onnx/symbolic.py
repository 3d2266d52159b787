"""Shape arithmetic on symbolic extents, evaluated at import time.

Exporters write ``x.view(x.size(0), -1)`` as ``Shape -> Gather -> Unsqueeze ->
Concat -> Reshape``. With a dynamic batch, ``Shape`` has no constant value; here
it has a *symbolic* one: ``Val.sym``, a tuple of ``Dim`` (one per element of a
1-D int64 tensor, or one for a scalar). The ops below compute on those tuples,
so the chain ends in a Reshape whose target is ``[batch, 768]`` and no shape
arithmetic reaches the kernel.

Invariants:
- A Val with ``sym`` has dtype i64 and no ``ref``: it never becomes DSL text; an
  op outside ``SYMBOLIC`` (and Reshape/Expand, which read ``Node.dims``) that
  meets one fails naming the op.
- When every element of a result is static, the result is an ordinary constant,
  so the rest of the graph folds as usual.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..dtypes import DType
from .graph import ONNX_DTYPES, Node, Val, checked, const_val
from .shapes import Dim

SymOp = Callable[[Node], list[Val]]
SYMBOLIC: dict[str, SymOp] = {}


def sym_val(dims: list[Dim] | tuple[Dim, ...], scalar: bool = False) -> Val:
    """The Val of a shape value: a constant when every extent is static."""
    dims = tuple(dims)
    if all(d.is_static for d in dims):
        array = np.array([d.coef for d in dims], np.int64)
        return const_val(array.reshape(()) if scalar else array, DType.I64)
    return Val(DType.I64, () if scalar else (Dim(len(dims)),), sym=dims)


def elements(n: Node, i: int) -> tuple[Dim, ...]:
    """Input ``i`` as Dims (a constant's int64 values, or a symbolic value's)."""
    v = n.x(i)
    if v.sym is not None:
        return v.sym
    if v.const is None or not np.issubdtype(v.const.dtype, np.integer):
        raise n.fail(f"input {i} must be an integer constant or a shape value")
    return tuple(Dim(int(c)) for c in v.const.reshape(-1))


def _sym(*names: str) -> Callable[[SymOp], SymOp]:
    def register(fn: SymOp) -> SymOp:
        for name in names:
            SYMBOLIC[name] = fn
        return fn
    return register


def shape_value(n: Node, shape: tuple[Dim, ...]) -> Val:
    """``Shape``'s result: symbolic where the dims are."""
    start, end = int(n.attr("start", 0)), n.attr("end")
    return sym_val(shape[slice(start, None if end is None else int(end))])


@_sym("Gather")
def _gather(n: Node) -> list[Val]:
    data = np.array(elements(n, 0), dtype=object)
    idx = n.const(1, "the indices")
    assert idx is not None
    taken = np.take(data, idx)
    return [sym_val(list(np.reshape(taken, -1)), scalar=np.ndim(taken) == 0)]


@_sym("Unsqueeze", "Squeeze", "Identity", "Cast", "Reshape")
def _same(n: Node) -> list[Val]:
    """Rank changes between a scalar and ``[1]``; casts between integer types."""
    if n.op == "Cast" and int(n.attr("to")) not in (6, 7):  # a length as data (a scale)
        to = ONNX_DTYPES.get(int(n.attr("to")))
        if to is None:
            raise n.fail(f"a shape value cast to ONNX type {n.attr('to')}")
        v = n.em.shape_tensor(n.x())
        return [n.out(f"cast({v.ref}, {to})", to, v.shape)]
    dims = elements(n, 0)
    scalar = n.op == "Squeeze" or (n.op == "Reshape" and not len(elements(n, 1)))
    return [sym_val(dims, scalar=scalar and len(dims) == 1)]


@_sym("Concat")
def _concat(n: Node) -> list[Val]:
    return [sym_val([d for i in range(len(n.vals)) for d in elements(n, i)])]


@_sym("Slice")
def _slice(n: Node) -> list[Val]:
    dims = elements(n, 0)
    starts, ends = n.const(1, "starts"), n.const(2, "ends")
    steps = n.const(4, "steps")
    assert starts is not None and ends is not None
    step = int(steps[0]) if steps is not None else 1
    return [sym_val(dims[int(starts[0]):int(ends[0]):step])]


_ARITH = {"Mul": lambda a, b: a * b, "Div": lambda a, b: a // b,
          "Add": lambda a, b: a + b, "Sub": lambda a, b: a + Dim(-1) * b}


@_sym(*_ARITH)
def _arith(n: Node) -> list[Val]:
    a, b = elements(n, 0), elements(n, 1)
    if len(a) != len(b) and 1 not in (len(a), len(b)):
        raise n.fail(f"shape values of lengths {len(a)} and {len(b)}")
    size = max(len(a), len(b))
    a, b = (a * size if len(a) == 1 else a), (b * size if len(b) == 1 else b)
    fn = _ARITH[n.op]
    out = [checked(n, lambda x=x, y=y: fn(x, y)) for x, y in zip(a, b)]
    scalar = n.x(0).rank == 0 and n.x(1).rank == 0
    return [sym_val(out, scalar=scalar)]


@_sym("Range")
def _range(n: Node) -> list[Val]:
    """``Range(0, n, 1)`` of a dynamic extent (position ids): ``arange`` of that extent."""
    (start,), (limit,), (delta,) = (elements(n, i) for i in range(3))
    if start != Dim(0) or delta != Dim(1):
        raise n.fail(f"a range from {start} by {delta} to the dynamic extent {limit} "
                     "(only 0 to n by 1 has a known length)")
    count = n.em.extent(limit)
    dtype = DType.I32 if n.x(0).dtype is DType.I32 else DType.I64
    expr = f"arange({count})" if dtype is DType.I64 else f"cast(arange({count}), i32)"
    return [n.out(expr, dtype, (limit,))]


def _equal(n: Node, a: Dim, b: Dim) -> bool:
    """Whether two extents are equal, when that is known at import: an extent is never
    negative (torch's ``expand`` tests its sizes against -1), and equal Dims are equal."""
    if a == b:
        return True
    if a.is_static and b.is_static:
        return False
    other = b if not a.is_static and b.is_static else a if a.is_static else None
    if other is not None and other.coef < 0:
        return False
    raise n.fail(f"whether the extents {a} and {b} are equal is not known at import")


@_sym("Equal")
def _equal_op(n: Node) -> list[Val]:
    """Elementwise ``==`` of shape values: a constant bool vector (the ``-1`` tests that
    ``expand(batch, seq)`` exports)."""
    a, b = elements(n, 0), elements(n, 1)
    size = max(len(a), len(b))
    a, b = (a * size if len(a) == 1 else a), (b * size if len(b) == 1 else b)
    if len(a) != len(b):
        raise n.fail(f"shape values of lengths {len(a)} and {len(b)}")
    return [const_val(np.array([_equal(n, x, y) for x, y in zip(a, b, strict=True)]), DType.BOOL)]


@_sym("Where")
def _where(n: Node) -> list[Val]:
    """``Where`` of a constant condition between shape values, element by element."""
    cond = n.const(0, "the condition")
    assert cond is not None
    a, b = elements(n, 1), elements(n, 2)
    flags = [bool(c) for c in cond.reshape(-1)]
    size = max(len(flags), len(a), len(b))
    flags, a, b = (x * size if len(x) == 1 else x for x in (flags, a, b))  # type: ignore[assignment]
    if not len(flags) == len(a) == len(b):
        raise n.fail("shape values of different lengths")
    return [sym_val([x if f else y for f, x, y in zip(flags, a, b, strict=True)])]


@_sym("Shape")
def _shape_of_shape(n: Node) -> list[Val]:
    """The shape of a shape value: its (static) length."""
    return [shape_value(n, n.x().shape)]
