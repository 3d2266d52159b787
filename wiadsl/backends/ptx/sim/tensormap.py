"""TMA tensor maps as the simulator encodes them, and the shared-memory swizzle patterns.

A real ``CUtensorMap`` (128 bytes, 64-byte aligned) is opaque: the driver's
``cuTensorMapEncodeTiled`` fills it.  The simulator reads the same fields from its
own documented encoding of those 128 bytes (``encode`` / ``decode``), little-endian:

| bytes | field |
| --- | --- |
| 0-7 | magic ``WIATMAP1`` |
| 8-15 | u64 global address (16-byte aligned) |
| 16 | u8 rank (1-5) |
| 17 | u8 element size in bytes (1, 2, 4, 8) |
| 18 | u8 data type (``CUtensorMapDataType`` value, informative) |
| 19 | u8 swizzle (``CUtensorMapSwizzle``: 0 none, 1 32B, 2 64B, 3 128B) |
| 20 | u8 interleave (``CUtensorMapInterleave``; only 0, none) |
| 21 | u8 out-of-bounds fill (``CUtensorMapFloatOOBfill``: 0 zeros, 1 NaN) |
| 22 | u8 L2 promotion (informative) |
| 24-43 | 5 x u32 global dims (elements; innermost first; unused 1) |
| 48-79 | 4 x u64 global strides in bytes of dims 1..4 (dim 0 is dense) |
| 80-99 | 5 x u32 box dims (elements) |
| 100-119 | 5 x u32 element strides (only 1 is supported) |

``validate`` checks the driver API's constraints (``cuTensorMapEncodeTiled``):
dims 1..2^32, strides multiples of 16 below 2^40, box dims 1..256 with the inner
box a multiple of 16 bytes, element strides 1..8, and with a swizzle the inner box
at most the swizzle span.

Swizzles act on shared-memory byte addresses, as CUTLASS's ``Swizzle<B,4,3>`` (32B:
B=1, 64B: B=2, 128B: B=3): bits [4, 4+B) are XORed with bits [7, 7+B), i.e. the
16-byte chunk index within a row of 2^B chunks is XORed with the row index (rows of
128 bytes, taken mod 2^B).  The pattern repeats every 256, 512 or 1024 bytes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

MAGIC = b"WIATMAP1"
SIZE = 128
#: swizzle mode (CUtensorMapSwizzle) -> bytes of its span (a row of the pattern)
SWIZZLE_SPAN = {0: 0, 1: 32, 2: 64, 3: 128}
#: swizzle mode -> bytes after which the pattern repeats (8 rows of 16-byte chunks)
SWIZZLE_REPEAT = {0: 16, 1: 256, 2: 512, 3: 1024}
_HEAD = struct.Struct("<8sQBBBBBBBx")
_DIMS = struct.Struct("<5I4x")
_STRIDES = struct.Struct("<4Q")
_BOX = struct.Struct("<5I5I8x")


@dataclass(frozen=True)
class TensorMap:
    """The fields of a tiled tensor map (dims, strides, box innermost first)."""

    address: int
    elem_bytes: int
    dims: tuple[int, ...]
    strides: tuple[int, ...]           # bytes, of dims 1..rank-1
    box: tuple[int, ...]
    element_strides: tuple[int, ...] = ()
    swizzle: int = 0
    data_type: int = 0
    interleave: int = 0
    oob_nan: bool = False
    l2_promotion: int = 0

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def box_bytes(self) -> int:
        return int(np.prod(self.box)) * self.elem_bytes


@dataclass(frozen=True)
class TensorMapArg:
    """A launch argument for a ``.param .align 64 .b8 name[128]`` tensor map: the launch puts
    ``array`` in global memory (one buffer per array, as for pointer arguments) and passes
    ``encode(fields)`` with the address of that buffer plus ``offset`` bytes."""

    array: np.ndarray
    fields: TensorMap
    offset: int = 0


def validate(tm: TensorMap) -> None:
    """Raise ValueError naming the first field the driver would reject."""
    r = tm.rank
    if not 1 <= r <= 5 or len(tm.box) != r or len(tm.strides) != r - 1:
        raise ValueError(f"tensor map rank {r} with {len(tm.box)} box dims and "
                         f"{len(tm.strides)} strides (need rank 1..5, rank box dims, rank-1 strides)")
    if tm.elem_bytes not in (1, 2, 4, 8):
        raise ValueError(f"tensor map element size {tm.elem_bytes} (need 1, 2, 4 or 8 bytes)")
    if tm.address % 16:
        raise ValueError(f"tensor map global address 0x{tm.address:x} is not 16-byte aligned")
    if tm.interleave != 0:
        raise ValueError("interleaved tensor maps are not supported")
    for i, d in enumerate(tm.dims):
        if not 1 <= d <= 1 << 32:
            raise ValueError(f"tensor map global dim {i} = {d} (need 1..2^32)")
    for i, s in enumerate(tm.strides):
        if s % 16 or not 0 < s < 1 << 40:
            raise ValueError(f"tensor map global stride {i + 1} = {s} bytes (need a positive "
                             f"multiple of 16 below 2^40)")
    for i, b in enumerate(tm.box):
        if not 1 <= b <= 256:
            raise ValueError(f"tensor map box dim {i} = {b} (need 1..256)")
    if tm.box[0] * tm.elem_bytes % 16:
        raise ValueError(f"tensor map inner box of {tm.box[0] * tm.elem_bytes} bytes is not a "
                         f"multiple of 16")
    es = tm.element_strides or (1,) * r
    if len(es) != r or any(not 1 <= e <= 8 for e in es):
        raise ValueError(f"tensor map element strides {es} (need rank values in 1..8)")
    if tm.swizzle not in SWIZZLE_SPAN:
        raise ValueError(f"tensor map swizzle mode {tm.swizzle} (need 0..3)")
    span = SWIZZLE_SPAN[tm.swizzle]
    if span and tm.box[0] * tm.elem_bytes > span:
        raise ValueError(f"tensor map inner box of {tm.box[0] * tm.elem_bytes} bytes exceeds the "
                         f"{span}-byte swizzle span")


def encode(tm: TensorMap) -> bytes:
    """The simulator's 128 bytes for ``tm`` (validated)."""
    validate(tm)
    r = tm.rank
    pad = (1,) * (5 - r)
    es = tm.element_strides or (1,) * r
    raw = (_HEAD.pack(MAGIC, tm.address, r, tm.elem_bytes, tm.data_type, tm.swizzle,
                      tm.interleave, int(tm.oob_nan), tm.l2_promotion)
           + _DIMS.pack(*[d % (1 << 32) for d in tm.dims], *pad)   # 2^32 is stored as 0
           + _STRIDES.pack(*tm.strides, *(0,) * (4 - len(tm.strides)))
           + _BOX.pack(*tm.box, *pad, *es, *pad))
    assert len(raw) == SIZE
    return raw


