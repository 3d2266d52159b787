"""Fuse consecutive outlined parallel loops over the same range into one loop.

After ``parallelize``, a softmax is three calls over the same rows:

    func.call @k.par0(%c0, %rows, ...) {parallel = c0}   // row max        -> m[i]
    func.call @k.par1(%c0, %rows, ...) {parallel = c1}   // sum(exp(x - m)) -> s[i]
    func.call @k.par2(%c0, %rows, ...) {parallel = c2}   // exp(x - m) / s  -> y[i, :]

each streaming the whole input. When iteration i of the later loop touches only
the part of every shared buffer that iteration i of the earlier loop touches,
running both bodies in one loop (body 1 then body 2, per i) computes the same
values, and a row is read while it is still in L1. This pass does that fusion.

Legality (checked per pair, on the callees):
- Both calls are ``parallel`` with the same ``lo`` and ``hi``, and only pure ops
  (constants, index arithmetic, ``loop.alloc``, ``tensor.dim``) lie between them;
  those are moved above the first call.
- Every buffer one loop stores and the other loads or stores is a ``loop.alloc``
  of the calling function (no hidden aliasing), and every such access is
  *row-local* with one common stride ``a``: its offset is ``a * i + r`` with
  ``0 <= r < a`` over the static ranges of the inner induction variables
  (``affine``). So iteration i of both loops owns ``[a*i, a*i + a)``.

Invariants: the fused callee is the first one, extended with the second's
parameters and blocks (its latch now runs the second body, whose latch closes
the loop); the second callee is removed. Costs add.
"""

from __future__ import annotations

from ..ir.core import Block, BlockArgument, Operation, OpResult, Value
from ..ir.module import FuncOp, ModuleOp
from .builder import const_value

PURE_BETWEEN = frozenset({"arith.constant", "arith.add", "arith.sub", "arith.mul", "arith.max",
                          "arith.min", "arith.cmpi", "arith.select", "loop.alloc", "tensor.dim",
                          "loop.retype"})
Range = tuple[int, int, int]  # offset = coef * i + r, lo <= r <= hi


def loop_parts(g: FuncOp) -> tuple[Block, BlockArgument, Block, Operation] | None:
    """(header, iv, first body block, latch branch) of an outlined loop (parallelize.py)."""
    entry = g.entry
    term = entry.terminator
    if term is None or term.name != "cf.br":
        return None
    header = term.successors[0].block
    branch = header.terminator
    if branch is None or branch.name != "cf.cond_br" or len(header.args) != 1:
        return None
    latches = [b for b in g.blocks if b is not entry and header in b.successors]
    if len(latches) != 1:
        return None
    latch = latches[0].terminator
    assert latch is not None
    return header, header.args[0], branch.successors[0].block, latch


def affine(v: Value, iv: Value, bounds: dict[int, tuple[int, int]]) -> Range | None:
    """``v`` as ``coef * iv + r`` with ``r`` in [lo, hi], or None when not provable."""
    c = const_value(v)
    if c is not None:
        return (0, int(c), int(c))
    if v is iv:
        return (1, 0, 0)
    if id(v) in bounds:
        lo, hi = bounds[id(v)]
        return (0, lo, hi)
    if not isinstance(v, OpResult):
        return None
    op = v.op
    if op.name in ("arith.add", "arith.mul"):
        x, y = (affine(o, iv, bounds) for o in op.operands)
        if x is None or y is None:
            return None
        if op.name == "arith.add":
            return (x[0] + y[0], x[1] + y[1], x[2] + y[2])
        k = y if y[0] == 0 and y[1] == y[2] else x if x[0] == 0 and x[1] == x[2] else None
        other = x if k is y else y
        if k is None or k[1] < 0:
            return None
        return (other[0] * k[1], other[1] * k[1], other[2] * k[1])
    return None


