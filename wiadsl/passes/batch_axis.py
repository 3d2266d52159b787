"""Batch separability: whether a kernel computes each index of its inputs' leading
axis on its own, so that a call on a batch is the same as calls on its slices.

A model served with a batch of images runs every image through the same layers,
and nothing an image computes reads another image. Where that holds the CPU
backend runs a batch as slices, one per thread, each through the whole kernel
(backends/llvm/batch_split.py): no data passes between the threads and there is
one hand-off per call instead of one per layer. This analysis proves it from the
tensor IR (as the frontend lowers it, before the tensor passes).

The *batch inputs* are the kernel's inputs whose first axis carries one symbolic
dim (``arg_dims``; say ``N``), taken from the first such input, leaving out the
``frozen`` ones (weights). Every value then has a state:
- *batched*: a tensor whose axis 0 is the batch, and whose slice ``i`` along it
  depends only on slice ``i`` of the batch inputs and on independent values;
- *extent*: an integer equal to the batch's size (``tensor.dim`` of axis 0 of a
  batched tensor, and casts of it), allowed only as the extent of axis 0 of a
  tensor made of batched or independent data (``tensor.full``, ``reshape``,
  ``broadcast_to``): in a slice it is the slice's size;
- *independent* (no state): not derived from the batch inputs at all.

Each op has a rule (``_RULES``, by kind); an op without one that reads a batched
value or an extent refuses the split, as does anything that mixes images: a
reduction, transpose, concatenation, slice or matmul that involves axis 0, an
element read at a batch index, the batch size used as a number, a result that is
not batched, another input that names the batch dim, control flow, or a product
whose weight is an input that changes between calls (each slice would pack it
again; a frozen one is packed once). Calls are followed into their callee.

Invariant (soundness): ``separable`` returns inputs only when, for every split of
the batch into contiguous slices, the kernel's results on the whole batch are the
concatenation along axis 0 of its results on the slices.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..ir.core import Operation, Value
from ..ir.module import FuncOp
from ..ir.ops_arith import keeps_value
from ..ir.ops_base import normalize_axis
from ..ir.ops_elementwise import TensorElementwiseOp
from ..ir.ops_index import AxisSpec, SliceOpBase
from ..ir.ops_tensor import ReduceOp, matmul_shape
from ..ir.types import TensorType
from ..records import record
from .extents import BROADCASTING, Extents

BATCHED = "batched"
EXTENT = "extent"
#: ops whose first operand is an N... image and whose other operands are weights
_IMAGE_OPS = frozenset({"tensor.conv2d", "tensor.depthwise_conv2d", "tensor.max_pool",
                        "tensor.avg_pool"})
_FULL_SLICE = AxisSpec(False)
_MAX_DEPTH = 64  # nested calls followed (a recursive kernel is refused)


class NotSeparable(Exception):
    """Why the kernel is not batch separable (for tests and remarks)."""


@record(frozen=True)
class Separable:
    """A batch-separable kernel: the inputs split along axis 0 and a work estimate
    (scalar operations: every tensor op's result elements, times the reduced extent
    for products) at the shapes the caller gave, or None where an extent is not
    known."""

    inputs: tuple[int, ...]
    work: int | None
    #: the results' shapes at those shapes (None where an extent is not known)
    results: tuple[tuple[int, ...], ...] | None


def separable(func: FuncOp, frozen: frozenset[int] = frozenset(),
              shapes: Sequence[Sequence[int | None]] | None = None) -> Separable:
    """The batch inputs of ``func`` and the work estimate at the inputs' ``shapes``;
    raises NotSeparable with the reason when the kernel is not separable."""
    inputs = _batch_inputs(func, frozen)
    sizes = _Sizes(func, shapes, inputs[0])
    states = [BATCHED if i in inputs else None for i in range(len(func.args))]
    varying = [i not in inputs and i not in frozen for i in range(len(func.args))]
    returned, work = _walk(func, states, varying, sizes, 0)
    if any(state != BATCHED for _, state in returned):
        raise NotSeparable("a result is not computed per batch index")
    results = [sizes.shape(v, True) for v, _ in returned]
    known = None if None in results else tuple(tuple(r) for r in results)  # type: ignore[arg-type]
    return Separable(tuple(inputs), work, known)


class _Sizes:
    """The extents of values at the caller's input shapes, learned op by op: static
    ones, the batch for a batched value's axis 0, named dims (``passes/extents.py``)
    that an input gives, and what broadcasting and products make of known shapes."""

    def __init__(self, func: FuncOp, shapes: Sequence[Sequence[int | None]] | None, first: int):
        self.batch = shapes[first][0] if shapes is not None else None
        self.extents = Extents()
        self.named: dict[str, int] = {}
        #: values whose shape is known: the inputs, then each op's results (a called
        #: function's parameters and body too)
        self.known: dict[Value, list[int] | None] = {}
        for arg, names, shape in zip(func.args, func.attributes.get("arg_dims") or [],
                                     shapes or [], strict=False):
            self.known[arg] = None if None in shape else list(shape)  # type: ignore[arg-type]
            for name, extent in zip(names, shape, strict=False):
                if name and extent is not None:
                    self.named[name] = extent

    def shape(self, v: Value, batched: bool) -> list[int] | None:
        """``v``'s extents (None where one is not known)."""
        if v in self.known:
            return self.known[v]
        if not isinstance(v.type, TensorType):
            return []
        shape = list(v.type.shape)
        if batched and shape[0] is None:
            shape[0] = self.batch
        if None in shape:
            symbols = self.extents.of(v)
            shape = [d if d is not None else self._named(e) for d, e in zip(shape, symbols, strict=True)]
        return None if None in shape else shape  # type: ignore[return-value]

    def learn(self, op: Operation, state: dict[Value, str]) -> None:
        """Record the shapes of ``op``'s results."""
        for r in op.results:
            shape = self.shape(r, state.get(r) == BATCHED)
            self.known[r] = shape if shape is not None else self._inferred(op, state)

    def _inferred(self, op: Operation, state: dict[Value, str]) -> list[int] | None:
        """A broadcast's or a product's result shape from its operands' known ones."""
        operands = []
        for v in op.operands:
            shape = self.shape(v, state.get(v) == BATCHED)
            if shape is None:
                return None
            operands.append(tuple(shape))
        try:
            if isinstance(op, TensorElementwiseOp) or op.name in BROADCASTING:
                return list(np.broadcast_shapes(*operands))
            if op.name == "tensor.matmul":
                return list(matmul_shape(*operands))  # type: ignore[arg-type]
        except ValueError:  # shapes that do not fit: the kernel fails at run time anyway
            return None
        return None

    def _named(self, extent: Any) -> int | None:
        if isinstance(extent, tuple) and extent[0] == "dim":
            return self.named.get(extent[1])
        if isinstance(extent, tuple) and extent[0] == "arg":  # a parameter's axis
            shape = self.known.get(extent[1])
            return shape[extent[2]] if shape else None
        return None


