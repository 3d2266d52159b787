"""Outline ``parallel`` loops into functions that a backend may run on threads.

A loop whose header ``cond_br`` carries ``parallel`` (``LoopBuilder.loop``) and
that is not inside another parallel loop becomes

    func.call @<func>.par<k>(%lo, %hi, <captured>...) {parallel = <cost>} : (...) -> ()
    br ^exit

where ``@<func>.par<k>(%lo, %hi, ...)`` runs the same loop from ``%lo`` to
``%hi``. Sequentially that is exactly the original loop, so the interpreter
(and any backend that ignores the attribute) runs it unchanged; the CPU backend
splits ``[lo, hi)`` over threads when ``(hi - lo) * cost`` is large enough. A loop
whose static work is below the pass's ``min_cost`` stays inline, or in a large
function (``SERIAL_MIN_OPS``) becomes a plain call of ``@<func>.loop<k>`` (no
attribute: never split).

Invariants:
- The loop blocks move into the new function unchanged; values defined outside
  become parameters, except ``arith.constant``s, which are re-created inside (so
  static extents stay static for LLVM). Parameter 1 (``%hi``) replaces the
  header comparison's bound.
- Only loops without iteration values, whose only exit is the header's false
  edge and whose body holds no self-threaded kernel (``loop.gemm``, ``loop.qgemm``),
  are outlined; others stay as they are. A loop of one static iteration is not.
- ``cost`` estimates scalar ops per iteration: ops per block times the static
  trip counts of the inner loops around it (64 for a dynamic one); a
  ``loop.conv2d`` or ``loop.depthwise2d`` counts its multiply-adds.
"""

from __future__ import annotations

import re

from ..ir.builder import Builder
from ..ir.core import Block, BlockArgument, Operation, OpResult, Value
from ..ir.dominance import DominanceInfo
from ..ir.module import FuncOp, ModuleOp
from ..ir.types import INDEX
from .builder import const_value

#: Ops that spawn their own threads: a loop around them stays serial. (A parallel loop
#: around a ``loop.conv2d`` -- a batch of images -- is outlined: inside a chunk the
#: convolution finds the pool busy and runs on its chunk's thread.)
THREADED_OPS = frozenset({"loop.gemm", "loop.qgemm"})
DYNAMIC_TRIP = 64
#: Ops from which a function's loops below ``min_cost`` are outlined too, as plain
#: calls: a kernel function left without loops is glue that codegen.py does not
#: optimize (ResNet-18's, 2,600 ops with 18 small pads and epilogues inline, made its
#: module's -O2 take 206 ms instead of 130), and ``merge-functions`` then shares the
#: small loops that layers repeat. In a small function the outlined loops cost more
#: than they save (LLVM inlines them back): the example kernels, 200-400 ops, compiled
#: in 5-10 ms more each.
SERIAL_MIN_OPS = 1000
#: the names of outlined loops: ``<func>.par<k>`` (parallel), ``<func>.loop<k>`` (serial)
OUTLINED = re.compile(r"\.(?:par|loop)\d+$")


def parallel_headers(func: FuncOp) -> list[Block]:
    """Headers of loops marked ``parallel``, in block order."""
    out = []
    for b in func.blocks:
        t = b.terminator
        if t is not None and t.name == "cf.cond_br" and t.attributes.get("parallel"):
            out.append(b)
    return out


Preds = dict[int, list[Block]]


def predecessors(func: FuncOp) -> Preds:
    """Every block's predecessors (``Block.predecessors`` scans the region each time)."""
    preds: Preds = {id(b): [] for b in func.blocks}
    for b in func.blocks:
        for s in dict.fromkeys(b.successors):
            preds[id(s)].append(b)
    return preds


def natural_loop(header: Block, dom: DominanceInfo, preds: Preds) -> list[Block] | None:
    """The blocks of the loop headed by ``header`` (header first); None when it
    has no back edge."""
    latches = [p for p in preds[id(header)] if dom.dominates(header, p)]
    if not latches:
        return None
    body, stack = [header], list(latches)
    seen = {id(header)}
    while stack:
        b = stack.pop()
        if id(b) in seen:
            continue
        seen.add(id(b))
        body.append(b)
        stack.extend(preds[id(b)])
    return body


