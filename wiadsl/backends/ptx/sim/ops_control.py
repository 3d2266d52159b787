"""Control flow and synchronisation: bra, ret, exit, bar/barrier (sync), membar,
nanosleep, trap, and ``bar.warp.sync`` (see ``ops_warp``; ``fence`` is in ``ops_mbarrier``).

Invariant: control ops carry a descriptor the executor interprets (see
``dispatch``); they never touch PCs themselves.  ``bar.sync`` (= ``barrier.sync
.aligned``) requires every thread of the block to reach the same instruction;
``barrier.sync`` without ``.aligned`` accepts different barrier instructions.
"""

from __future__ import annotations

from .ast import Name
from .dispatch import Compiled, op, unsupported
from .operands import mods_of, reader
from .ptxtypes import TYPES


@op("bra")
def build_bra(ins, cx):
    flags, _ = mods_of(ins)
    unsupported(cx, flags, {"uni"})
    (target,) = ins.operands
    if not isinstance(target, Name) or target.name not in cx.kernel.labels:
        raise cx.error(f"branch to unknown label {target}")
    return Compiled(ins, control=("bra", cx.kernel.labels[target.name]))


@op("ret", "exit")
def build_exit(ins, cx):
    flags, _ = mods_of(ins)
    unsupported(cx, flags, {"uni"})
    if ins.op == "ret" and not cx.kernel.is_entry:
        raise cx.error("ret from a .func (calls) is unsupported")
    return Compiled(ins, control=("exit",))


@op("bar", "barrier")
def build_bar(ins, cx):
    flags, _ = mods_of(ins)
    if "warp" in flags:
        from .ops_warp import build_warp_sync

        return build_warp_sync(ins, cx)
    if "arrive" in flags or "red" in flags:
        raise cx.error(f"unsupported instruction '{ins.opcode}' at line {ins.line}")
    unsupported(cx, flags, {"sync", "cta", "aligned"})
    aligned = ins.op == "bar" or "aligned" in flags
    ops = ins.operands
    if not ops:
        raise cx.error(f"'{ins.opcode}' needs a barrier number")
    bid = reader(cx, ops[0], TYPES["u32"])
    count = reader(cx, ops[1], TYPES["u32"]) if len(ops) > 1 else None
    return Compiled(ins, control=("bar", bid, count, aligned))


@op("membar", "nanosleep", "pmevent")
def build_nop(ins, cx):
    return Compiled(ins, lambda w, idx: None)


@op("trap", "brkpt")
def build_trap(ins, cx):
    return Compiled(ins, control=("trap",))