def _walk(func: FuncOp, args: Sequence[str | None], varying_args: Sequence[bool], sizes: _Sizes,
          depth: int) -> tuple[list[tuple[Value, str | None]], int | None]:
    """What ``func`` returns, with states, given its arguments' states (and which vary
    between calls: inputs that are neither batched nor frozen); and its work."""
    if len(func.blocks) != 1:
        raise NotSeparable(f"function '{func.name}' has control flow")
    state: dict[Value, str] = {a: s for a, s in zip(func.args, args, strict=True) if s is not None}
    varying: set[Value] = {a for a, v in zip(func.args, varying_args, strict=True) if v}
    work: int | None = 0
    for op in func.entry.ops:
        if op.name == "func.return":
            return [(v, state.get(v)) for v in op.operands], work
        traced = op.name == "func.call" and any(state.get(v) for v in op.operands)
        called: int | None = None
        if traced:  # the callee's states, shapes and work
            results, called = _call(op, func, state, varying, sizes, depth)
        else:
            results = [_state_of(op, state)] * len(op.results)
        _refuse_repacking(op, state, varying)
        for r, s in zip(op.results, results, strict=True):
            if s is not None:
                state[r] = s
            elif any(v in varying for v in op.operands):
                varying.add(r)
        if not traced:
            sizes.learn(op, state)
        more = called if op.name == "func.call" else _op_work(op, state, sizes)
        work = None if work is None or more is None else work + more
    raise NotSeparable(f"function '{func.name}' does not return")


def _refuse_repacking(op: Operation, state: dict[Value, str], varying: set[Value]) -> None:
    """A product of batched data with a weight that changes between calls would pack
    that weight in every slice (a frozen one is packed once, at the first call):
    ``mm(A, B)`` at 2 threads as two slices ran 5-10 % slower than the gemm's own
    threads, which pack each panel of B once."""
    if op.name in ("tensor.matmul", "tensor.conv2d") and any(state.get(v) == BATCHED for v in op.operands) \
            and state.get(op.operands[1]) != BATCHED and op.operands[1] in varying:
        raise NotSeparable(f"'{op.name}' would pack its weight, an input that is not frozen, "
                           "in every slice")


