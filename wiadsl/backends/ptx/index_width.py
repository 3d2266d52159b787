"""Index width of PTX kernels: when 32-bit index arithmetic is provably enough.

Invariants:
- A kernel (or GEMM operand) uses 32-bit indices only when every size it depends
  on is static and no element count or offset range passes ``INDEX32_LIMIT``;
  a symbolic size may be anything at launch, so it always means 64-bit.
- Register names carry their width: ``%r`` is b32, ``%rd`` b64 (``builder``).
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
    wide, addr = kb.reg("b64"), kb.reg("b64")
    if is_b32(off) or not off.startswith("%"):
        kb.emit(f"mul.wide.s32 {wide}, {off}, {size}")
    else:
        kb.emit(f"mul.lo.s64 {wide}, {off}, {size}")
    kb.emit(f"add.s64 {addr}, {base}, {wide}")
    return addr
