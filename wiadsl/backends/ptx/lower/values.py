"""What a planned IR value is: a device view, a host scalar, or a not-yet-materialized op.

Invariants:
- A ``View`` is a device buffer seen through element strides and an offset;
  ``dense`` views are C-contiguous from the buffer's start (block arguments,
  kernel outputs and everything copied back to the host are dense).
- A ``HostScalar`` is a plan name (``s3``) or a literal known at compile time.
- A ``Lazy`` value is computed inside the kernel of whatever consumes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ....dtypes import DType
from ....ir.core import Operation
from ..symbolic import Sym, contiguous_strides, mul, where


@dataclass(frozen=True)
class View:
    buffer: str
    dtype: DType
    shape: tuple[Sym, ...]
    strides: tuple[Sym, ...]
    offset: Sym = 0

    @property
    def dense(self) -> bool:
        return self.offset == 0 and list(self.strides) == contiguous_strides(list(self.shape))

    def permuted(self, perm: list[int]) -> View:
        return View(self.buffer, self.dtype, tuple(self.shape[p] for p in perm),
                    tuple(self.strides[p] for p in perm), self.offset)

    def domain_strides(self, amap: tuple[int, ...], domain: tuple[Sym, ...]) -> tuple[Sym, ...]:
        """Strides per domain axis when this view broadcasts into ``domain`` via ``amap``."""
        out: list[Sym] = [0] * len(domain)
        for d, s, a in zip(self.shape, self.strides, amap, strict=True):
            out[a] = broadcast_stride(d, domain[a], s)
        return tuple(out)


def dense_view(buffer: str, dtype: DType, shape: tuple[Sym, ...]) -> View:
    return View(buffer, dtype, shape, tuple(contiguous_strides(list(shape))))


def broadcast_stride(extent: Sym, target: Sym, stride: Sym) -> Sym:
    """Stride of an axis of ``extent`` read across ``target`` (0 where it broadcasts)."""
    if extent == target:
        return stride
    if extent == 1:
        return 0
    return where(f"{extent} == 1", 0, stride)


def broadcast_extent(a: Sym, b: Sym, record=None) -> Sym:
    """The broadcast of two extents; ``record(a, b)`` is told of two distinct symbols."""
    if isinstance(a, str) and isinstance(b, str) and a != b and record is not None \
            and record(a, b):
        return a
    if a == b or b == 1:
        return a
    if a == 1:
        return b
    if isinstance(a, int) and isinstance(b, int):
        return a  # mismatch: the IR verifier rules this out
    from ..symbolic import call
    return call("bcast", a, b)


def broadcast_shapes(shapes: list[tuple[Sym, ...]], record=None) -> tuple[Sym, ...]:
    rank = max((len(s) for s in shapes), default=0)
    out: list[Sym] = [1] * rank
    for s in shapes:
        for i, d in enumerate(s):
            k = rank - len(s) + i
            out[k] = broadcast_extent(out[k], d, record)
    return tuple(out)


@dataclass(frozen=True)
class HostScalar:
    """A scalar living on the host: a plan name or a literal."""

    value: str | int | float | bool
    dtype: DType | None  # None: index

    @property
    def is_literal(self) -> bool:
        return not isinstance(self.value, str)

    def entry(self) -> dict[str, Any]:
        """The plan's entry for this scalar: a plan name, or a literal with its dtype (the
        executor converts a literal to the dtype it names; one without is an index)."""
        if self.is_literal:
            return {"value": self.value, "dtype": str(self.dtype or "index")}
        return {"scalar": self.value}

    @property
    def sym(self) -> Sym:
        if isinstance(self.value, bool):
            return int(self.value)
        if isinstance(self.value, float):
            return int(self.value)
        return self.value


@dataclass(frozen=True)
class Lazy:
    """An op whose result is fused into its consumers' kernels."""

    op: Operation
    shape: tuple[Sym, ...]


def numel(shape: tuple[Sym, ...]) -> Sym:
    out: Sym = 1
    for d in shape:
        out = mul(out, d)
    return out
