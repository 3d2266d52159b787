"""Step 2 of ``fuse``: reductions become ``tensor.fused_reduce`` row kernels.

Elementwise producers of the reduced operand ``v`` move into body #0; elementwise
consumers of the reduced value ``r`` (broadcast back over ``v``'s shape) move into
the epilogue, body #1 - softmax's ``exp(x - m) / sum`` - when the row fits on
chip (``row_limit``) and ``r`` broadcasts back (keepdims, or leading axes).

Legality:
- producers: every reader of a producer is another producer, the reduction or
  an epilogue op (else it stays materialized, with a remark);
- epilogue ops: result type equal to ``v``'s, and every operand is ``r``, a fused
  op's result, or a value defined before the reduction that broadcasts into
  ``v`` on every execution (``extents.fits``). The fused op's operands *form*
  its iteration shape, so an operand whose dynamic extent is merely *assumed*
  equal to ``v``'s could grow the reduction at run time (an extent of 1 in ``v``
  broadcast up) and give wrong sums: such ops are not fused, with a remark.
The fused op takes the reduction's ``loc``.
"""

from __future__ import annotations

from ..ir.core import Operation, Value
from ..ir.ops import create_op, op_class
from ..ir.ops_fused import new_body
from ..ir.types import ScalarType, TensorType
from .fusion_body import cluster_inputs, emit, kernel_name, make_body
from .fusion_state import FusionState, adopt_loc, escape_reason, op_names, producer, vname

REDUCE_KINDS = {"tensor.reduce_sum": "sum", "tensor.reduce_max": "max", "tensor.reduce_min": "min",
                "tensor.reduce_prod": "prod", "tensor.reduce_mean": "mean"}


def fuse_reductions(st: FusionState) -> None:
    for red in list(st.block.ops):
        if red.parent is None or red.name not in REDUCE_KINDS:
            continue
        st.renumber()
        fuse_one_reduction(st, red)


def grow_up(st: FusionState, roots: list[Value], limit: int) -> list[Operation]:
    """Fusible producers reachable upward from ``roots`` (no use restrictions)."""
    found: dict[int, Operation] = {}
    stack = list(roots)
    while stack and len(found) < limit:
        p = producer(stack.pop())
        if not st.same_block_fusible(p) or id(p) in found:
            continue
        found[id(p)] = p
        stack.extend(p.operands)
    return st.ordered(found.values())


def row_size(vt: TensorType, axes: list[int]) -> int | None:
    row: int | None = 1
    for a in axes:
        d = vt.shape[a]
        row = None if row is None or d is None else row * d
    return row


def grow_epilogue(st: FusionState, red: Operation, prods: list[Operation]) -> list[Operation]:
    """Elementwise consumers downstream of the reduced value that keep ``v``'s shape."""
    v, r = red.operands[0], red.result
    vt = v.type
    pset = {id(p) for p in prods}
    ext = st.extents()
    target = ext.of(v)
    epi: list[Operation] = []
    frontier, eset = [r], {id(red)}
    while frontier:
        val = frontier.pop()
        for u in val.users:
            if id(u) in eset or not st.same_block_fusible(u) or u.result.type != vt:
                continue
            outside = [x for x in u.operands if x is not r and not (
                producer(x) is not None and id(producer(x)) in eset)]
            unproven = [x for x in outside if not ext.fits(x, target)]
            if unproven:
                st.ctx.remark("missed", f"not fused into the reduction: {vname(unproven[0])} "
                                        f"({unproven[0].type}) may not match the reduced "
                                        f"operand {vt} at run time", u)
                continue
            if not all(id(producer(x)) in pset or st.defined_before(x, red)
                       for x in outside):
                continue
            if len(epi) < st.opts.max_ops:
                epi.append(u)
                eset.add(id(u))
                frontier.append(u.result)
    return st.ordered(epi)