def _call(op: Operation, caller: FuncOp, state: dict[Value, str], varying: set[Value],
          sizes: _Sizes, depth: int) -> tuple[list[str | None], int | None]:
    """A call's result states, from its callee's body with the arguments' states."""
    module, name = caller.parent, op.attributes.get("callee")
    callee = module.get(name) if module is not None and isinstance(name, str) else None
    if callee is None or depth >= _MAX_DEPTH:
        raise NotSeparable(f"'{op.name}' calls a function the analysis cannot see")
    for body_op in callee.entry.ops:  # what an earlier call of it learned
        for r in body_op.results:
            sizes.known.pop(r, None)
    for param, v in zip(callee.args, op.operands, strict=True):
        sizes.known[param] = sizes.shape(v, state.get(v) == BATCHED)
    returned, work = _walk(callee, [state.get(v) for v in op.operands],
                           [v in varying for v in op.operands], sizes, depth + 1)
    for r, (v, s) in zip(op.results, returned, strict=True):
        sizes.known[r] = sizes.shape(v, s == BATCHED)
    return [s for _, s in returned], work


def _batch_inputs(func: FuncOp, frozen: frozenset[int]) -> list[int]:
    dims = func.attributes.get("arg_dims") or [[] for _ in func.args]
    symbol = next((d[0] for i, (t, d) in enumerate(zip(func.arg_types, dims, strict=False))
                   if i not in frozen and isinstance(t, TensorType) and d and d[0]), None)
    if symbol is None:
        raise NotSeparable("no input has a named leading dim")
    inputs = []
    for i, (t, d) in enumerate(zip(func.arg_types, dims, strict=False)):
        if symbol not in d:
            continue
        if i in frozen or list(d).index(symbol) != 0 or list(d).count(symbol) != 1 \
                or not isinstance(t, TensorType) or t.shape[0] is not None:
            raise NotSeparable(f"input {i} uses the batch dim {symbol} other than as its first axis")
        inputs.append(i)
    return inputs


def _state_of(op: Operation, state: dict[Value, str]) -> str | None:
    seen = {state.get(v) for v in op.operands} - {None}
    if not seen:
        return None  # independent of the batch
    if op.regions:
        raise NotSeparable(f"'{op.name}' has a region")
    rule = _rule_for(op)
    if EXTENT in seen and rule not in (_makes_tensor, _cast):
        raise NotSeparable(f"'{op.name}' uses the batch size as a value")
    if rule is None:
        raise NotSeparable(f"'{op.name}' reads a batched value")
    return rule(op, state)


def _rule_for(op: Operation) -> Callable[[Operation, dict[Value, str]], str | None] | None:
    if isinstance(op, TensorElementwiseOp) or op.name in BROADCASTING:
        return _elementwise
    if isinstance(op, ReduceOp):
        return _reduce
    if isinstance(op, SliceOpBase):
        return _slice
    if op.name in _IMAGE_OPS:
        return _image
    return _RULES.get(op.name)


def _rank(v: Value) -> int:
    return v.type.rank if isinstance(v.type, TensorType) else 0


def _independent_fits(v: Value, rank: int) -> bool:
    """An independent operand broadcasts over every batch index of a rank-``rank``
    result: a lower rank, or a static 1 on axis 0."""
    t = v.type
    return not isinstance(t, TensorType) or t.rank < rank or t.shape[0] == 1


def _elementwise(op: Operation, state: dict[Value, str]) -> str:
    rank = _rank(op.results[0])
    for v in op.operands:
        batched = state.get(v) == BATCHED
        if batched and _rank(v) != rank:
            raise NotSeparable(f"'{op.name}' broadcasts a batched operand to a higher rank")
        if not batched and not _independent_fits(v, rank):
            raise NotSeparable(f"'{op.name}' has an operand of the batch's extent that is not batched")
    return BATCHED


def _reduce(op: Operation, state: dict[Value, str]) -> str:
    axes = op.axes()  # type: ignore[attr-defined]
    if 0 in axes or _rank(op.results[0]) == 0:
        raise NotSeparable(f"'{op.name}' reduces the batch axis")
    return BATCHED


def _slice(op: Operation, state: dict[Value, str]) -> str:
    specs = op.layout()  # type: ignore[attr-defined]
    if specs and specs[0] != _FULL_SLICE:
        raise NotSeparable(f"'{op.name}' selects along the batch axis")
    if op.name == "tensor.extract_slice":
        return BATCHED
    value, dest = op.operands[0], op.operands[1]
    if state.get(dest) != BATCHED:
        raise NotSeparable(f"'{op.name}' writes batched values into an independent tensor")
    selected = sum(not s.is_index for s in specs) + _rank(dest) - len(specs)
    if state.get(value) == BATCHED:
        if _rank(value) != selected:
            raise NotSeparable(f"'{op.name}' moves the batch axis")
    elif not _independent_fits(value, selected):
        raise NotSeparable(f"'{op.name}' writes an operand of the batch's extent that is not batched")
    return BATCHED


def _image(op: Operation, state: dict[Value, str]) -> str:
    if state.get(op.operands[0]) != BATCHED or any(state.get(v) for v in op.operands[1:]) \
            or _rank(op.operands[0]) < 3:
        raise NotSeparable(f"'{op.name}' reads a batched weight")
    return BATCHED