def decode(raw: bytes) -> TensorMap:
    """The fields of the simulator's encoding; ValueError if ``raw`` is not one."""
    if len(raw) != SIZE or raw[:8] != MAGIC:
        raise ValueError("not a simulator tensor map (the 128 bytes must come from "
                         "sim.tensormap.encode; a driver-encoded CUtensorMap is opaque)")
    _, addr, r, esz, dt, sw, il, oob, l2 = _HEAD.unpack_from(raw, 0)
    if not 1 <= r <= 5:
        raise ValueError(f"simulator tensor map of rank {r}")
    dims = _DIMS.unpack_from(raw, _HEAD.size)
    strides = _STRIDES.unpack_from(raw, _HEAD.size + _DIMS.size)
    both = _BOX.unpack_from(raw, _HEAD.size + _DIMS.size + _STRIDES.size)
    tm = TensorMap(addr, esz, tuple(d or 1 << 32 for d in dims[:r]), tuple(strides[: r - 1]),
                   tuple(both[:r]), tuple(both[5 : 5 + r]), sw, dt, il, bool(oob), l2)
    validate(tm)
    return tm


def swizzle(addr: np.ndarray, mode: int) -> np.ndarray:
    """Shared byte addresses after swizzle ``mode`` (0 none, 1 32B, 2 64B, 3 128B)."""
    if mode == 0:
        return addr
    bits = {1: 1, 2: 2, 3: 3}[mode]
    a = np.asarray(addr, np.int64)
    return a ^ ((a >> 3) & (((1 << bits) - 1) << 4))