def inner_bounds(g: FuncOp, header: Block) -> dict[int, tuple[int, int]]:
    """Static [lo, hi - 1] of every inner LoopBuilder induction variable of ``g``."""
    out: dict[int, tuple[int, int]] = {}
    for b in g.blocks:
        if b is header or not b.args or not b.ops or b.ops[0].name != "arith.cmpi":
            continue
        cmp = b.ops[0]
        if cmp.operands[0] is not b.args[0] or cmp.attributes.get("predicate") != "slt":
            continue
        hi = const_value(cmp.operands[1])
        entries = [p.terminator for p in g.blocks if b in p.successors and p.terminator is not None
                   and p.terminator.name == "cf.br" and p.terminator.successors[0].block is b]
        los = [const_value(t.successors[0].args[0]) for t in entries]
        # the entry edge starts at a constant; the back edge adds 1 (not constant)
        starts = [lo for lo in los if lo is not None]
        if hi is not None and len(starts) == 1 and len(los) == 2:
            out[id(b.args[0])] = (int(starts[0]), int(hi) - 1)
    return out


def accesses(g: FuncOp, iv: Value, bounds: dict[int, tuple[int, int]]
             ) -> list[tuple[int, bool, Range | None]]:
    """(parameter index, is_store, offset range) of every load and store of a parameter."""
    index = {id(a): k for k, a in enumerate(g.args)}
    out = []
    for b in g.blocks:
        for op in b.ops:
            if op.name == "loop.load":
                buf, off, store = op.operands[0], op.operands[1], False
            elif op.name == "loop.store":
                buf, off, store = op.operands[1], op.operands[2], True
            elif op.name in ("loop.copy", "loop.gemm", "loop.conv2d", "loop.depthwise2d",
                             "loop.maxpool2d", "loop.qgemm", "func.call"):
                for v in op.operands:  # opaque memory effects: treat as stores anywhere
                    if id(v) in index:
                        out.append((index[id(v)], True, None))
                continue
            else:
                continue
            if id(buf) in index:
                out.append((index[id(buf)], store, affine(off, iv, bounds)))
    return out


def root_buffer(v: Value) -> Value:
    """``v`` with its ``loop.retype`` views taken off: the buffer they name."""
    while isinstance(v, OpResult) and v.op.name == "loop.retype":
        v = v.op.operands[0]
    return v


def _row_local(r: Range | None, stride: int) -> bool:
    return r is not None and r[0] == stride and r[1] >= 0 and r[2] < stride


def legal(call1: Operation, g1: FuncOp, call2: Operation, g2: FuncOp) -> bool:
    parts1, parts2 = loop_parts(g1), loop_parts(g2)
    if parts1 is None or parts2 is None:
        return False
    acc = []
    for call, g, (header, iv, _, _) in ((call1, g1, parts1), (call2, g2, parts2)):
        for k, store, r in accesses(g, iv, inner_bounds(g, header)):
            acc.append((id(root_buffer(call.operands[k])), root_buffer(call.operands[k]), store, r, g is g1))
    for key in {a[0] for a in acc}:
        group = [a for a in acc if a[0] == key]
        firsts, seconds = [a for a in group if a[4]], [a for a in group if not a[4]]
        if not firsts or not seconds or not any(a[2] for a in group):
            continue  # one loop only, or read-only: no ordering between the loops
        root = group[0][1]
        if not (isinstance(root, OpResult) and root.op.name == "loop.alloc"):
            return False
        strides = {a[3][0] for a in group if a[3] is not None}
        if len(strides) != 1:
            return False
        (stride,) = strides
        if stride <= 0 or not all(_row_local(a[3], stride) for a in group):
            return False
    return True


def _same(a: Value, b: Value) -> bool:
    return a is b or (const_value(a) is not None and const_value(a) == const_value(b))


