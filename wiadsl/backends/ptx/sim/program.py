"""A kernel compiled for simulation: memory layouts, symbols and compiled instructions.

Invariant: a ``Program`` depends only on (module, kernel, dynamic shared bytes);
module ``.global``/``.const`` variables get the first global regions of every
launch (so their addresses are fixed), kernel arguments follow.
"""

from __future__ import annotations

from dataclasses import dataclass

from .ast import Kernel, Module, Name, Vec
from .dispatch import Compiled, compile_instr
from .errors import PtxSimError
from .memory import GLOBAL_BASE, GLOBAL_STRIDE, layout_vars
from .operands import Ctx
from .state import SPECIAL_TYPES
from .tracker import shared_unit


@dataclass
class Program:
    """Compiled kernel plus the layouts a launch needs to build memories."""

    module: Module
    kernel: Kernel
    ops: list[Compiled]
    shared_layout: dict[str, tuple[int, int]]
    shared_total: int
    local_layout: dict[str, tuple[int, int]]
    local_total: int
    param_layout: dict[str, tuple[int, int]]
    param_total: int
    dynamic_shared: int
    shared_unit: int = 1  # race-tracking granularity in bytes (``tracker.shared_unit``)
    wgmma: bool = False   # has wgmma: wgmma agents in the tracker
    tma: bool = False     # has cp.async.bulk: mbarrier copy agents in the tracker
    warpgroup_ops: bool = False  # has warpgroup-collective instructions (wgmma, setmaxnreg)

    @property
    def slot_width(self) -> int:
        """Threads of one slot of the interleaved schedules (``schedule.py``): a warpgroup
        when warpgroup-collective instructions need its 4 warps together, else a warp."""
        return 128 if self.warpgroup_ops else 32


def param_layout(kernel: Kernel) -> tuple[dict[str, tuple[int, int]], int]:
    layout, pos = {}, 0
    for p in kernel.params:
        pos = (pos + p.align - 1) // p.align * p.align
        layout[p.name] = (pos, p.size)
        pos += p.size
    return layout, pos


def compile_program(module: Module, kernel_name: str, dynamic_shared: int) -> Program:
    """Lay out memories and compile every instruction of ``kernel_name``."""
    kernel = module.kernels.get(kernel_name)
    if kernel is None:
        known = ", ".join(sorted(module.kernels)) or "none"
        raise PtxSimError(f"no .entry named '{kernel_name}' (kernels: {known})")
    shared = [v for v in module.vars + kernel.vars if v.space == "shared"]
    local = [v for v in module.vars + kernel.vars if v.space == "local"]
    for v in local:
        if v.size is None:
            raise PtxSimError(f"local variable '{v.name}' has no size", kernel=kernel_name)
    sh_layout, sh_total = layout_vars([(v.name, v.size, v.align) for v in shared], dynamic_shared)
    lo_layout, lo_total = layout_vars([(v.name, v.size, v.align) for v in local], 0)
    pa_layout, pa_total = param_layout(kernel)
    symbols: dict[str, tuple[str, int]] = {}
    gi = 0
    for v in module.vars:
        if v.space in ("global", "const"):
            symbols[v.name] = (v.space, GLOBAL_BASE + gi * GLOBAL_STRIDE)
            gi += 1
    symbols.update({n: ("shared", off) for n, (off, _) in sh_layout.items()})
    symbols.update({n: ("local", off) for n, (off, _) in lo_layout.items()})
    symbols.update({n: ("param", off) for n, (off, _) in pa_layout.items()})
    reg_types = {**kernel.regs, **SPECIAL_TYPES}
    cx = Ctx(kernel, reg_types, symbols, async_regs=accumulators(kernel))
    ops = [compile_instr(ins, cx) for ins in kernel.instrs]
    return Program(module, kernel, ops, sh_layout, sh_total, lo_layout, lo_total,
                   pa_layout, pa_total, dynamic_shared, shared_unit(kernel.instrs),
                   any(i.op == "wgmma" for i in kernel.instrs),
                   any(i.op == "cp" and i.mods[:2] == ("async", "bulk") for i in kernel.instrs),
                   any(i.op in ("wgmma", "setmaxnreg") for i in kernel.instrs))


def accumulators(kernel: Kernel) -> frozenset[str]:
    """Registers some ``wgmma.mma_async`` writes (their other accesses are checked)."""
    regs: set[str] = set()
    for ins in kernel.instrs:
        if ins.op == "wgmma" and ins.mods[:1] == ("mma_async",) and ins.operands \
                and isinstance(ins.operands[0], Vec):
            regs |= {i.name for i in ins.operands[0].items if isinstance(i, Name)}
    return frozenset(regs)