def _trip(header: Block, preds: Preds) -> int:
    """The static trip count of a LoopBuilder loop header (DYNAMIC_TRIP if unknown)."""
    cmp = header.ops[0] if header.ops else None
    if cmp is None or cmp.name != "arith.cmpi" or not header.args:
        return DYNAMIC_TRIP
    hi = const_value(cmp.operands[1])
    lo_values = [t.successors[0].args[0] for p in preds[id(header)]
                 if (t := p.terminator) is not None and t.name == "cf.br" and t.successors[0].args]
    lo = const_value(lo_values[0]) if lo_values else None
    if hi is None or lo is None:
        return DYNAMIC_TRIP
    return max(0, int(hi) - int(lo))


def iteration_cost(blocks: list[Block], dom: DominanceInfo, preds: Preds) -> int:
    """Scalar ops per iteration of the loop ``blocks`` (header first)."""
    inner = {id(b): natural_loop(b, dom, preds) for b in blocks[1:]}
    weight = {id(b): 1 for b in blocks}
    for h in blocks[1:]:
        body = inner[id(h)]
        if body is None:
            continue
        trip = _trip(h, preds)
        for b in body[1:]:
            weight[id(b)] *= max(1, trip)
    return max(1, sum((len(b.ops) + sum(_kernel_work(op) for op in b.ops)) * weight[id(b)]
                      for b in blocks[1:]))


def _kernel_work(op: Operation) -> int:
    """Multiply-adds (compares) of a ``loop.conv2d``, ``loop.depthwise2d`` or
    ``loop.maxpool2d`` beyond the one op it counts as (static extents; DYNAMIC_TRIP per
    dynamic one); 0 for any other op."""
    if op.name == "loop.conv2d":
        c, _, _, o, kh, kw, ho, wo = (const_value(v) for v in op.operands[5:13])
        extents = (c, o, kh, kw, ho, wo)
        if "chunk" in op.attributes:  # a chunk of the image's pixels (loops/conv.py)
            extents = (c, op.attributes.get("channels", o), kh, kw, op.attributes["chunk"])
    elif op.name == "loop.depthwise2d":
        ho, wo = (const_value(v) for v in op.operands[9:11])
        extents = (*op.attributes["kernel"], ho, wo, op.attributes.get("block", 1))
    elif op.name == "loop.maxpool2d":
        ho, wo, planes = (const_value(v) for v in op.operands[6:9])
        extents = (*op.attributes["kernel"], ho, wo, planes)
    else:
        return 0
    work = 1
    for e in extents:
        work *= int(e) if e is not None else DYNAMIC_TRIP
    return work - 1


def _defined_in(v: Value, inside: set[int]) -> bool:
    if isinstance(v, BlockArgument):
        return id(v.block) in inside
    assert isinstance(v, OpResult)
    return v.op.parent is not None and id(v.op.parent) in inside


