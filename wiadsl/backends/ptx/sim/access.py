"""Address operands and state-space routing for memory instructions.

``address(cx, op)`` compiles ``[base+offset]`` to ``f(wave, idx) -> uint64`` per lane
(base a register, a variable/parameter symbol, or absent).  ``chunks`` routes
lanes to the memory of a state space; a generic address is split by window into
shared, local and global parts.  Invariant: lanes are wave lane numbers, so a
fault names the right thread.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .ast import Addr, Name
from .errors import MemoryFault
from .memory import LOCAL_WINDOW, PARAM_WINDOW, SHARED_WINDOW, WINDOW_SIZE
from .operands import Ctx, reader
from .ptxtypes import TYPES, PtxType

SPACES = ("global", "shared", "local", "param", "const")

#: A compiled address operand: ``f(wave, idx)`` -> the uint64 address per lane.
AddressFn = Callable[..., np.ndarray]


def space_of(flags: set[str]) -> str:
    """The state space named by an opcode's flags (``generic`` if none)."""
    for f in list(flags):
        base = f.split("::")[0]
        if base in SPACES:
            flags.discard(f)
            return base
    return "generic"


def address(cx: Ctx, op) -> AddressFn:
    if not isinstance(op, Addr):
        raise cx.error(f"expected an address operand, found {op}")
    off = np.uint64(op.offset % (1 << 64))
    if op.base is None:
        return lambda w, idx: np.full(w.n if idx is None else len(idx), off, np.uint64)
    if op.base not in cx.reg_types:
        sym = cx.symbols.get(op.base)
        if sym is None:
            raise cx.error(f"unknown register or symbol {op.base!r}")
        const = np.uint64((sym[1] + op.offset) % (1 << 64))
        return lambda w, idx: np.full(w.n if idx is None else len(idx), const, np.uint64)
    rt = cx.reg_types[op.base]
    r = reader(cx, Name(op.base), TYPES["u64"] if rt.bits == 64 else TYPES["u32"])
    return lambda w, idx: np.asarray(r(w, idx)).astype(np.uint64) + off


def lanes_of(w, idx) -> np.ndarray:
    return w.all_lanes if idx is None else idx


def chunks(w, space: str, addr: np.ndarray, lanes: np.ndarray, t: PtxType, count: int,
           write: bool, track: bool = True):
    """Yield ``(sel, view, index)`` for the lanes of an access (see ``memory``).

    ``track=False`` keeps the access out of the shared-memory race tracker (atomics)."""
    if space == "generic":
        in_sh = (addr >= SHARED_WINDOW) & (addr < SHARED_WINDOW + WINDOW_SIZE)
        in_lo = (addr >= LOCAL_WINDOW) & (addr < LOCAL_WINDOW + WINDOW_SIZE)
        in_pa = (addr >= PARAM_WINDOW) & (addr < PARAM_WINDOW + WINDOW_SIZE)
        groups = [(in_sh, w.shared, SHARED_WINDOW), (in_lo, w.local, LOCAL_WINDOW),
                  (in_pa, w.param, PARAM_WINDOW), (~(in_sh | in_lo | in_pa), w.glob, 0)]
        for mask, mem, base in groups:
            if not mask.any():
                continue
            if mem is w.param and write:
                k = int(np.flatnonzero(mask)[0])
                raise MemoryFault("store to read-only .param space", int(lanes[k]), int(addr[k]))
            g = np.flatnonzero(mask)
            if len(g) == len(addr):
                yield from mem.chunks(addr - np.uint64(base), lanes, t, count, write, track)
                continue
            for sel, view, index in mem.chunks(addr[g] - np.uint64(base), lanes[g], t, count,
                                               write, track):
                yield g[sel], view, index
        return
    mem = {"global": w.glob, "const": w.glob, "shared": w.shared, "local": w.local,
           "param": w.param}[space]
    if space in ("const", "param") and write:
        raise MemoryFault(f"store to read-only .{space} space", int(lanes[0]), int(addr[0]))
    yield from mem.chunks(addr, lanes, t, count, write, track)


def load(w, space, addr, lanes, t: PtxType, count: int) -> np.ndarray:
    """Values [n, count] of type ``t`` at ``addr`` (consecutive elements)."""
    out: np.ndarray = np.empty((len(addr), count), t.np)
    for sel, view, index in chunks(w, space, addr, lanes, t, count, False):
        out[sel] = view[index]
    return out


def store(w, space, addr, lanes, t: PtxType, vals: np.ndarray) -> None:
    for sel, view, index in chunks(w, space, addr, lanes, t, vals.shape[1], True):
        view[index] = vals[sel]
