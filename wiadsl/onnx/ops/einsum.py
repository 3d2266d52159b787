"""ONNX Einsum of one or two operands, as transposes, reductions and one batched matmul.

Each letter of a two-operand equation is one of: a batch axis (in both inputs and
the output), a contracted axis (in both inputs, not the output), a free axis of one
input (in it and the output), or summed away (in one input only). The inputs are
summed over their own summed letters, transposed to ``[batch, free, contracted]``
and ``[batch, contracted, free]``, flattened to 3-D, multiplied with ``@`` and
reshaped and transposed to the output's letter order: what ``torch.einsum`` and
NumPy's ``optimize`` do for these equations. A one-operand equation is a
transpose plus a sum. An ellipsis stands for fresh letters, one per axis it covers
(right-aligned across the operands, as NumPy broadcasts them); a letter repeated in
one operand takes that operand's diagonal first (the two axes moved last, flattened,
every ``n+1``-th element: one strided slice).
"""

from __future__ import annotations

from ..graph import Node, Val
from ..shapes import Dim, Shape, numel
from .registry import op


def _dims(shape: Shape) -> str:
    return "[" + ", ".join(d.text() for d in shape) + "]"


def _parse(n: Node, ranks: list[int]) -> tuple[list[str], str]:
    equation = _without_ellipsis(n, str(n.attr("equation")).replace(" ", ""), ranks)
    count = len(ranks)
    lhs, arrow, out = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != count:
        raise n.fail(f"equation '{equation}' names {len(terms)} operands, the node has {count}")
    if not arrow:  # implicit output: the letters used once, sorted
        letters = "".join(terms)
        out = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    for term in [*terms, out]:
        if term and not term.isalpha():
            raise n.fail(f"equation '{equation}': '{term}' is not letters")
    if len(set(out)) != len(out):
        raise n.fail(f"equation '{equation}': the output '{out}' repeats a letter")
    if set(out) - set("".join(terms)):
        raise n.fail(f"equation '{equation}': the output has a letter no input has")
    return terms, out


def _without_ellipsis(n: Node, equation: str, ranks: list[int]) -> str:
    """``equation`` with each ``...`` spelled as fresh letters: the ellipsis of an
    operand of rank r with k letters covers its r - k leading axes, aligned to the
    right with the others' (and the implicit output starts with them all)."""
    if "..." not in equation:
        if "." in equation:
            raise n.fail(f"equation '{equation}': a '.' outside an ellipsis (...)")
        return equation
    lhs, arrow, out = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise n.fail(f"equation '{equation}' names {len(terms)} operands, the node has {len(ranks)}")
    covered = [rank - len(t.replace("...", "")) if "..." in t else 0 for t, rank in zip(terms, ranks)]
    if min(covered) < 0:
        raise n.fail(f"equation '{equation}': an operand has more letters than axes")
    fresh = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz" if c not in equation]
    letters = "".join(fresh[:max(covered)])
    terms = [t.replace("...", letters[len(letters) - k:]) for t, k in zip(terms, covered)]
    if arrow:
        out = out.replace("...", letters)
    else:  # NumPy's implicit output: the ellipsis axes, then the letters used once
        singles = "".join(terms).replace("...", "")
        out = letters + "".join(sorted(c for c in set(singles) if singles.count(c) == 1
                                       and c not in letters))
    return ",".join(terms) + "->" + out


def _diagonals(n: Node, x: Val, term: str) -> tuple[Val, str]:
    """``x`` with each letter repeated in ``term`` reduced to its diagonal (the term
    then names each letter once)."""
    while len(set(term)) != len(term):
        c = next(c for c in term if term.count(c) > 1)
        p, q = term.index(c), term.index(c, term.index(c) + 1)
        extent = x.shape[p]
        if extent != x.shape[q] or not extent.is_static:
            raise n.fail(f"the diagonal of letter '{c}' needs equal static extents, "
                         f"got {x.shape[p]} and {x.shape[q]}")
        others = [i for i in range(x.rank) if i not in (p, q)]
        moved = f"transpose({n.ref(x)}, {others + [p, q]})"
        flat = tuple(x.shape[i] for i in others) + (Dim(extent.value ** 2),)
        lead = ":, " * len(others)
        shape = tuple(x.shape[i] for i in others) + (extent,)
        x = n.em.bind(f"reshape({moved}, {_dims(flat)})[{lead}::{extent.value + 1}]", x.dtype,
                      shape, "diagonal")
        term = "".join(term[i] for i in others) + c
    return x, term


