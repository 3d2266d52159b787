"""Recognizing scaled dot-product attention in a block: the rule behind the flash kernel.

``match_attention(final)`` looks at a matmul ``final = P @ V`` and decides, from the IR
alone, whether ``P`` is ``softmax(X, last axis)`` of ``X = mask(scale(Q @ K^T))``:

    P = E / sum(E),  E = exp(X - max(X))           (keepdims, over the last axis)
    X = where(keep, Y, -inf) | Y                     (optional causal mask)
    Y = A / s | A * s | s * A | A                    (s a scalar: host value or literal)
    A = Q @ Kt                                       (a matmul, or fused_matmul body)
    keep = (j <= i + c) in any equivalent integer form (j the key index, i the
           query index, from ``arange`` along the last / second-to-last axis)

Every form the -O levels give is covered because the comparison is on *terms*
(``terms.py``), a normal form of the values: -O0's op chain and -O2's fused_matmul +
fused_reduce pair have the same terms.

Invariants:
- Only ops of ``final``'s block are looked through; values from elsewhere are leaves.
- ``AttentionMatch.absorbed`` is closed under uses: every use of an absorbed op's
  result is by an absorbed op or is ``final``'s P. The product Q @ K^T and the op defining P are
  absorbed, so the scores, the softmax and every value between them are used
  nowhere else (a returned score matrix, a second reader: no match).
- Q, Kt, V and P@V have one float dtype; the scale and the offset ``c`` are scalars.
- The extents of the ``arange``s are returned, not trusted: the planner proves they
  are T and S (an ``arange(1)`` broadcast would not be a coordinate).
"""

from __future__ import annotations

from dataclasses import dataclass

from ....dtypes import DType
from ....ir.core import Block, Operation, Value, defining_op
from ....ir.types import TensorType
from .terms import PRODUCTS, Fn, Idx, Leaf, Normalizer, Num, Prod, Red, Term

FLOATS = (DType.F16, DType.BF16, DType.F32)


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