def shrink_producers(st: FusionState, red: Operation, prods: list[Operation],
                     epi: list[Operation]) -> list[Operation]:
    """Drop producers read outside the fused op (with a remark each)."""
    pset = {id(p) for p in prods}
    allowed = pset | {id(red)} | {id(e) for e in epi}
    prods = list(prods)
    changed = True
    while changed:
        changed = False
        for p in list(prods):
            why = escape_reason(p.result, allowed)
            if why is not None:
                prods.remove(p)
                allowed.discard(id(p))
                changed = True
                st.ctx.remark("missed", f"not fused into the reduction: {why}", p)
    return prods


def fuse_one_reduction(st: FusionState, red: Operation) -> None:
    v, r = red.operands[0], red.result
    vt = v.type
    assert isinstance(vt, TensorType)
    axes = sorted(a % vt.rank for a in red.attributes["axes"])
    keep = bool(red.attributes.get("keepdims", False))
    can_epi = keep or axes == list(range(len(axes)))
    row = row_size(vt, axes)
    if can_epi and row is not None and row > st.opts.row_limit:
        st.ctx.remark("missed", f"not fused: reduced row of {row} elements would not fit "
                                f"(row_limit={st.opts.row_limit})", red)
        can_epi = False
    prods = grow_up(st, [v], st.opts.max_ops)
    epi = grow_epilogue(st, red, prods) if can_epi else []
    prods = shrink_producers(st, red, prods, epi)
    pset = {id(p) for p in prods}
    eids = {id(o) for o in epi}
    # Epilogue ops reading a dropped producer read it as an input (when defined before red).
    epi = [e for e in epi if all(x is r or producer(x) is None or id(producer(x)) in pset
                                 or id(producer(x)) in eids
                                 or st.defined_before(x, red) for x in e.operands)]
    if prods and producer(v) not in prods:
        prods = []
    if not prods and not epi:
        return
    inputs = cluster_inputs([*prods, *epi], vt.rank, [r])
    if not prods:
        inputs = [v, *[i for i in inputs if i is not v]]
    if len(inputs) > st.opts.max_inputs:
        st.ctx.remark("missed", f"not fused: reduction would need {len(inputs)} inputs", red)
        return
    build_reduce(st, red, prods, epi, inputs, keep)


def build_reduce(st: FusionState, red: Operation, prods: list[Operation], epi: list[Operation],
                 inputs: list[Value], keep: bool) -> None:
    v, r = red.operands[0], red.result
    kind = REDUCE_KINDS[red.name]
    region0, _, _ = make_body(inputs, prods, [v])
    regions = [region0]
    outs: list[Value] = []
    if epi:
        eset = {id(e) for e in epi}
        outs = [e.result for e in epi if any(id(u) not in eset for u in e.result.users)]
        rt = ScalarType(r.type.dtype)  # type: ignore[union-attr]
        region1, block1 = new_body([*(ScalarType(i.type.dtype) for i in inputs), rt])  # type: ignore[union-attr]
        mapping: dict[int, Value] = {id(i): a for i, a in zip(inputs, block1.args, strict=False)}
        mapping[id(r)] = block1.args[-1]
        emit(block1, [*prods, *epi], mapping)
        block1.append(create_op("tensor.yield", [mapping[id(o)] for o in outs]))
        regions.append(region1)
    kname = kernel_name("reduce_" + kind, [*prods, *epi])
    attrs: dict[str, object] = {"kinds": [kind], "axes": list(red.attributes["axes"]),
                                "kernel": kname}
    if keep:
        attrs["keepdims"] = True
    new = op_class("tensor.fused_reduce")(inputs, [r.type, *(o.type for o in outs)], attrs, (),
                                          regions, [r.name_hint, *(o.name_hint for o in outs)])
    adopt_loc(new, red.loc)
    names = op_names([*prods, *epi])
    red.insert_before(new)
    for old, nv in zip([r, *outs], new.results, strict=True):
        old.replace_all_uses_with(nv)
    for op in reversed(st.ordered([*prods, red, *epi])):
        if all(not x.uses for x in op.results):
            op.erase()
    st.ctx.count("ops fused", len(prods) + len(epi) + 1)
    st.ctx.remark("fused", f"fused {names} into {kname} ({len(prods)} producer(s), "
                           f"{len(epi)} consumer(s))", new)
