"""sm_90 thread-management instructions: ``setmaxnreg.{inc,dec}.sync.aligned.u32 N`` and
``elect.sync d|p, membermask``.

``setmaxnreg`` asks the hardware to grow or shrink the warpgroup's register budget
(ISA: N in 24..256, a multiple of 8, executed by all threads of the warpgroup): the
simulator has no register file limit, so it validates the operand and the
warpgroup convergence and changes nothing else.  ``elect.sync`` elects the lowest
lane of ``membermask`` (which must all execute it): ``d`` gets its lane id in every
participating lane, ``p`` is true in the elected lane only.
"""

from __future__ import annotations

import numpy as np

from . import access
from .ast import Imm, Pair
from .dispatch import Compiled, op, unsupported
from .operands import mods_of, reader, writer
from .ops_warp import check_members
from .ops_wgmma import whole_warpgroups
from .ptxtypes import TYPES

U32, PRED = TYPES["u32"], TYPES["pred"]


@op("setmaxnreg")
def build_setmaxnreg(ins, cx):
    flags, types = mods_of(ins)
    unsupported(cx, flags, {"inc", "dec"})
    if len(flags & {"inc", "dec"}) != 1 or [t.name for t in types] != ["u32"]:
        raise cx.error(f"unsupported instruction '{ins.opcode}' at line {ins.line}")
    (n,) = ins.operands
    if not isinstance(n, Imm) or n.kind != "int" or not 24 <= int(n.value) <= 256 or int(n.value) % 8:
        raise cx.error(f"setmaxnreg needs an integer constant in 24..256, a multiple of 8; got {n}")

    def run(w, idx):
        whole_warpgroups(w, access.lanes_of(w, idx), "setmaxnreg")

    return Compiled(ins, run)


@op("elect")
def build_elect(ins, cx):
    flags, types = mods_of(ins)
    unsupported(cx, flags, set())
    dst, mask = ins.operands
    if not isinstance(dst, Pair):
        raise cx.error("elect.sync takes d|p, membermask")
    dw = writer(cx, dst.first, U32)
    pw = writer(cx, dst.second, PRED)
    m = reader(cx, mask, U32)

    def run(w, idx):
        lanes = access.lanes_of(w, idx)
        mm = np.broadcast_to(np.asarray(m(w, idx), np.uint32), (len(lanes),))
        check_members(w, lanes, mm, "elect.sync")
        low = np.full(w.n, 32, np.int64)
        np.minimum.at(low, w.warp_base[lanes], w.lane_of_warp[lanes])
        leader = low[w.warp_base[lanes]]
        dw(w, idx, leader.astype(np.uint32))
        pw(w, idx, w.lane_of_warp[lanes] == leader)

    return Compiled(ins, run)
