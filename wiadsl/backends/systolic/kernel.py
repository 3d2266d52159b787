"""The compiled kernel: walks the IR like the interpreter, runs groups as sections.

Control flow, calls and host ops follow the reference interpreter (the op's own
``evaluate``); each planned group runs, at its last op, as a section compiled for
the concrete operand shapes (cached), printed, assembled back and simulated. A
group that cannot be lowered for those shapes runs its ops on the host.

Invariants: results are checked against the IR types like the interpreter's;
``stats`` describes the latest ``run``; ``listing()`` holds every section used so
far, in first-use order, including host placeholders.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...diagnostics import WiaError, WiaRuntimeError
from ...ir.core import Block, Operation
from ...ir.interpreter import Interpreter, check_value, convert_arg, read
from ...ir.module import FuncOp, ModuleOp
from ...ir.numerics import finish
from .asm import parse_listing
from .check import check_section
from .config import ArrayConfig
from .inline import inline_helpers
from .isa import Listing, Section
from .lower import Lowered, lower_group
from .pe_array import run_section_cycle_true
from .plan import FuncPlan, Group, plan_function
from .rowplan import plan_rows
from .simulator import run_section
from .stats import KernelStats


def _shape_key(x: Any) -> tuple:
    a = np.asarray(x)
    return (a.shape, a.dtype.str)


class SystolicKernel:
    """A kernel compiled for the systolic target (``CompiledKernel`` protocol)."""

    def __init__(self, module: ModuleOp, kernel: str, config: ArrayConfig):
        self.module = inline_helpers(module)
        self.func = self.module[kernel]
        self.config = config
        self.plans: dict[str, FuncPlan] = {}
        self.cache: dict[tuple, Lowered | None] = {}
        self.sections: dict[str, Section] = {}
        self.stats: dict[str, Any] = {}
        self._run_stats = KernelStats(config)

    def plan(self, func: FuncOp) -> FuncPlan:
        if func.name not in self.plans:
            self.plans[func.name] = plan_rows(func, plan_function(func))
        return self.plans[func.name]

    def run(self, inputs: Sequence[np.ndarray]) -> Sequence[object]:
        self._run_stats = KernelStats(self.config)
        args = [convert_arg(self.func, i, a) for i, a in enumerate(inputs)]
        results = _Walker(self).call(self.func, args)
        self.stats = self._run_stats.as_dict()
        return results

    def listing(self) -> Listing:
        return Listing(self.config, tuple(self.sections.values()))

    # -------------------------------------------------------------- groups
    def compile_group(self, group: Group, env: dict[int, Any]) -> Lowered | None:
        values = [group.lhs, group.rhs, *group.externals] if group.product else group.externals
        key = (id(group), *(_shape_key(env[id(v)]) if not isinstance(v, np.ndarray) else ()
                            for v in values))
        if key not in self.cache:
            name = f"s{len(self.sections)}"
            lowered = lower_group(group, self.config, env, name)
            if lowered is not None:
                # the simulator runs what the text says: print, assemble, use that
                text = Listing(self.config, (lowered.section,)).text()
                lowered.section = parse_listing(text).sections[0]
                check_section(lowered.section, self.config)
                self.sections[name] = lowered.section
            self.cache[key] = lowered
        return self.cache[key]

    def run_group(self, group: Group, env: dict[int, Any], walker: _Walker) -> None:
        lowered = self.compile_group(group, env)
        if lowered is None:
            for op in [*group.absorbed, *group.ops]:
                self.note_host(op)
                walker.host(op, env)
            return
        inputs = {name: v if isinstance(v, np.ndarray) else env[id(v)]
                  for name, v in lowered.inputs.items()}
        run = run_section_cycle_true if self.config.cycle_true else run_section
        outputs, stats = run(lowered.section, self.config, inputs, checked=True)
        self._run_stats.add(group.placement, stats)
        value = finish(outputs[lowered.output], group.output.type)
        check_value(group.ops[-1], value, group.output.type)
        env[id(group.output)] = value

    def note_host(self, op: Operation) -> None:
        self._run_stats.host(op.name)
        name = f"host:{op.name}:{id(op)}"
        if name not in self.sections:
            hint = op.results[0].name_hint if op.results else None
            what = f"{op.name} %{hint or '?'}".replace('"', "'")
            self.sections[name] = Section(f"s{len(self.sections)}", "host", what)


class _Walker(Interpreter):
    """The interpreter's CFG walk with planned groups replaced by sections."""

    def __init__(self, kernel: SystolicKernel):
        super().__init__(kernel.module)
        self.kernel = kernel

    def run_block(self, block: Block, env: dict[int, Any]) -> list[Any] | tuple[Block, list[Any]]:
        func = block.parent.parent  # type: ignore[union-attr]
        plan = self.kernel.plan(func)
        for op in block.ops:
            if id(op) in plan.skips:
                continue
            if id(op) in plan.runs:
                self.kernel.run_group(plan.runs[id(op)], env, self)
                continue
            if op.name == "func.return":
                return [read(env, v, op) for v in op.operands]
            if op.name in ("cf.br", "cf.cond_br"):
                values = [read(env, v, op) for v in op.operands]
                index = 0 if op.name == "cf.br" or bool(values[0]) else 1
                succ = op.successors[index]
                return succ.block, [read(env, v, op) for v in succ.args]
            if op.name not in ("func.call", "arith.constant"):
                self.kernel.note_host(op)
            self.host(op, env)
        raise WiaRuntimeError(f"block ^{block.name_hint or '?'} ended without a terminator")

    def host(self, op: Operation, env: dict[int, Any]) -> None:
        values = [read(env, v, op) for v in op.operands]
        try:
            results = self.execute(op, values)
        except WiaError:
            raise
        for result, value in zip(op.results, results):
            check_value(op, value, result.type)
            env[id(result)] = value