def outline(module: ModuleOp, func: FuncOp, header: Block, dom: DominanceInfo, preds: Preds,
            index: int, parallel: bool = True) -> bool:
    """Outline the parallel loop at ``header``; False (nothing changed) when it does not
    qualify. ``preds`` is kept up to date and ``dom`` stays right for the blocks left in
    ``func`` (a single-entry, single-exit loop becomes an edge from its entry to its exit:
    the dominance between the other blocks is unchanged), so one analysis serves every
    loop of a function (recomputed per loop, it grew with loops x blocks)."""
    blocks = natural_loop(header, dom, preds)
    branch = header.terminator
    if blocks is None or branch is None or len(header.args) != 1 or len(header.ops) != 2:
        return False
    cmp = header.ops[0]
    if cmp.name != "arith.cmpi" or cmp.operands[0] is not header.args[0] or branch.operands[0] is not cmp.results[0]:
        return False
    inside = {id(b) for b in blocks}
    exit_block = branch.successors[1].block
    entries = [p for p in preds[id(header)] if id(p) not in inside]
    if len(entries) != 1 or exit_block.args or id(exit_block) in inside:
        return False
    pre = entries[0]
    enter = pre.terminator
    if enter is None or enter.name != "cf.br":
        return False
    for b in blocks:
        for op in b.ops:
            if op.name in THREADED_OPS or op.name == "func.return":
                return False
            for s in op.successors:
                if id(s.block) not in inside and not (op is branch and s.block is exit_block):
                    return False
    cost = iteration_cost(blocks, dom, preds)
    lo, hi = enter.successors[0].args[0], cmp.operands[1]
    captured: list[Value] = []
    seen: set[int] = set()
    for b in blocks:
        for op in b.ops:
            for v in op.all_operands:
                if not _defined_in(v, inside) and const_value(v) is None and id(v) not in seen:
                    seen.add(id(v))
                    captured.append(v)
    name = f"{func.name}.{'par' if parallel else 'loop'}{index}"
    new = FuncOp(name, [INDEX, INDEX, *(v.type for v in captured)], [],
                 ["lo", "hi", *(v.name_hint for v in captured)])
    args = new.args
    mapping: dict[int, Value] = {id(v): a for v, a in zip(captured, args[2:], strict=True)}
    eb = Builder(new.entry)
    for b in blocks:  # re-create outside constants at the new entry
        for op in b.ops:
            for v in op.all_operands:
                c = const_value(v)
                if c is not None and not _defined_in(v, inside) and id(v) not in mapping:
                    mapping[id(v)] = eb.constant(c, v.type)
    for b in blocks:
        func.body.remove_block(b)
        new.body.add_block(b)
        for op in b.ops:
            _remap(op, mapping)
    cmp.set_operand(1, args[1])
    done = new.add_block((), None, "ret")
    Builder(done).ret([])
    branch.set_successor(1, done, [])
    eb.br(header, [args[0]])
    enter.erase()
    pb = Builder(pre)
    call = pb.create("func.call", [lo, hi, *captured], [], {"callee": name, "parallel": cost} if parallel else {"callee": name})
    call.loc = branch.loc
    pb.br(exit_block, [])
    preds[id(exit_block)] = [pre if p is header else p for p in preds[id(exit_block)]]
    module.add(new)
    return True


def _remap(op: Operation, mapping: dict[int, Value]) -> None:
    for i, v in enumerate(op.operands):
        if id(v) in mapping:
            op.set_operand(i, mapping[id(v)])
    for i, s in enumerate(op.successors):
        if any(id(a) in mapping for a in s.args):
            op.set_successor(i, s.block, [mapping.get(id(a), a) for a in s.args])


def parallelize_func(module: ModuleOp, func: FuncOp, min_cost: int = 0,
                     serial_min_ops: int = SERIAL_MIN_OPS) -> int:
    """Outline every outermost parallel loop of ``func`` whose static work (trip count
    times cost, when the trip count is static) reaches ``min_cost``; in a function of
    at least ``serial_min_ops`` ops, the others too, as plain calls
    (``<func>.loop<k>``), which run on the calling thread as the loops did inline; how
    many loops were outlined."""
    count = 0
    serial = sum(1 for _ in func.walk()) >= serial_min_ops
    dom, preds = DominanceInfo(func), predecessors(func)
    for header in parallel_headers(func):
        if header.parent is not func.body:  # moved into an outlined loop already
            continue
        blocks = natural_loop(header, dom, preds)
        if blocks is None:
            continue
        trip = _trip(header, preds)
        if trip != DYNAMIC_TRIP and trip < 2:
            continue
        small = trip != DYNAMIC_TRIP and trip * iteration_cost(blocks, dom, preds) < min_cost
        if small and not serial:
            continue
        index = sum(1 for f in module if OUTLINED.search(f.name) and f.name.startswith(f"{func.name}."))
        if outline(module, func, header, dom, preds, index, parallel=not small):
            count += 1
    return count


__all__ = ["OUTLINED", "SERIAL_MIN_OPS", "iteration_cost", "natural_loop", "outline", "parallelize_func"]