def _prepare(n: Node, x: Val, term: str, keep: str, order: str) -> tuple[str, dict[str, Dim]]:
    """``x`` summed over the letters not in ``keep``, transposed to ``order``."""
    if len(term) != x.rank:
        raise n.fail(f"operand '{term}' has {len(term)} letters, the tensor rank {x.rank}")
    extents = dict(zip(term, x.shape, strict=True))
    text = n.ref(x)
    summed = [i for i, c in enumerate(term) if c not in keep]
    if summed:
        text = f"reduce_sum({text}, axis={summed})"
    rest = "".join(c for c in term if c in keep)
    perm = [rest.index(c) for c in order]
    if perm != list(range(len(perm))):
        text = f"transpose({text}, {perm})"
    return text, extents


def _one_operand(n: Node, x: Val, term: str, out: str) -> Val:
    text, extents = _prepare(n, x, term, out, out)
    shape = tuple(extents[c] for c in out)
    if not out:
        return n.out(text, x.dtype, ())
    return n.out(text, x.dtype, shape)


@op("Einsum")
def _einsum(n: Node) -> list[Val]:
    xs = [n.x(i) for i in range(len(n.vals))]
    if len(xs) not in (1, 2):
        raise n.fail(f"{len(xs)} operands (only 1 or 2 are supported)")
    terms, out = _parse(n, [x.rank for x in xs])
    for i, (x, term) in enumerate(zip(xs, terms)):
        if len(term) != x.rank:
            raise n.fail(f"operand '{term}' has {len(term)} letters, the tensor rank {x.rank}")
        xs[i], terms[i] = _diagonals(n, x, term)
    if len(xs) == 1:
        return [_one_operand(n, xs[0], terms[0], out)]
    (a, b), (ta, tb) = xs, terms
    if a.dtype != b.dtype:
        raise n.fail(f"operands of types {a.dtype} and {b.dtype}")
    batch = "".join(c for c in out if c in ta and c in tb)
    free_a = "".join(c for c in out if c in ta and c not in tb)
    free_b = "".join(c for c in out if c in tb and c not in ta)
    contracted = "".join(c for c in ta if c in tb and c not in out)
    at, ea = _prepare(n, a, ta, batch + free_a + contracted, batch + free_a + contracted)
    bt, eb = _prepare(n, b, tb, batch + contracted + free_b, batch + contracted + free_b)
    extents = {**eb, **ea}
    for c in batch + contracted:
        if ea[c] != eb[c]:
            raise n.fail(f"letter '{c}' has extents {ea[c]} and {eb[c]}")

    def size(letters: str) -> Dim:
        return numel([extents[c] for c in letters])

    a3 = f"reshape({at}, {_dims((size(batch), size(free_a), size(contracted)))})"
    b3 = f"reshape({bt}, {_dims((size(batch), size(contracted), size(free_b)))})"
    grouped = batch + free_a + free_b
    if not grouped:  # a full contraction: a scalar
        return [n.out(f"reduce_sum({a3} @ {b3})", a.dtype, ())]
    grouped_shape = tuple(extents[c] for c in grouped)
    product = n.em.bind(f"reshape({a3} @ {b3}, {_dims(grouped_shape)})", a.dtype,
                        grouped_shape, "einsum")
    perm = [grouped.index(c) for c in out]
    shape = tuple(extents[c] for c in out)
    if perm == list(range(len(perm))):
        return [product]
    return [n.out(f"transpose({product.ref}, {perm})", a.dtype, shape)]
