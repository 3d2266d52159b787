"""Steps 3 and 4 of ``fuse``: vertical elementwise clusters and horizontal merging.

Vertical: from each root (last first), producers whose every reader is in the
cluster join it; the cluster becomes one ``tensor.fused_elementwise`` with the
root's result. Its operands broadcast to the iteration shape, which is the
root's shape on every execution (every input reaches the root through
broadcasting elementwise ops), so no extent reasoning is needed.

Horizontal: two ``fused_elementwise`` ops of one *static* result type that read
a common input and do not depend on each other become one op with the results
of both (one pass over the shared input).
The fused op takes the root's ``loc`` (horizontal: the later op's).
"""

from __future__ import annotations

from ..ir.copying import clone_op
from ..ir.core import Operation, Value
from ..ir.ops import create_op, op_class
from ..ir.ops_fused import FusedElementwiseOp, new_body
from ..ir.types import ScalarType, TensorType
from .fusion_body import cluster_inputs, is_fusible, kernel_name, make_body
from .fusion_state import (
    FusionState,
    adopt_loc,
    escape_reason,
    op_names,
    producer,
    replace_and_erase,
)


def fuse_elementwise(st: FusionState) -> None:
    st.renumber()
    for root in reversed(list(st.block.ops)):
        if root.parent is None or not is_fusible(root):
            continue
        ops = grow_cluster(st, root)
        if len(ops) >= st.opts.min_ops:
            build_elementwise(st, ops, [root.result], root)


def grow_cluster(st: FusionState, root: Operation) -> list[Operation]:
    t = root.result.type
    assert isinstance(t, TensorType)
    cluster = {id(root): root}
    changed = True
    while changed and len(cluster) < st.opts.max_ops:
        changed = False
        for op in list(cluster.values()):
            for v in op.operands:
                p = producer(v)
                if not st.same_block_fusible(p) or id(p) in cluster:
                    continue
                if escape_reason(v, set(cluster)) is not None:
                    continue
                if len(cluster_inputs([*cluster.values(), p], t.rank)) > st.opts.max_inputs:
                    st.ctx.remark("missed", f"not fused: cluster would exceed "
                                            f"max_inputs={st.opts.max_inputs}", p)
                    continue
                cluster[id(p)] = p
                changed = True
    ops = st.ordered(cluster.values())
    for op in ops:
        for v in op.operands:
            p = producer(v)
            if st.same_block_fusible(p) and id(p) not in cluster:
                why = escape_reason(v, set(cluster))
                if why:
                    st.ctx.remark("missed", f"not fused: {why}", p)
    return ops


def build_elementwise(st: FusionState, ops: list[Operation], outs: list[Value],
                      anchor: Operation) -> Operation:
    rank = max(o.type.rank for o in outs)  # type: ignore[union-attr]
    inputs = cluster_inputs(ops, rank)
    region, _, _ = make_body(inputs, ops, outs)
    kname = kernel_name("", ops)
    new = op_class("tensor.fused_elementwise")(inputs, [o.type for o in outs], {"kernel": kname},
                                               (), [region], [o.name_hint for o in outs])
    adopt_loc(new, anchor.loc)
    names = op_names(ops)
    anchor.insert_before(new)
    replace_and_erase(ops, outs, list(new.results))
    st.renumber()
    st.ctx.count("ops fused", len(ops))
    st.ctx.remark("fused", f"fused {names} into {kname}", new)
    return new


def fuse_horizontal(st: FusionState) -> None:
    st.renumber()
    merged = True
    while merged:
        merged = False
        fused = [op for op in st.block.ops if isinstance(op, FusedElementwiseOp)]
        for i, a in enumerate(fused):
            for b in fused[i + 1:]:
                if can_merge(st, a, b):
                    merge(st, a, b)
                    merged = True
                    break
            if merged:
                break


def can_merge(st: FusionState, a: Operation, b: Operation) -> bool:
    if a.result_types[0] != b.result_types[0] or not a.result_types[0].is_static:  # type: ignore[union-attr]
        return False
    if not {id(v) for v in a.operands} & {id(v) for v in b.operands}:
        return False
    pb = st.pos[id(b)]
    if any(st.pos.get(id(u), -1) < pb and u.parent is st.block for r in a.results for u in r.users):
        return False
    if any(producer(v) is a for v in b.operands):
        return False
    inputs = {id(v) for v in [*a.operands, *b.operands]}
    return len(inputs) <= st.opts.max_inputs


def merge(st: FusionState, a: Operation, b: Operation) -> None:
    inputs: list[Value] = []
    for v in [*a.operands, *b.operands]:
        if all(v is not w for w in inputs):
            inputs.append(v)
    region, block = new_body([ScalarType(v.type.dtype) for v in inputs])  # type: ignore[union-attr]
    arg_of = {id(v): arg for v, arg in zip(inputs, block.args, strict=True)}
    yields: list[Value] = []
    for op in (a, b):
        body = op.regions[0].blocks[0]
        mapping: dict[int, Value] = {id(ba): arg_of[id(v)]
                                     for ba, v in zip(body.args, op.operands, strict=True)}
        for inner in body.ops[:-1]:
            block.append(clone_op(inner, mapping))
        yields += [mapping.get(id(v), v) for v in body.ops[-1].operands]
    block.append(create_op("tensor.yield", yields))
    kname = f"{a.attributes.get('kernel', 'a')}+{b.attributes.get('kernel', 'b')}"
    new = op_class("tensor.fused_elementwise")(inputs, [*a.result_types, *b.result_types],
                                               {"kernel": kname}, (), [region],
                                               [r.name_hint for r in [*a.results, *b.results]])
    adopt_loc(new, b.loc if b.loc is not None else a.loc)
    b.insert_before(new)
    for old, nv in zip([*a.results, *b.results], new.results, strict=True):
        old.replace_all_uses_with(nv)
    a.erase()
    b.erase()
    st.renumber()
    st.ctx.count("ops fused horizontally", 2)
    st.ctx.remark("fused", f"horizontally fused two kernels reading a common input into {kname}", new)
