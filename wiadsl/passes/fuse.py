"""``fuse``: operator fusion into ``tensor.fused_*`` ops, with a legality/cost check.

Order (each step sees the previous one's output), per block:
1. epilogues into ``conv2d``/``matmul``: the chain of single-use elementwise ops
   of the product's shape (bias, batch norm, activation, residual add, cast);
2. reductions: elementwise producers into the reduction body, and elementwise
   consumers of the reduced value (broadcast back over the row) into its
   epilogue - softmax's ``exp(x - m) / sum`` - when the row fits on chip;
3. vertical elementwise clusters into ``fused_elementwise``;
4. horizontal: independent ``fused_elementwise`` ops of one result shape that
   read a common input become one op with several results.

Legality (the seed's ``can_fuse``): a producer whose result has other consumers,
or escapes (returned, passed to another block), is not fused; nor a cluster that
would exceed ``max_inputs`` operands or ``max_ops`` body ops (register pressure),
nor a reduction epilogue whose static row exceeds ``row_limit`` elements. Every
refusal with a reason is an optimization remark; so is every fusion.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..ir.core import Block, Operation, OpResult, Value
from ..ir.module import ModuleOp
from ..ir.ops import create_op, op_class
from ..ir.ops_fused import FusedElementwiseOp, new_body
from ..ir.types import ScalarType, TensorType
from ..rewrite.utils import clone_op
from .base import Pass, PassContext, register_pass
from .fusion_body import cluster_inputs, emit, is_fusible, kernel_name, make_body

REDUCE_KINDS = {"tensor.reduce_sum": "sum", "tensor.reduce_max": "max", "tensor.reduce_min": "min",
                "tensor.reduce_prod": "prod", "tensor.reduce_mean": "mean"}


def vname(v: Value) -> str:
    return "%" + (v.name_hint or "?")


def producer(v: Value) -> Operation | None:
    return v.op if isinstance(v, OpResult) else None


def escape_reason(v: Value, allowed: set[int]) -> str | None:
    """Why ``v`` must stay materialized (None: every reader is in ``allowed``)."""
    others = [u for u in v.users if id(u) not in allowed]
    if not others:
        return None
    if any(u.is_terminator for u in others):
        return f"{vname(v)} escapes (returned or passed to another block)"
    return f"{vname(v)} has {len(v.users)} consumers"


def fits_into(w: TensorType | ScalarType, shape: tuple) -> bool:
    """``w`` broadcasts into ``shape`` without growing it (dynamic==dynamic assumed equal)."""
    if not isinstance(w, TensorType):
        return True
    if w.rank > len(shape):
        return False
    for d, s in zip(w.shape, shape[len(shape) - w.rank:], strict=True):
        if d == 1 or d == s:
            continue
        return False
    return True


@dataclass
class FusionState:
    block: Block
    ctx: PassContext
    opts: Fuse
    pos: dict[int, int] = field(default_factory=dict)

    def renumber(self) -> None:
        self.pos = {id(op): i for i, op in enumerate(self.block.ops)}

    def ordered(self, ops) -> list[Operation]:
        return sorted(ops, key=lambda o: self.pos[id(o)])

    def same_block_fusible(self, op: Operation | None) -> bool:
        return op is not None and op.parent is self.block and is_fusible(op)


def replace_and_erase(ops: list[Operation], results: list[Value], new: list[Value]) -> None:
    for old, nv in zip(results, new, strict=True):
        if nv.name_hint is None:
            nv.name_hint = old.name_hint
        old.replace_all_uses_with(nv)
    for op in reversed(ops):
        for r in op.results:
            for u in list(r.uses):
                raise AssertionError(f"fusion left a use of {op.name} in {u.owner.name}")
        op.erase()


# ------------------------------------------------------------- 1. epilogues

def fuse_products(st: FusionState) -> None:
    for prod in list(st.block.ops):
        if prod.parent is None or prod.name not in ("tensor.conv2d", "tensor.matmul"):
            continue
        t = prod.result.type
        if not isinstance(t, TensorType):
            continue
        chain: list[Operation] = []
        cur: Value = prod.result
        while len(chain) < st.opts.max_ops:
            users = cur.users
            if not users:
                break
            why = escape_reason(cur, {id(users[0])} if len(users) == 1 else set())
            if why is not None:
                if chain or cur is not prod.result or len(users) > 1:
                    st.ctx.remark("missed", f"not fused into {short_name(prod)}: {why}", prod)
                break
            u = users[0]
            if not st.same_block_fusible(u) or u.result.type.shape != t.shape:  # type: ignore[union-attr]
                break
            others = [v for v in u.operands if v is not cur]
            if not all(fits_into(v.type, t.shape) for v in others):  # type: ignore[arg-type]
                st.ctx.remark("missed", f"not fused: an operand of {u.name} would grow the product", u)
                break
            inputs = cluster_inputs([*chain, u], t.rank, [prod.result])
            if len(inputs) > st.opts.max_inputs:
                st.ctx.remark("missed", f"not fused: epilogue would need {len(inputs)} inputs "
                                        f"(max_inputs={st.opts.max_inputs})", u)
                break
            chain.append(u)
            cur = u.result
        if not chain:
            continue
        last = chain[-1]
        inputs = cluster_inputs(chain, t.rank, [prod.result])
        region, _, _ = make_body(inputs, chain, [last.result], [ScalarType(t.dtype)], [prod.result])
        kname = kernel_name("conv" if prod.name == "tensor.conv2d" else "matmul", chain, t.shape)
        attrs = {**prod.attributes, "kernel": kname}
        new = op_class("tensor.fused_" + short_name(prod))(
            [*prod.operands, *inputs], [last.result.type], attrs, (), [region], [last.result.name_hint])
        new.loc = prod.loc
        last.insert_before(new)
        replace_and_erase([prod, *chain], [last.result], [new.result])
        st.ctx.count("ops fused", len(chain) + 1)
        st.ctx.remark("fused", f"fused {len(chain)} epilogue op(s) into {kname}", new)


def short_name(op: Operation) -> str:
    return op.name.split(".", 1)[1]


# ------------------------------------------------------------ 2. reductions

def grow_up(st: FusionState, roots: list[Value], limit: int) -> list[Operation]:
    """Fusible producers reachable upward from ``roots`` (no use restrictions)."""
    found: dict[int, Operation] = {}
    stack = list(roots)
    while stack and len(found) < limit:
        p = producer(stack.pop())
        if not st.same_block_fusible(p) or id(p) in found:
            continue
        found[id(p)] = p  # type: ignore[index]
        stack.extend(p.operands)  # type: ignore[union-attr]
    return st.ordered(found.values())


def fuse_reductions(st: FusionState) -> None:
    for red in list(st.block.ops):
        if red.parent is None or red.name not in REDUCE_KINDS:
            continue
        st.renumber()
        fuse_one_reduction(st, red)


def fuse_one_reduction(st: FusionState, red: Operation) -> None:
    v = red.operands[0]
    vt = v.type
    assert isinstance(vt, TensorType)
    axes = sorted(a % vt.rank for a in red.attributes["axes"])
    keep = bool(red.attributes.get("keepdims", False))
    r = red.result
    # Consumers (epilogue): elementwise ops of v's shape downstream of r.
    epi: list[Operation] = []
    row = 1
    for a in axes:
        row = None if row is None or vt.shape[a] is None else row * vt.shape[a]
    can_epi = keep or axes == list(range(len(axes)))
    if can_epi and row is not None and row > st.opts.row_limit:
        st.ctx.remark("missed", f"not fused: reduced row of {row} elements would not fit "
                                f"(row_limit={st.opts.row_limit})", red)
        can_epi = False
    prods = grow_up(st, [v], st.opts.max_ops)
    pset = {id(p) for p in prods}
    if can_epi:
        frontier, eset = [r], {id(red)}
        while frontier:
            val = frontier.pop()
            for u in val.users:
                if id(u) in eset or not st.same_block_fusible(u) or u.result.type != vt:
                    continue
                ok = all(x is r or (producer(x) is not None and (id(producer(x)) in eset or id(producer(x)) in pset))
                         or (fits_into(x.type, vt.shape) and defined_before(st, x, red))
                         for x in u.operands)
                if ok and len(epi) < st.opts.max_ops:
                    epi.append(u)
                    eset.add(id(u))
                    frontier.append(u.result)
        epi = st.ordered(epi)
    # Shrink producers: each must be read only by producers, the reduction or the epilogue.
    allowed = pset | {id(red)} | {id(e) for e in epi}
    changed = True
    while changed:
        changed = False
        for p in list(prods):
            why = escape_reason(p.result, allowed)
            if why is not None:
                prods.remove(p)
                pset.discard(id(p))
                allowed.discard(id(p))
                changed = True
                st.ctx.remark("missed", f"not fused into the reduction: {why}", p)
    # Epilogue ops reading a dropped producer read it as an input (defined before red?).
    epi = [e for e in epi if all(x is r or producer(x) is None or id(producer(x)) in pset
                                 or id(producer(x)) in {id(o) for o in epi}
                                 or defined_before(st, x, red) for x in e.operands)]
    if prods and producer(v) not in prods:
        prods = []
    if not prods and not epi:
        return
    body_ops = prods
    inputs = cluster_inputs([*body_ops, *epi], vt.rank, [r]) if prods or epi else []
    if not prods:
        inputs = [v, *[i for i in inputs if i is not v]]
    if len(inputs) > st.opts.max_inputs:
        st.ctx.remark("missed", f"not fused: reduction would need {len(inputs)} inputs", red)
        return
    kind = REDUCE_KINDS[red.name]
    region0, _, _ = make_body(inputs, body_ops, [v])
    regions = [region0]
    outs: list[Value] = []
    if epi:
        eset = {id(e) for e in epi}
        outs = [e.result for e in epi if any(id(u) not in eset for u in e.result.users)]
        rt = ScalarType(r.type.dtype)  # type: ignore[union-attr]
        region1, block1 = new_body([*(ScalarType(i.type.dtype) for i in inputs), rt])  # type: ignore[union-attr]
        mapping = {id(i): a for i, a in zip(inputs, block1.args, strict=False)}
        mapping[id(r)] = block1.args[-1]
        emit(block1, [*body_ops, *epi], mapping)
        block1.append(create_op("tensor.yield", [mapping[id(o)] for o in outs]))
        regions.append(region1)
    kname = kernel_name("reduce_" + kind, [*prods, *epi])
    attrs = {"kinds": [kind], "axes": list(red.attributes["axes"]), "kernel": kname}
    if keep:
        attrs["keepdims"] = True
    new = op_class("tensor.fused_reduce")(inputs, [r.type, *(o.type for o in outs)], attrs, (),
                                          regions, [r.name_hint, *(o.name_hint for o in outs)])
    new.loc = red.loc
    red.insert_before(new)
    olds = [r, *outs]
    for old, nv in zip(olds, new.results, strict=True):
        old.replace_all_uses_with(nv)
    for op in reversed(st.ordered([*prods, red, *epi])):
        if all(not x.uses for x in op.results):
            op.erase()
    st.ctx.count("ops fused", len(prods) + len(epi) + 1)
    st.ctx.remark("fused", f"fused {len(prods)} producer(s) and {len(epi)} consumer(s) into {kname}", new)


def defined_before(st: FusionState, x: Value, op: Operation) -> bool:
    p = producer(x)
    if p is None or p.parent is not st.block:
        return True  # block arguments and values of dominating blocks
    return st.pos.get(id(p), 1 << 30) < st.pos[id(op)]


# ---------------------------------------------------------- 3. elementwise

def fuse_elementwise(st: FusionState) -> None:
    st.renumber()
    for root in reversed(list(st.block.ops)):
        if root.parent is None or not is_fusible(root):
            continue
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
                    why = escape_reason(v, set(cluster))
                    if why is not None:
                        continue
                    trial = [*cluster.values(), p]
                    if len(cluster_inputs(trial, t.rank)) > st.opts.max_inputs:
                        st.ctx.remark("missed", f"not fused: cluster would exceed "
                                                f"max_inputs={st.opts.max_inputs}", p)
                        continue
                    cluster[id(p)] = p  # type: ignore[index]
                    changed = True
        ops = st.ordered(cluster.values())
        for op in ops:
            for v in op.operands:
                p = producer(v)
                if st.same_block_fusible(p) and id(p) not in cluster:
                    why = escape_reason(v, set(cluster))
                    if why:
                        st.ctx.remark("missed", f"not fused: {why}", p)
        if len(ops) < st.opts.min_ops:
            continue
        build_elementwise(st, ops, [root.result], root)


def build_elementwise(st: FusionState, ops: list[Operation], outs: list[Value],
                      anchor: Operation) -> Operation:
    rank = max(o.type.rank for o in outs)  # type: ignore[union-attr]
    inputs = cluster_inputs(ops, rank)
    region, _, _ = make_body(inputs, ops, outs)
    kname = kernel_name("", ops)
    new = op_class("tensor.fused_elementwise")(inputs, [o.type for o in outs], {"kernel": kname},
                                               (), [region], [o.name_hint for o in outs])
    new.loc = anchor.loc
    anchor.insert_before(new)
    replace_and_erase(ops, outs, list(new.results))
    st.renumber()
    st.ctx.count("ops fused", len(ops))
    st.ctx.remark("fused", f"fused {len(ops)} elementwise ops into {kname}", new)
    return new


# ------------------------------------------------------------ 4. horizontal

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
        mapping = {id(ba): arg_of[id(v)] for ba, v in zip(body.args, op.operands, strict=True)}
        for inner in body.ops[:-1]:
            block.append(clone_op(inner, mapping))
        yields += [mapping.get(id(v), v) for v in body.ops[-1].operands]
    block.append(create_op("tensor.yield", yields))
    kname = f"{a.attributes.get('kernel', 'a')}+{b.attributes.get('kernel', 'b')}"
    new = op_class("tensor.fused_elementwise")(inputs, [*a.result_types, *b.result_types],
                                               {"kernel": kname}, (), [region],
                                               [r.name_hint for r in [*a.results, *b.results]])
    b.insert_before(new)
    for old, nv in zip([*a.results, *b.results], new.results, strict=True):
        old.replace_all_uses_with(nv)
    a.erase()
    b.erase()
    st.renumber()
    st.ctx.count("ops fused horizontally", 2)
    st.ctx.remark("fused", f"horizontally fused two kernels reading a common input into {kname}", new)


@register_pass
@dataclass(frozen=True)
class Fuse(Pass):
    """Options: ``max_inputs`` (operands per fused op), ``max_ops`` (body size),
    ``row_limit`` (elements of a reduced row kept on chip), ``min_ops`` (smallest
    elementwise cluster worth a fused op), ``horizontal``."""

    name = "fuse"
    max_inputs: int = 16
    max_ops: int = 64
    row_limit: int = 16384
    min_ops: int = 2
    horizontal: bool = True

    def run(self, module: ModuleOp, ctx: PassContext) -> None:
        for func in module:
            for block in func.blocks:
                st = FusionState(block, ctx, self)
                st.renumber()
                fuse_products(st)
                fuse_reductions(st)
                fuse_elementwise(st)
                if self.horizontal:
                    fuse_horizontal(st)
