"""The opcode table: ``OPS[opcode base] = builder(instr, ctx) -> Compiled``.

Builders live in the ``ops_*`` modules and register themselves with ``@op``;
each inspects the modifiers it understands and raises ``ctx.error`` for any
combination it does not, so nothing unsupported is ever silently skipped.

Invariant: a ``Compiled`` is either a data op (``fn(wave, idx)`` runs the
instruction on lanes ``idx`` — guard already applied — and the executor then
advances the PC), or a control op (``control`` is a tuple the executor
interprets: ``("bra", target)``, ``("exit",)``, ``("bar", id_reader, count_reader,
aligned)``, ``("mbar_wait", check)`` where ``check(wave, lanes)`` gives (phase
complete, mbarrier offset) per lane).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .ast import Instr
from .operands import Ctx


@dataclass(frozen=True)
class Compiled:
    """One executable instruction (see the module docstring)."""

    instr: Instr
    fn: Callable | None = None
    control: tuple | None = None
    guard: Callable | None = None


Builder = Callable[[Instr, Ctx], Compiled]
OPS: dict[str, Builder] = {}

# modifiers that never change results in the simulator (caching, memory order, scope)
IGNORED = {
    "nc", "ca", "cg", "cs", "lu", "cv", "wb", "wt", "weak", "volatile", "relaxed", "acquire",
    "release", "acq_rel", "sc", "cta", "gpu", "sys", "cluster", "unified", "aligned", "uni",
    "L1::no_allocate", "L1::evict_last", "L1::evict_first", "L1::evict_normal", "L1::evict_unchanged",
    "L2::64B", "L2::128B", "L2::256B", "L2::evict_last", "L2::evict_first", "L2::evict_normal",
    "L2::cache_hint", "sync",
}


def op(*names: str):
    """Register a builder for the opcode bases ``names``."""

    def deco(fn: Builder) -> Builder:
        for n in names:
            OPS[n] = fn
        return fn

    return deco


def compile_instr(ins: Instr, cx: Ctx) -> Compiled:
    """Build the executable form of ``ins``; unknown opcodes are an error naming the line."""
    from . import (  # noqa: F401
        ops_arith,
        ops_bits,
        ops_control,
        ops_convert,
        ops_logic,
        ops_mbarrier,
        ops_memory,
        ops_mma,
        ops_sm90,
        ops_warp,
        ops_wgmma,
    )
    from .operands import reader
    from .ptxtypes import TYPES

    cx.instr = ins
    builder = OPS.get(ins.op)
    if builder is None:
        raise cx.error(f"unsupported instruction '{ins.opcode}' at line {ins.line}")
    c = builder(ins, cx)
    if ins.guard is not None:
        g = reader(cx, ins.guard, TYPES["pred"])
        c = Compiled(c.instr, c.fn, c.control, g)
    return c


def unsupported(cx: Ctx, flags: set[str], allowed: set[str]) -> None:
    """Raise if ``flags`` has a modifier outside ``allowed`` (and the ignorable ones)."""
    bad = sorted(f for f in flags if f not in allowed and f not in IGNORED)
    if bad:
        ins = cx.instr
        assert ins is not None  # set while an instruction compiles
        raise cx.error(f"unsupported instruction '{ins.opcode}' at line {ins.line} "
                       f"(modifier .{bad[0]})")
