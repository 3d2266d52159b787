"""``sccp``: sparse conditional constant propagation (Wegman and Zadeck).

Invariants:
- Lattice per value: unknown (absent) < constant < overdefined. Only executable
  blocks are evaluated; an edge becomes executable when its branch can take it
  (a ``cond_br`` on a constant takes one edge). Block arguments meet the values
  of their executable incoming edges.
- Pure ops without regions whose operands are all constant are evaluated as the
  interpreter runs them (``folding.try_evaluate``), so a propagated constant is
  the run-time value in the op's dtype; an evaluation error or a tensor larger than
  ``max_elements`` makes the result overdefined (the error stays a run-time one).
- Afterwards: scalar constants are materialized, ``cond_br`` on a constant
  becomes ``br`` and blocks never executable are removed.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.builder import Builder
from ..ir.core import Block, Operation, Trait, Value
from ..ir.folding import try_evaluate
from ..ir.module import FuncOp, ModuleOp
from ..ir.numerics import finish
from ..ir.ops import create_op
from ..ir.types import TensorType
from ..records import record
from ..rewrite.utils import erase_blocks
from .base import Pass, PassContext, register_pass

OVER = object()


def _same(a: Any, b: Any) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and bool(
        np.all((a == b) | ((a != a) & (b != b))))


class SCCPSolver:
    def __init__(self, func: FuncOp, max_elements: int):
        self.func = func
        self.max_elements = max_elements
        self.lattice: dict[int, Any] = {}
        self.executable: set[int] = set()
        self.edges: set[tuple[int, int]] = set()
        self.block_work: list[Block] = [func.entry]
        self.op_work: list[Operation] = []
        for a in func.args:
            self.lattice[id(a)] = OVER

    def meet(self, value: Value, new: Any) -> None:
        cur = self.lattice.get(id(value))
        if cur is OVER or (cur is not None and new is not OVER and _same(cur, new)):
            return
        self.lattice[id(value)] = OVER if cur is not None or new is OVER else new
        for user in value.users:
            if user.parent is not None and id(user.parent) in self.executable:
                self.op_work.append(user)

    def solve(self) -> None:
        while self.block_work or self.op_work:
            while self.op_work:
                self.visit(self.op_work.pop())
            if self.block_work:
                block = self.block_work.pop()
                if id(block) in self.executable:
                    continue
                self.executable.add(id(block))
                for op in block.ops:
                    self.visit(op)

    def mark_edge(self, block: Block, index: int) -> None:
        term = block.terminator
        assert term is not None
        succ = term.successors[index]
        self.edges.add((id(block), index))
        for arg, v in zip(succ.block.args, succ.args, strict=True):
            val = self.lattice.get(id(v))
            if val is not None:
                self.meet(arg, val)
        if id(succ.block) not in self.executable:
            self.block_work.append(succ.block)

    def visit(self, op: Operation) -> None:
        block = op.parent
        assert block is not None
        if op.name == "cf.br":
            self.mark_edge(block, 0)
        elif op.name == "cf.cond_br":
            c = self.lattice.get(id(op.operands[0]))
            if c is OVER:
                self.mark_edge(block, 0)
                self.mark_edge(block, 1)
            elif c is not None:
                self.mark_edge(block, 0 if bool(c) else 1)
        elif op.is_terminator:
            return
        else:
            for r, v in zip(op.results, self.evaluate(op), strict=True):
                if v is not None:
                    self.meet(r, v)

    def evaluate(self, op: Operation) -> list[Any]:
        if op.name in ("arith.constant", "tensor.constant"):
            return [finish(op.attributes["value"], op.result.type)]
        if Trait.PURE not in op.traits or op.regions:
            return [OVER] * len(op.results)
        vals = [self.lattice.get(id(v)) for v in op.operands]
        if any(v is OVER for v in vals):
            return [OVER] * len(op.results)
        if any(v is None for v in vals):
            return [None] * len(op.results)
        out = try_evaluate(op, list(vals))
        if out is None:  # a failing op stays a run-time failure
            return [OVER] * len(op.results)
        return [OVER if np.size(v) > self.max_elements else v for v in out]


def rewrite(func: FuncOp, s: SCCPSolver, ctx: PassContext) -> None:
    for block in list(func.blocks):
        if id(block) not in s.executable:
            continue
        term = block.terminator
        if term is not None and term.name == "cf.cond_br":
            c = s.lattice.get(id(term.operands[0]))
            if c is not None and c is not OVER:
                succ = term.successors[0 if bool(c) else 1]
                br = create_op("cf.br", successors=[(succ.block, list(succ.args))])
                br.loc = term.loc
                term.insert_before(br)
                ctx.remark("folded", f"branch on a constant ({bool(c)}) always goes one way", br)
                term.erase()
                ctx.count("branches folded")
        for arg in block.args:
            c = s.lattice.get(id(arg))
            if c is not None and c is not OVER and arg.uses and not isinstance(arg.type, TensorType) \
                    and block is not func.entry:
                b = Builder(block)
                if block.ops:
                    b.set_insertion_point_before(block.ops[0])
                    b.loc = block.ops[0].loc
                arg.replace_all_uses_with(b.constant(c, arg.type))
                ctx.count("constants propagated")
        for op in list(block.ops):
            if op.name in ("arith.constant", "tensor.constant") or not op.results:
                continue
            for r in op.results:
                c = s.lattice.get(id(r))
                if c is None or c is OVER or isinstance(r.type, TensorType) or not r.uses:
                    continue
                b = Builder.before(op)
                b.loc = op.loc
                r.replace_all_uses_with(b.constant(c, r.type))
                ctx.count("constants propagated")
    dead = [b for b in func.blocks if id(b) not in s.executable]
    erase_blocks(dead)
    ctx.count("blocks removed", len(dead))


@register_pass
@record(frozen=True)
class SCCP(Pass):
    name = "sccp"
    max_elements: int = 4096

    def run(self, module: ModuleOp, ctx: PassContext) -> None:
        for func in module:
            solver = SCCPSolver(func, self.max_elements)
            solver.solve()
            rewrite(func, solver, ctx)
