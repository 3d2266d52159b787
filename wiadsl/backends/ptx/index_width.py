"""Index width of PTX kernels: when 32-bit index arithmetic is provably enough.

Invariants:
- A kernel (or GEMM operand) uses 32-bit indices only when every size it depends
  on is static and no element count or offset range passes ``INDEX32_LIMIT``;
  a symbolic size may be anything at launch, so it always means 64-bit.
- Register names carry their width: ``%r`` is b32, ``%rd`` b64 (``builder``).
- Index products by a known factor are strength-reduced (``scaled``): nothing for 1,
  a shift for a power of two. ptxas keeps a 64-bit multiply by a constant as a
  multiply (an IMAD pair holding extra registers): a symbolic broadcast add took 30
  registers on sm_90 with ``mul.lo.s64 x, i, 4``, 22 with ``shl.b64 x, i, 2``.
"""

from __future__ import annotations

from collections.abc import Iterable

from .builder import KernelBuilder
from .expr import TensorArg
from .symbolic import Sym

#: the values an integer immediate of each size type can hold
IMMEDIATE_RANGE = {"u32": (0, 2**32 - 1), "s32": (-2**31, 2**31 - 1),
                   "u64": (0, 2**64 - 1), "s64": (-2**63, 2**63 - 1)}

#: The largest index, offset or element count 32-bit index arithmetic may hold; tests
#: lower it to run the 64-bit path on shapes that fit the simulator.
INDEX32_LIMIT = 2**31 - 1


def needs_wide(domain: tuple[Sym, ...], views: list[TensorArg]) -> bool:
    """Whether a kernel over ``domain`` reading/writing ``views`` needs 64-bit indices:
    a symbolic size, more than INDEX32_LIMIT elements, or a view whose element
    offsets span more than that."""
    if not all(isinstance(d, int) for d in domain):
        return True
    count = 1
    for d in domain:
        count *= int(d)
    if count > INDEX32_LIMIT:
        return True
    for v in views:
        span = offset_span(v.offset, zip(domain, v.strides, strict=True))
        if span is None or span > INDEX32_LIMIT:
            return True
    return False


def is_b32(reg: str) -> bool:
    """A ``%r`` (b32) register, as opposed to ``%rd`` (b64) or an immediate."""
    return reg.startswith("%r") and not reg.startswith("%rd")


def offset_span(offset: Sym, pairs: Iterable[tuple[Sym, Sym]]) -> int | None:
    """``abs(offset) + sum(abs(stride) * (extent - 1))`` over (extent, stride) pairs: the
    largest element offset a view reaches; None when a size is symbolic."""
    pairs = list(pairs)
    sizes = [offset, *(x for pair in pairs for x in pair)]
    if not all(isinstance(x, int) for x in sizes):
        return None
    return abs(int(offset)) + sum(abs(int(s)) * max(int(e) - 1, 0) for e, s in pairs)


def byte_address(kb: KernelBuilder, base: str, off: str, size: int) -> str:
    """``base + off * size`` for a signed element offset ``off`` (b32 or b64)."""
    addr = kb.reg("b64")
    if is_b32(off) or not off.startswith("%"):
        wide = kb.reg("b64")
        kb.emit(f"mul.wide.s32 {wide}, {off}, {size}")
    else:
        wide = scaled(kb, off, size, "s64")
    kb.emit(f"add.s64 {addr}, {base}, {wide}")
    return addr


def scaled(kb: KernelBuilder, reg: str, factor: int | str, t: str,
           acc: str | None = None) -> str:
    """``reg * factor (+ acc)`` in the integer type ``t`` (``s32 u32 s64 u64``; the
    result wraps like ``mul.lo``): ``reg`` itself (or one add) for a factor of 1, a
    shift for a power-of-two immediate, else ``mul.lo``/``mad.lo``. ``factor`` is an
    int or a register/immediate string."""
    bits = t[1:]
    k = int(factor) if isinstance(factor, int) or factor.lstrip("-").isdigit() else None
    out = kb.reg(f"b{bits}")
    if k == 1:
        if acc is None:
            return reg
        kb.emit(f"add.{t} {out}, {reg}, {acc}")
    elif k is not None and k > 1 and k & (k - 1) == 0:
        if acc is None:
            kb.emit(f"shl.b{bits} {out}, {reg}, {k.bit_length() - 1}")
        else:
            sh = kb.reg(f"b{bits}")
            kb.emit(f"shl.b{bits} {sh}, {reg}, {k.bit_length() - 1}")
            kb.emit(f"add.{t} {out}, {sh}, {acc}")
    elif acc is None:
        kb.emit(f"mul.lo.{t} {out}, {reg}, {factor}")
    else:
        kb.emit(f"mad.lo.{t} {out}, {reg}, {factor}, {acc}")
    return out