def fuse_pair(module: ModuleOp, call1: Operation, call2: Operation) -> bool:
    """Fuse ``call2`` into ``call1`` when legal (see the module doc); whether it did."""
    g1, g2 = module[call1.attributes["callee"]], module[call2.attributes["callee"]]
    if g1 is g2 or not (_same(call1.operands[0], call2.operands[0]) and _same(call1.operands[1], call2.operands[1])):
        return False
    if not legal(call1, g1, call2, g2):
        return False
    _, iv1, _, latch1 = loop_parts(g1)  # type: ignore[misc]
    header2, iv2, body2, latch2 = loop_parts(g2)  # type: ignore[misc]
    header1 = latch1.successors[0].block
    # g2's parameters become new parameters of g1; lo, hi are g1's own
    mapping: dict[int, Value] = {id(g2.args[0]): g1.args[0], id(g2.args[1]): g1.args[1], id(iv2): iv1}
    extra: list[Value] = []
    for a, actual in zip(g2.args[2:], call2.operands[2:], strict=True):
        same = [k for k, v in enumerate(call1.operands) if k >= 2 and v is actual and g1.args[k].type == a.type]
        if same:  # the caller passes this value to g1 already: share the parameter
            mapping[id(a)] = g1.args[same[0]]
        else:
            mapping[id(a)] = g1.entry.add_arg(a.type, a.name_hint)
            extra.append(actual)
    entry_term = g1.entry.terminator
    assert entry_term is not None
    for op in list(g2.entry.ops[:-1]):  # constants
        entry_term.insert_before(op.detach())
    moved = [b for b in g2.blocks if b not in (g2.entry, header2) and b.terminator is not None
             and b.terminator.name != "func.return"]
    for b in moved:
        g2.body.remove_block(b)
        g1.body.add_block(b)
    for b in [g1.entry, *moved]:
        for op in b.ops:
            for i, v in enumerate(op.operands):
                if id(v) in mapping:
                    op.set_operand(i, mapping[id(v)])
            for i, s in enumerate(op.successors):
                if any(id(x) in mapping for x in s.args):
                    op.set_successor(i, s.block, [mapping.get(id(x), x) for x in s.args])
    latch1.set_successor(0, body2, [])  # body 1, then body 2 for the same i
    latch2.set_successor(0, header1, list(latch2.successors[0].args))  # i + 1: g2's iv is g1's now
    call1.set_operands([*call1.operands, *extra])
    call1.attributes["parallel"] = int(call1.attributes["parallel"]) + int(call2.attributes["parallel"])
    call2.erase()
    for b in g2.blocks:  # g2's entry, header and return: forget their uses, then g2
        for op in b.ops:
            op.drop_all_references()
    module.remove(g2.name)
    return True


def fuse_func(module: ModuleOp, func: FuncOp) -> int:
    """Fuse runs of parallel calls in ``func`` (following single ``br`` edges); how many."""
    count = 0
    changed = True
    while changed:
        changed = False
        calls = [op for b in func.blocks for op in b.ops
                 if op.name == "func.call" and op.attributes.get("parallel")]
        for call1 in calls:
            call2, between = _next_parallel_call(call1)
            if call2 is None:
                continue
            for op in between:  # pure: hoist above the first call
                call1.insert_before(op.detach())
            if fuse_pair(module, call1, call2):
                count += 1
                changed = True
                break
    return count


def _next_parallel_call(call: Operation) -> tuple[Operation | None, list[Operation]]:
    """The next parallel call after ``call`` with only pure ops between, following
    unconditional branches to blocks with a single predecessor."""
    block = call.parent
    assert block is not None
    ops = block.ops[block.ops.index(call) + 1:]
    between: list[Operation] = []
    seen: set[int] = set()
    while True:
        for op in ops:
            if op.name == "func.call" and op.attributes.get("parallel"):
                return op, between
            if op.name == "cf.br" and not op.successors[0].args:
                nxt = op.successors[0].block
                preds = [b for b in nxt.parent.blocks if nxt in b.successors] if nxt.parent else []
                if len(preds) != 1 or id(nxt) in seen:
                    return None, []
                seen.add(id(nxt))
                ops = list(nxt.ops)
                break
            if op.name not in PURE_BETWEEN:
                return None, []
            between.append(op)
        else:
            return None, []


__all__ = ["affine", "fuse_func", "fuse_pair", "legal", "root_buffer"]
