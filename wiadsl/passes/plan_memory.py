"""``plan-memory``: liveness of intermediate tensors and buffer reuse.

Each tensor result of a non-constant op in a block is an intermediate buffer
(function arguments and returned values are the caller's). Its live range runs
from its definition to its last use in the block (a value used by the
terminator or in another block lives to the block's end). Buffers are assigned
greedily in program order: a dead buffer of at least the needed size (static
shapes) is reused. Each op gets ``buffer = N``; the function gets
``memory_plan = {...}`` style attributes: ``peak_bytes_before`` (sum of all
intermediates: no reuse), ``peak_bytes_after`` (sum of buffer sizes). Values of
dynamic shape get their own buffer (``buffer`` still set; a multi-result op gets
``buffers = [..]``, one per result, -1 for results returned to the caller) and are listed as
``dynamic_buffers``: their size is unknown at compile time.
"""

from __future__ import annotations

from ..ir.core import Block
from ..ir.module import FuncOp, ModuleOp
from ..ir.types import TensorType
from ..records import field, record
from .base import Pass, PassContext, register_pass


def nbytes(t: TensorType) -> int | None:
    if not t.is_static:
        return None
    n = 1
    for d in t.shape:
        n *= d  # type: ignore[operator]
    return n * max(1, t.dtype.bits // 8)


@record
class MemoryPlan:
    buffers: list[int | None] = field(default_factory=list)
    before: int = 0
    after: int = 0
    dynamic: int = 0

    def report(self, name: str) -> str:
        return (f"@{name}: {len(self.buffers)} buffers; peak intermediate bytes {self.before} "
                f"before reuse, {self.after} after" + (f"; {self.dynamic} dynamic buffers not "
                                                       f"counted" if self.dynamic else ""))


def plan_block(block: Block, plan: MemoryPlan) -> None:
    pos = {id(op): i for i, op in enumerate(block.ops)}
    end = len(block.ops)
    free: list[int] = []
    live: list[tuple[int, int]] = []  # (last use, buffer)
    for i, op in enumerate(block.ops):
        live.sort()
        while live and live[0][0] < i:
            free.append(live.pop(0)[1])
        if op.name in ("tensor.constant",) or not op.results:
            continue
        for r in op.results:
            t = r.type
            if not isinstance(t, TensorType) or any(u.is_terminator and u.name == "func.return"
                                                   for u in r.users):
                continue
            last = max((pos.get(id(u), end) if u.parent is block and not u.is_terminator else end
                        for u in r.users), default=i)
            size = nbytes(t)
            plan.before += size or 0
            choice = None
            if size is not None:
                fits = [b for b in free if (plan.buffers[b] or -1) >= size]
                if fits:
                    choice = min(fits, key=lambda b: plan.buffers[b] or 0)
                    free.remove(choice)
            if choice is None:
                choice = len(plan.buffers)
                plan.buffers.append(size)
                plan.dynamic += size is None
            if len(op.results) == 1:
                op.attributes["buffer"] = choice
            else:  # one entry per result; -1 for a result that needs no buffer
                slots = op.attributes.setdefault("buffers", [-1] * len(op.results))
                slots[r.index] = choice
            live.append((last, choice))


def plan_func(func: FuncOp) -> MemoryPlan:
    plan = MemoryPlan()
    for block in func.blocks:
        plan_block(block, plan)
    plan.after = sum(b or 0 for b in plan.buffers)
    return plan


@register_pass
@record(frozen=True)
class PlanMemory(Pass):
    name = "plan-memory"

    def run(self, module: ModuleOp, ctx: PassContext) -> None:
        for func in module:
            plan = plan_func(func)
            func.attributes["peak_bytes_before"] = plan.before
            func.attributes["peak_bytes_after"] = plan.after
            if plan.dynamic:
                func.attributes["dynamic_buffers"] = plan.dynamic
            ctx.count("buffers", len(plan.buffers))
            ctx.remark("analysis", plan.report(func.name))
