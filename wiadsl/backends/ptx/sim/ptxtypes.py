"""PTX fundamental types and the bit-level register model.

Invariant: a register holds raw bits in an unsigned NumPy array of its declared
width (``.pred`` registers hold ``bool``).  An instruction views those bits as its
own type: narrower types truncate, wider types extend (sign-extend for ``.s``
types), exactly as PTX defines for ``ld``/``cvt`` with wider destination registers.
``.bf16`` has no NumPy dtype: it is carried as ``uint16`` bits and converted
through ``float32`` by ``bf16_to_f32`` / ``f32_to_bf16``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

UINT: dict[int, type[np.unsignedinteger[Any]]] = {
    8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
SINT: dict[int, type[np.signedinteger[Any]]] = {
    8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}
FLOAT: dict[int, type[np.floating[Any]]] = {16: np.float16, 32: np.float32, 64: np.float64}


@dataclass(frozen=True)
class PtxType:
    """A scalar PTX type: ``kind`` is one of u, s, b, f, bf (bf16), pred, and ``bits`` its width."""

    name: str
    kind: str
    bits: int

    @property
    def size(self) -> int:
        return max(1, self.bits // 8)

    @property
    def np(self) -> type:
        if self.kind == "pred":
            return np.bool_
        if self.kind == "s":
            return SINT[self.bits]
        if self.kind == "f":
            return FLOAT[self.bits]
        return UINT[self.bits]

    @property
    def is_float(self) -> bool:
        return self.kind in ("f", "bf")

    @property
    def is_signed(self) -> bool:
        return self.kind == "s"


def _mk() -> dict[str, PtxType]:
    table = {"pred": PtxType("pred", "pred", 1)}
    for bits in (8, 16, 32, 64):
        for kind in ("u", "s", "b"):
            table[f"{kind}{bits}"] = PtxType(f"{kind}{bits}", kind, bits)
    for bits in (16, 32, 64):
        table[f"f{bits}"] = PtxType(f"f{bits}", "f", bits)
    table["bf16"] = PtxType("bf16", "bf", 16)
    table["f16x2"] = PtxType("f16x2", "b", 32)
    table["bf16x2"] = PtxType("bf16x2", "b", 32)
    table["tf32"] = PtxType("tf32", "b", 32)  # an f32 bit pattern (mma reads its top 19 bits)
    return table


TYPES: dict[str, PtxType] = _mk()


def ptx_type(name: str) -> PtxType | None:
    """The type named ``name`` (without the leading dot), or None."""
    return TYPES.get(name.lstrip("."))


def storage_dtype(t: PtxType) -> type:
    """The NumPy dtype a register of type ``t`` is stored in."""
    return np.bool_ if t.kind == "pred" else UINT[t.bits]


def from_bits(a: np.ndarray, t: PtxType) -> np.ndarray:
    """View register bits ``a`` (unsigned, any width) as values of type ``t``."""
    if t.kind == "pred":
        return a.astype(np.bool_) if a.dtype != np.bool_ else a
    if a.dtype == np.bool_:
        a = a.astype(np.uint8)
    width = a.dtype.itemsize * 8
    if width == t.bits:
        return a.view(t.np)
    if width > t.bits:
        return a.astype(UINT[t.bits]).view(t.np)
    if t.kind == "s":
        return a.view(SINT[width]).astype(t.np)
    return a.astype(UINT[t.bits]).view(t.np)


def to_bits(v, t: PtxType, width: int) -> np.ndarray:
    """Values ``v`` of type ``t`` as unsigned bits of ``width`` (extend or truncate)."""
    if width == 1:
        return np.asarray(v, np.bool_)
    v = np.asarray(v, t.np)
    if t.kind == "pred":
        v = v.astype(np.uint8)
        bits = 8
    else:
        bits = t.bits
    u = v.view(UINT[bits]) if v.ndim else np.asarray(v.view(UINT[bits]))
    if bits == width:
        return u
    if bits < width and t.kind == "s":
        return v.astype(SINT[width]).view(UINT[width])
    return u.astype(UINT[width])


def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    """bf16 bits (uint16) to float32 (exact)."""
    return (np.asarray(bits, np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def f32_to_bf16(x: npt.ArrayLike, mode: str = "rn") -> np.ndarray:
    """float32 to bf16 bits with round-to-nearest-even (``rn``) or toward zero (``rz``); NaN stays NaN."""
    x = np.asarray(x, np.float32)
    u = x.view(np.uint32) if x.ndim else np.asarray(x).reshape(1).view(np.uint32)
    if mode == "rz":
        r = u >> np.uint32(16)
    else:
        lsb = (u >> np.uint32(16)) & np.uint32(1)
        r = (u + np.uint32(0x7FFF) + lsb) >> np.uint32(16)
    nan = np.isnan(x.reshape(u.shape))
    r = np.where(nan, (u >> np.uint32(16)) | np.uint32(0x40), r)
    r = r.astype(np.uint16)
    return r if x.ndim else r.reshape(())