def _matmul(op: Operation, state: dict[Value, str]) -> str:
    a, b = op.operands
    rank = _rank(op.results[0])
    if state.get(a) == BATCHED and (_rank(a) < 2 or _rank(a) != rank):
        raise NotSeparable("'tensor.matmul' contracts or broadcasts the batch axis of its left operand")
    if state.get(b) == BATCHED and (_rank(b) < 3 or _rank(b) != rank):
        raise NotSeparable("'tensor.matmul' contracts the batch axis of its right operand")
    for v in (a, b):
        if state.get(v) != BATCHED and _rank(v) == rank and rank >= 3 and not _independent_fits(v, rank):
            raise NotSeparable("'tensor.matmul' has an operand of the batch's extent that is not batched")
    if state.get(b) == BATCHED and state.get(a) != BATCHED and not _independent_fits(a, rank):
        raise NotSeparable("'tensor.matmul' mixes the batch into an independent operand")
    return BATCHED


def _transpose(op: Operation, state: dict[Value, str]) -> str:
    if op.attributes["perm"][0] != 0:
        raise NotSeparable("'tensor.transpose' moves the batch axis")
    return BATCHED


def _concat(op: Operation, state: dict[Value, str]) -> str:
    if normalize_axis(op, op.attributes["axis"], _rank(op.results[0])) == 0 \
            or any(state.get(v) != BATCHED for v in op.operands):
        raise NotSeparable("'tensor.concat' joins along the batch axis or with independent tensors")
    return BATCHED


def _dim(op: Operation, state: dict[Value, str]) -> str | None:
    return EXTENT if op.attributes["axis"] == 0 else None


def _cast(op: Operation, state: dict[Value, str]) -> str:
    if not keeps_value(op):  # the batch size as a float (or a narrower integer): a number
        raise NotSeparable(f"'{op.name}' uses the batch size as a value")
    return EXTENT


def _makes_tensor(op: Operation, state: dict[Value, str]) -> str:
    """full / reshape / broadcast_to: the batch size as the extent of axis 0 only,
    where the data is batched with its batch axis kept, or independent of it."""
    result = op.results[0].type
    if state.get(op.operands[0]) == EXTENT:  # the batch size as the data
        raise NotSeparable(f"'{op.name}' uses the batch size as a value")
    extents = op.operands[1:]  # after the fill value or the source
    if not isinstance(result, TensorType) or result.shape[0] is not None or not extents \
            or state.get(extents[0]) != EXTENT or any(state.get(v) for v in extents[1:]):
        raise NotSeparable(f"'{op.name}' does not keep the batch as its axis 0")
    if op.name == "tensor.full":
        return BATCHED  # the same value at every batch index
    source = op.operands[0]
    if state.get(source) == BATCHED:
        if op.name == "tensor.broadcast_to" and _rank(source) != result.rank:
            raise NotSeparable("'tensor.broadcast_to' moves the batch axis")
        return BATCHED  # a C-order reshape keeping axis 0 keeps each index's block
    if op.name == "tensor.reshape" or not _independent_fits(source, result.rank):
        raise NotSeparable(f"'{op.name}' gives independent data the batch's extent")
    return BATCHED


_RULES: dict[str, Callable[[Operation, dict[Value, str]], str | None]] = {
    "tensor.matmul": _matmul,
    "tensor.transpose": _transpose,
    "tensor.concat": _concat,
    "tensor.dim": _dim,
    "arith.cast": _cast,
    "tensor.full": _makes_tensor,
    "tensor.reshape": _makes_tensor,
    "tensor.broadcast_to": _makes_tensor,
}


def _op_work(op: Operation, state: dict[Value, str], sizes: _Sizes) -> int | None:
    """``op``'s work estimate; None when an extent is unknown."""
    total = 0
    for r in op.results:
        shape = sizes.shape(r, state.get(r) == BATCHED)
        if shape is None:
            return None
        if isinstance(r.type, TensorType):
            total += math.prod(shape) * _reduced(op, state, sizes)
    return total


def _reduced(op: Operation, state: dict[Value, str], sizes: _Sizes) -> int:
    """The products' multiply-adds per result element (1 for other ops; an unknown
    extent counts as 1)."""
    if op.name not in ("tensor.matmul", "tensor.conv2d", "tensor.depthwise_conv2d"):
        return 1
    x, w = (sizes.shape(v, state.get(v) == BATCHED) or [] for v in op.operands[:2])
    if op.name == "tensor.matmul":
        return x[-1] if x else 1
    # O x C x KH x KW, or a depthwise one's KH x KW x C
    return math.prod(w[1:] if op.name == "tensor.conv2d" else w[:2]) if w else 1
