"""Recognizing scaled dot-product attention in a block: the rule behind the flash kernel.

``match_attention(final)`` looks at a matmul ``final = P @ V`` and decides, from the IR
alone, whether ``P`` is ``softmax(X, last axis)`` of ``X = mask(scale(Q @ K^T))``:

    P = E / sum(E),  E = exp(X - max(X))           (keepdims, over the last axis)
    X = where(keep, Y, -inf) | Y                     (optional causal mask)
    Y = A / s | A * s | s * A | A                    (s a scalar: host value or literal)
    A = Q @ Kt                                       (a matmul, or fused_matmul body)
    keep = (j <= i + c) in any equivalent integer form (j the key index, i the
           query index, from ``arange`` along the last / second-to-last axis)

Every form the -O levels give is covered because the comparison is on *terms*, a
normal form of the values: an elementwise op (``tensor.X`` or ``arith.X`` in a fused
body) is ``Fn(X, args)``, a keepdims reduction over the last axis (``reduce_max``,
or a result of ``fused_reduce``) is ``Red(kind, arg)``, a fused op's body is
expanded on its operands' terms, ``arange`` (start 0, step 1) and its ``reshape`` to
a column are ``Idx`` (the coordinate along an axis counted from the end), and any
other value is an opaque ``Leaf``. -O0's op chain and -O2's fused_matmul +
fused_reduce pair have the same terms.

Invariants:
- Only ops of ``final``'s block are looked through; values from elsewhere are leaves.
- ``AttentionMatch.absorbed`` is closed under uses: every user of an absorbed op
  is absorbed or is ``final``. The product Q @ K^T and the op defining P are
  absorbed, so the scores, the softmax and every value between them are used
  nowhere else (a returned score matrix, a second reader: no match).
- Q, Kt, V and P@V have one float dtype; the scale and the offset ``c`` are scalars.
- The extents of the ``arange``s are returned, not trusted: the planner proves they
  are T and S (an ``arange(1)`` broadcast would not be a coordinate).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ....dtypes import DType
from ....ir.core import Block, Operation, Value, defining_op
from ....ir.ops import ELEMENTWISE_BY_NAME
from ....ir.types import TensorType

PRODUCTS = ("tensor.matmul", "tensor.fused_matmul")
FLOATS = (DType.F16, DType.BF16, DType.F32)


# ------------------------------------------------------------------ terms
@dataclass(frozen=True)
class Term:
    """A value in normal form; equal terms compute equal values."""


@dataclass(frozen=True)
class Leaf(Term):
    """An opaque value (a kernel input, a host scalar, anything not looked through)."""

    key: int
    value: Value = field(compare=False, hash=False)


@dataclass(frozen=True)
class Num(Term):
    """A literal."""

    value: float | int


@dataclass(frozen=True)
class Fn(Term):
    """An elementwise op; ``attr`` is a comparison's predicate or a cast's dtype."""

    fn: str
    args: tuple[Term, ...]
    attr: str = ""


@dataclass(frozen=True)
class Red(Term):
    """A keepdims reduction of ``arg`` over the last axis."""

    kind: str
    arg: Term


@dataclass(frozen=True)
class Idx(Term):
    """The coordinate along axis ``pos`` (negative: from the end) of an ``arange`` of
    extent ``extent`` (a Leaf or Num of the arange's operand)."""

    pos: int
    extent: Term


@dataclass(frozen=True)
class Prod(Term):
    """The accumulator of the matmul op with id ``key``."""

    key: int


class Normalizer:
    """Terms of the values of one block; records the ops it looked through."""

    def __init__(self, block: Block):
        self.block = block
        self.memo: dict[int, Term] = {}
        self.visited: dict[int, Operation] = {}
        self.products: dict[int, Operation] = {}

    def of(self, v: Value) -> Term:
        if id(v) not in self.memo:
            self.memo[id(v)] = self._build(v)
        return self.memo[id(v)]

    def _build(self, v: Value) -> Term:
        op = defining_op(v)
        if op is None or op.parent is not self.block:
            return Leaf(id(v), v)
        if not isinstance(v.type, TensorType):
            if op.name == "arith.constant":
                return Num(op.attributes["value"])
            return Leaf(id(v), v)
        term = self._tensor(op, v)
        if term is None:
            return Leaf(id(v), v)
        self.visited[id(op)] = op
        return term

    def _tensor(self, op: Operation, v: Value) -> Term | None:
        name = op.name
        if name in PRODUCTS:
            self.products[id(op)] = op
            if name == "tensor.matmul":
                return Prod(id(op))
            args = [Prod(id(op)), *(self.of(x) for x in op.operands[2:])]
            return expand(op.regions[0].blocks[0], args)[0]
        if name == "tensor.fused_elementwise" and len(op.results) == 1:
            return expand(op.regions[0].blocks[0], [self.of(x) for x in op.operands])[0]
        if name == "tensor.fused_reduce":
            return self._fused_reduce(op, v)
        if name in ("tensor.reduce_max", "tensor.reduce_sum"):
            if not last_axis_keepdims(op, op.operand_types[0].rank):  # type: ignore[union-attr]
                return None
            return Red(name[14:], self.of(op.operands[0]))
        if name == "tensor.cast" and \
                op.operand_types[0].dtype is op.result_types[0].dtype:  # type: ignore[union-attr]
            return self.of(op.operands[0])  # a shape refinement: the same values
        if name in ("tensor.arange", "tensor.reshape", "tensor.broadcast_to"):
            return self._index(op)
        fn = elementwise_fn(op)
        if fn is None:
            return None
        return Fn(fn[0], tuple(self.of(x) for x in op.operands), fn[1])

    def _fused_reduce(self, op: Operation, v: Value) -> Term | None:
        kinds = op.kinds()  # type: ignore[attr-defined]
        rank = len(op.iteration_shape())  # type: ignore[attr-defined]
        if not last_axis_keepdims(op, rank) or any(k not in ("max", "sum") for k in kinds):
            return None
        args = [self.of(x) for x in op.operands]
        reds: list[Term] = [Red(k, t) for k, t in
                            zip(kinds, expand(op.regions[0].blocks[0], args), strict=True)]
        index = op.results.index(v)  # type: ignore[arg-type]
        if index < len(kinds):
            return reds[index]
        if len(op.regions) < 2:
            return None
        return expand(op.regions[1].blocks[0], args + reds)[index - len(kinds)]

    def _index(self, op: Operation) -> Term | None:
        """``arange`` (0, 1, ...) as the last axis' coordinate; reshaped to [n, 1] the
        second-to-last's; broadcasts and same-type casts keep the axis from the end."""
        if op.name == "tensor.arange":
            if op.attributes.get("start", 0) != 0 or op.attributes.get("step", 1) != 1:
                return None
            if op.operands:
                return Idx(-1, self.of(op.operands[0]))
            extent = op.result_types[0].shape[0]  # type: ignore[union-attr]
            return None if extent is None else Idx(-1, Num(extent))
        src = self.of(op.operands[0])
        if not isinstance(src, Idx):
            return None
        if op.name != "tensor.reshape":
            return src
        dims = op.result_types[0].shape  # type: ignore[union-attr]
        if op.operand_types[0].rank != 1 or len(dims) not in (1, 2):  # type: ignore[union-attr]
            return None
        if len(dims) == 1:
            return src
        if dims[1] == 1 and dims[0] != 1:
            return Idx(-2, src.extent)
        if dims[0] == 1 and dims[1] != 1:
            return src
        return None


def last_axis_keepdims(op: Operation, rank: int) -> bool:
    """A keepdims reduction over exactly the last axis of a rank-``rank`` source."""
    axes = [a % rank for a in op.attributes.get("axes", [])] if rank else []
    return bool(op.attributes.get("keepdims")) and axes == [rank - 1]


def elementwise_fn(op: Operation) -> tuple[str, str] | None:
    """(fn, attr) of an elementwise tensor op or scalar arith op, else None."""
    dialect, _, fn = op.name.partition(".")
    if dialect not in ("tensor", "arith"):
        return None
    if fn in ("cmpf", "cmpi"):
        return "cmp", str(op.attributes["predicate"])
    if fn == "cast":
        return "cast", str(op.result_types[0])
    if fn == "select" or fn in ELEMENTWISE_BY_NAME:
        return fn, ""
    return None


def expand(block: Block, args: list[Term]) -> list[Term]:
    """The terms a fused op's body yields for its block arguments' terms."""
    env: dict[int, Term] = {id(a): t for a, t in zip(block.args, args, strict=True)}
    for op in block.ops:
        if op.name == "tensor.yield":
            return [env[id(x)] for x in op.operands]
        if op.name == "arith.constant":
            env[id(op.results[0])] = Num(op.attributes["value"])
            continue
        fn = elementwise_fn(op)
        if fn is None or len(op.results) != 1:
            env[id(op.results[0])] = Leaf(id(op.results[0]), op.results[0])
            continue
        env[id(op.results[0])] = Fn(fn[0], tuple(env[id(x)] for x in op.operands), fn[1])
    raise ValueError("a fused body without yield")


# ------------------------------------------------------------------ the match
@dataclass(frozen=True)
class Scale:
    """Scores are ``A / value`` (``op`` "div") or ``A * value`` ("mul")."""

    op: str
    value: Term  # Leaf of a scalar value, or Num


@dataclass(frozen=True)
class Causal:
    """Key j is kept for query i iff ``j <= i + sum(sign * term for sign, term in offset)``;
    ``rows`` / ``cols``: the extents of the aranges giving i and j (to be proven T, S)."""

    offset: tuple[tuple[int, Term], ...]
    rows: Term
    cols: Term


@dataclass(frozen=True)
class AttentionMatch:
    final: Operation
    product: Operation
    q: Value
    kt: Value
    v: Value
    scale: Scale | None
    causal: Causal | None
    #: the ops computed inside the fused kernel, in block order
    absorbed: tuple[Operation, ...]


def match_attention(final: Operation) -> AttentionMatch | None:
    """The attention pattern ending in ``final`` (a matmul), or None."""
    if final.name not in PRODUCTS or not _ranks_ok(final):
        return None
    norm = Normalizer(final.parent)  # type: ignore[arg-type]
    x = _softmax_input(norm.of(final.operands[0]))
    if x is None:
        return None
    peeled = _peel_mask(x)
    if peeled is None:
        return None
    x, causal = peeled
    x, scale = _peel_scale(x)
    if not isinstance(x, Prod):
        return None
    product = norm.products[x.key]
    q, kt, v = product.operands[0], product.operands[1], final.operands[1]
    if not _ranks_ok(product) or not _one_dtype(q, kt, v, product, final):
        return None
    absorbed = _closed(norm.visited, final)
    p_op = defining_op(final.operands[0])
    if id(product) not in absorbed or p_op is None or id(p_op) not in absorbed:
        return None
    if any(id(defining_op(w)) in absorbed for w in (q, kt, v) if defining_op(w) is not None):
        return None
    ops = tuple(op for op in final.parent.ops if id(op) in absorbed)  # type: ignore[union-attr]
    return AttentionMatch(final, product, q, kt, v, scale, causal, ops)


def _ranks_ok(op: Operation) -> bool:
    return all(isinstance(t, TensorType) and t.rank >= 2 for t in op.operand_types[:2])


def _one_dtype(q: Value, kt: Value, v: Value, product: Operation, final: Operation) -> bool:
    from .fuse import product_dtype, value_dtype

    dt = value_dtype(q)
    return dt in FLOATS and all(value_dtype(w) is dt for w in (kt, v, final.operands[0])) \
        and product_dtype(product) is dt and product_dtype(final) is dt


def _softmax_input(p: Term) -> Term | None:
    """X where ``p`` is ``exp(X - max(X)) / sum(exp(X - max(X)))``."""
    if not (isinstance(p, Fn) and p.fn == "div" and len(p.args) == 2):
        return None
    e, s = p.args
    if s != Red("sum", e) or not (isinstance(e, Fn) and e.fn == "exp"):
        return None
    d = e.args[0]
    if not (isinstance(d, Fn) and d.fn == "sub" and d.args[1] == Red("max", d.args[0])):
        return None
    return d.args[0]


def _peel_mask(x: Term) -> tuple[Term, Causal | None] | None:
    """(the masked values, the mask) of ``where(keep, y, -inf)`` / ``where(drop, -inf, y)``,
    ``(x, None)`` for anything but a select; None for a select that is no causal mask."""
    if not (isinstance(x, Fn) and x.fn == "select"):
        return x, None
    cond, a, b = x.args
    if _is_neg_inf(b):
        keep, y = _keep_form(cond, negate=False), a
    elif _is_neg_inf(a):
        keep, y = _keep_form(cond, negate=True), b
    else:
        return None
    return None if keep is None else (y, keep)


def _is_neg_inf(t: Term) -> bool:
    return isinstance(t, Num) and isinstance(t.value, float) and t.value == float("-inf")


@dataclass(frozen=True)
class Lin:
    """``i * ci + j * cj + sum(sign * term)``."""

    ci: int = 0
    cj: int = 0
    consts: tuple[tuple[int, Term], ...] = ()
    idx: tuple[Idx, ...] = ()

    def plus(self, o: Lin, sign: int = 1) -> Lin:
        return Lin(self.ci + sign * o.ci, self.cj + sign * o.cj,
                   self.consts + tuple((sign * s, t) for s, t in o.consts), self.idx + o.idx)


NEGATE = {"sle": "sgt", "slt": "sge", "sge": "slt", "sgt": "sle"}


def _keep_form(cond: Term, negate: bool) -> Causal | None:
    """``cond`` (or its negation) as ``j <= i + c``, else None."""
    if not (isinstance(cond, Fn) and cond.fn == "cmp" and cond.attr in NEGATE):
        return None
    pred = NEGATE[cond.attr] if negate else cond.attr
    la, lb = _linear(cond.args[0]), _linear(cond.args[1])
    if la is None or lb is None:
        return None
    d = la.plus(lb, -1)  # pred(d, 0)
    if pred in ("sge", "sgt"):
        d = Lin().plus(d, -1)
        pred = "sle" if pred == "sge" else "slt"
    if pred == "slt":  # d < 0 is d + 1 <= 0 on integers
        d = d.plus(Lin(consts=((1, Num(1)),)))
    if (d.ci, d.cj) != (-1, 1):  # j - i + k <= 0: j <= i - k
        return None
    rows = [x.extent for x in d.idx if x.pos == -2]
    cols = [x.extent for x in d.idx if x.pos == -1]
    if len(rows) != 1 or len(cols) != 1:
        return None
    return Causal(tuple((-s, t) for s, t in d.consts), rows[0], cols[0])


def _linear(t: Term) -> Lin | None:
    if isinstance(t, Idx):
        return Lin(ci=1, idx=(t,)) if t.pos == -2 else Lin(cj=1, idx=(t,)) if t.pos == -1 else None
    if isinstance(t, Num):
        return Lin(consts=((1, t),)) if isinstance(t.value, int) else None
    if isinstance(t, Leaf):
        dt = t.value.type
        scalar = not isinstance(dt, TensorType)
        return Lin(consts=((1, t),)) if scalar and _is_int(t.value) else None
    if isinstance(t, Fn) and t.fn in ("add", "sub") and len(t.args) == 2:
        a, b = _linear(t.args[0]), _linear(t.args[1])
        if a is None or b is None:
            return None
        return a.plus(b, 1 if t.fn == "add" else -1)
    if isinstance(t, Fn) and t.fn == "cast" and t.attr in ("i64", "i32", "index"):
        return _linear(t.args[0])
    return None


def _is_int(v: Value) -> bool:
    from .fuse import value_dtype

    dt = value_dtype(v)
    return dt is None or dt in (DType.I32, DType.I64)


def _peel_scale(x: Term) -> tuple[Term, Scale | None]:
    if not (isinstance(x, Fn) and x.fn in ("div", "mul") and len(x.args) == 2):
        return x, None
    a, b = x.args
    if isinstance(a, Prod) and _scalar(b):
        return a, Scale(x.fn, b)
    if x.fn == "mul" and isinstance(b, Prod) and _scalar(a):
        return b, Scale("mul", a)
    return x, None


def _scalar(t: Term) -> bool:
    if isinstance(t, Num):
        return isinstance(t.value, float | int) and not isinstance(t.value, bool)
    return isinstance(t, Leaf) and not isinstance(t.value.type, TensorType)


def _closed(visited: dict[int, Operation], final: Operation) -> set[int]:
    """The largest subset of ``visited`` whose every result is used only by members of
    the subset or as ``final``'s P (operand 0; an epilogue operand of a fused ``final``
    is read by the kernel's epilogue, so it must be planned)."""
    keep = set(visited)
    changed = True
    while changed:
        changed = False
        for key in list(keep):
            uses = [u for r in visited[key].results for u in r.uses]
            if any(not (id(u.owner) in keep or (u.owner is final and u.index == 0))
                   for u in uses):
                keep.discard(key)
                changed = True
    return keep


def find_attention(block: Block) -> dict[int, AttentionMatch]:
    """Every attention pattern of ``block``, by id of its final matmul. Two matches
    never share an absorbed op (closure: an op's users are all in one chain)."""
    out: dict[int, AttentionMatch] = {}
    for op in block.ops:
        if op.name in PRODUCTS:
            m = match_attention(op)
            if m is not None:
                out[id(op)] = m
    return out


__all__ = ["AttentionMatch", "Causal", "Scale", "find_attention", "match_attention"]
