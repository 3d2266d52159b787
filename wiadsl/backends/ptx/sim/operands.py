"""Compile-time context and operand access: readers and writers specialised per operand.

A reader is ``r(wave, idx) -> values`` of the instruction's type (a NumPy array
over lanes ``idx``, all lanes when ``idx`` is None, or a NumPy scalar for an
immediate/symbol); a writer is ``w(wave, idx, values)``.  Building them once per
instruction keeps the per-step cost to a gather, a ufunc and a scatter.

Invariant: registers are only ever touched through these closures (and by
``wgmma.py``, which delivers accumulators at ``wgmma.wait_group``), so the
bit-level register model of ``ptxtypes`` holds everywhere.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .ast import Imm, Instr, Kernel, Name, SymOff
from .errors import PtxSimError
from .ptxtypes import TYPES, UINT, PtxType, f32_to_bf16, from_bits, to_bits
from .state import SPECIAL_TYPES

Reader = Callable[..., object]
Writer = Callable[..., None]


@dataclass
class Ctx:
    """What compiling one kernel needs: register types, symbols (space, address), labels."""

    kernel: Kernel
    reg_types: dict[str, PtxType]
    symbols: dict[str, tuple[str, int]] = field(default_factory=dict)
    instr: Instr | None = None
    #: wgmma accumulator registers: other instructions' accesses are checked (``wgmma.py``)
    async_regs: frozenset[str] = frozenset()

    def error(self, msg: str) -> PtxSimError:
        ins = self.instr
        return PtxSimError(msg, kernel=self.kernel.name, line=ins.line if ins else None,
                           instr=str(ins) if ins else None)


def mods_of(ins: Instr) -> tuple[set[str], list[PtxType]]:
    """Split an opcode's modifiers into flags and the (ordered) type list."""
    flags: set[str] = set()
    types: list[PtxType] = []
    for m in ins.mods:
        t = TYPES.get(m)
        if t is not None:
            types.append(t)
        else:
            flags.add(m)
    return flags, types


def imm_value(cx: Ctx | None, op: Imm, t: PtxType):
    """An immediate as a NumPy scalar of type ``t`` (bf16 as its uint16 bits).

    ``cx`` is None for a launch argument (no instruction to name in an error)."""
    v = op.value
    if t.kind == "pred":
        return np.bool_(v != 0)
    if op.kind == "f32bits":
        f = np.uint32(v).view(np.float32)
        if t.kind == "f" and t.bits == 32 or not t.is_float:
            return np.uint32(v).view(t.np) if t.bits == 32 else t.np(v)
        return _float_imm(f, t)
    if op.kind == "f64bits":
        f = np.uint64(v).view(np.float64)
        if t.bits == 64:
            return np.uint64(v).view(t.np)
        return _float_imm(f, t) if t.is_float else t.np(v % (1 << t.bits))
    if op.kind == "float":
        if not t.is_float:
            msg = f"float literal {op.text} for integer type .{t.name}"
            raise cx.error(msg) if cx is not None else PtxSimError(msg)
        return _float_imm(v, t)
    if t.is_float:
        return _float_imm(float(v), t)
    u = UINT[t.bits](int(v) % (1 << t.bits))
    return u.view(t.np)


def _float_imm(v, t: PtxType):
    if t.kind == "bf":
        return np.uint16(f32_to_bf16(np.float32(v)))
    return t.np(v)


def symbol_address(cx: Ctx, name: str) -> int | None:
    s = cx.symbols.get(name)
    return None if s is None else s[1]


def reader(cx: Ctx, op, t: PtxType) -> Reader:
    """A reader of ``op`` as type ``t`` (watched if it is a wgmma accumulator, ``_watched``)."""
    r = _reader(cx, op, t)
    if isinstance(op, Name) and op.name in cx.async_regs:
        return _watched(r, op.name, False)
    return r


def _watched(f, name: str, write: bool):
    """``f`` preceded by the wgmma check of accumulator ``name`` (``wgmma.WgmmaState.touch``)."""

    def g(w, idx, *v):
        if w.wgmma is not None:
            w.wgmma.touch(name, w.all_lanes if idx is None else idx, write)
        return f(w, idx, *v)

    return g


def _reader(cx: Ctx, op, t: PtxType) -> Reader:
    if isinstance(op, Imm):
        val = imm_value(cx, op, t)
        return lambda w, idx: val
    if isinstance(op, SymOff):
        base = symbol_address(cx, op.name)
        if base is None:
            raise cx.error(f"unknown symbol {op.name!r}")
        val = imm_value(cx, Imm("int", base + op.offset, str(op)), t)
        return lambda w, idx: val
    if not isinstance(op, Name):
        raise cx.error(f"operand {op} cannot be read as .{t.name}")
    name, neg = op.name, op.neg
    rt = cx.reg_types.get(name)
    if rt is None:
        addr = symbol_address(cx, name)
        if addr is None:
            raise cx.error(f"unknown register or symbol {name!r}")
        val = imm_value(cx, Imm("int", addr, name), t)
        return lambda w, idx: val
    if rt.kind == "pred" or t.kind == "pred":
        if rt.kind != t.kind:
            raise cx.error(f"{name} (.{rt.name}) used as .{t.name}")
        if neg:
            return lambda w, idx: ~(w.regs[name] if idx is None else w.regs[name][idx])
        return lambda w, idx: w.regs[name] if idx is None else w.regs[name][idx]
    if neg:
        raise cx.error(f"'!' applies only to predicates, not {name}")
    if rt.bits == t.bits:
        dt = t.np
        return lambda w, idx: (w.regs[name] if idx is None else w.regs[name][idx]).view(dt)
    return lambda w, idx: from_bits(w.regs[name] if idx is None else w.regs[name][idx], t)


def writer(cx: Ctx, op, t: PtxType) -> Writer:
    """A writer of values of type ``t`` into register ``op`` (``None`` is the ``_`` sink);
    watched if it is a wgmma accumulator (``_watched``)."""
    f = _writer(cx, op, t)
    if isinstance(op, Name) and op.name in cx.async_regs:
        return _watched(f, op.name, True)
    return f


def _writer(cx: Ctx, op, t: PtxType) -> Writer:
    if op is None or (isinstance(op, Name) and op.name == "_"):
        return lambda w, idx, v: None
    if not isinstance(op, Name) or op.neg:
        raise cx.error(f"operand {op} is not a destination register")
    name = op.name
    rt = cx.reg_types.get(name)
    if rt is None or name in SPECIAL_TYPES:
        raise cx.error(f"{name!r} is not a writable register")
    if (rt.kind == "pred") != (t.kind == "pred"):
        raise cx.error(f"{name} (.{rt.name}) written as .{t.name}")
    if rt.bits == t.bits and t.kind != "pred":
        dt = t.np

        def write_view(w, idx, v):
            arr = w.regs[name].view(dt)
            if idx is None:
                arr[...] = v
            else:
                arr[idx] = v

        return write_view
    width = rt.bits

    def write_bits(w, idx, v):
        bits = to_bits(v, t, width)
        if idx is None:
            w.regs[name][...] = bits
        else:
            w.regs[name][idx] = bits

    return write_bits
