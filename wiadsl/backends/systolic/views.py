"""DRAM views: how the DMA engine sees a host tensor as (batch, rows, cols) tiles.

A view turns an N-D host tensor into the 3-D matrix a GEMM tiles over; the DMA
engine applies it while moving tiles (Gemmini's im2col unit does the same for
convolutions). The kinds, a whitelist:

- ``mat target=[..] shape=[B, R, C]``: the base broadcast (NumPy rules) to
  ``target``, then reshaped to ``shape`` (matmul operands and results, epilogue
  operands; ``target`` is the IR result shape, so bias vectors broadcast).
- ``im2col kernel=[kh, kw] stride=[sh, sw] padding=[ph, pw] shape=[1, P, Q]``:
  NCHW input as patch rows, P = N*Ho*Wo, Q = C*kh*kw (zero padding).
- ``convw shape=[1, Q, O]``: OIHW weight as its (C*kh*kw) x O matrix.
- ``convout target=[N, O, Ho, Wo] shape=[1, P, O]``: an NCHW tensor (broadcast to
  ``target``) as output-pixel rows by channel columns.
- ``perm split=[..] axes=[..] target=[..] shape=[B, R, C]``: the base reshaped to
  ``split``, its axes permuted by ``axes``, broadcast to ``target``, reshaped to
  ``shape`` (a strided DMA: transposes, reshapes, reductions over any axes).
- ``window kernel=[kh, kw] stride=[sh, sw] shape=[1, P, kh*kw]``: pooling windows over
  the last two axes of the base as rows (lead..., ho, wo) of window elements (i, j).

Invariant: ``read`` and ``write`` agree with NumPy on the whole tensor, tile by
tile; ``nbytes`` counts the distinct host elements a tile touches (a broadcast
bias costs one row, not one per output row).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import lru_cache
from math import prod
from typing import Any, Protocol

import numpy as np

from .isa import Dram, Remote, SasmError, View


def _bcast_index(base_shape: tuple[int, ...], target: tuple[int, ...]) -> np.ndarray:
    """Flat base indices of every element of the broadcast target."""
    return np.broadcast_to(np.arange(prod(base_shape)).reshape(base_shape), target)


class ViewKind(Protocol):
    @property
    def keys(self) -> tuple[str, ...]: ...  # read-only: the kinds are frozen dataclasses

    def check(self, view: View, base: Dram) -> None: ...
    def read(self, view: View, base: np.ndarray, r: Remote, cache: dict[str, Any]) -> np.ndarray: ...
    def write(self, view: View, base: np.ndarray, r: Remote, data: np.ndarray) -> None: ...
    def nbytes(self, view: View, base: Dram, r: Remote) -> int: ...


def _tile(m: np.ndarray, r: Remote) -> np.ndarray:
    return m[r.batch, r.rows[0]:r.rows[1], r.cols[0]:r.cols[1]]


@dataclass(frozen=True)
class MatView:
    keys = ("target", "shape")

    def check(self, view: View, base: Dram) -> None:
        target = view.param("target")
        try:
            np.broadcast_shapes(base.shape, target)
        except ValueError:
            raise SasmError(f"view {view.name}: {list(base.shape)} does not broadcast to "
                            f"{list(target)}") from None
        if prod(target) != prod(view.shape):
            raise SasmError(f"view {view.name}: target {list(target)} and shape "
                            f"{list(view.shape)} differ in size")
        if base.direction == "out" and tuple(base.shape) != tuple(target):
            raise SasmError(f"view {view.name}: an output view cannot broadcast")

    def read(self, view: View, base: np.ndarray, r: Remote, cache: dict[str, Any]) -> np.ndarray:
        whole = np.broadcast_to(base, view.param("target")).reshape(view.shape)
        return _tile(whole, r)

    def write(self, view: View, base: np.ndarray, r: Remote, data: np.ndarray) -> None:
        _tile(base.reshape(view.shape), r)[...] = data

    def nbytes(self, view: View, base: Dram, r: Remote) -> int:
        itemsize = base.dtype.bits // 8
        if tuple(base.shape) == tuple(view.param("target")):
            return r.shape[0] * r.shape[1] * itemsize
        index = _tile(_bcast_index(base.shape, view.param("target")).reshape(view.shape), r)
        return int(np.unique(index).size) * itemsize


def im2col(x: np.ndarray, kernel: tuple[int, ...], stride: tuple[int, ...],
           padding: tuple[int, ...]) -> np.ndarray:
    """The patch matrix of an NCHW tensor: row (n, ho, wo), column (c, i, j)."""
    (kh, kw), (sh, sw), (ph, pw) = kernel, stride, padding
    n, c, h, w = x.shape
    ho, wo = (h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    cols = np.empty((n, ho, wo, c, kh, kw), dtype=x.dtype)
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i:i + sh * (ho - 1) + 1:sh, j:j + sw * (wo - 1) + 1:sw]
            cols[:, :, :, :, i, j] = patch.transpose(0, 2, 3, 1)
    return cols.reshape(n * ho * wo, c * kh * kw)


@dataclass(frozen=True)
class Im2colView:
    keys = ("kernel", "stride", "padding", "shape")

    def check(self, view: View, base: Dram) -> None:
        if len(base.shape) != 4 or base.direction != "in":
            raise SasmError(f"view {view.name}: im2col reads an NCHW input")
        n, c, h, w = base.shape
        (kh, kw), (sh, sw), (ph, pw) = (view.param(k) for k in ("kernel", "stride", "padding"))
        ho, wo = (h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1
        if view.shape != (1, n * ho * wo, c * kh * kw):
            raise SasmError(f"view {view.name}: shape should be {[1, n * ho * wo, c * kh * kw]}")

    def read(self, view: View, base: np.ndarray, r: Remote, cache: dict[str, Any]) -> np.ndarray:
        if view.name not in cache:
            cache[view.name] = im2col(base, *(view.param(k) for k in ("kernel", "stride", "padding")))
        return cache[view.name][r.rows[0]:r.rows[1], r.cols[0]:r.cols[1]]

    def write(self, view: View, base: np.ndarray, r: Remote, data: np.ndarray) -> None:
        raise SasmError(f"view {view.name}: im2col views are read-only")

    def nbytes(self, view: View, base: Dram, r: Remote) -> int:
        return r.shape[0] * r.shape[1] * (base.dtype.bits // 8)


@dataclass(frozen=True)
class ConvWeightView:
    keys = ("shape",)

    def check(self, view: View, base: Dram) -> None:
        if len(base.shape) != 4:
            raise SasmError(f"view {view.name}: convw reads an OIHW weight")
        o, c, kh, kw = base.shape
        if view.shape != (1, c * kh * kw, o):
            raise SasmError(f"view {view.name}: shape should be {[1, c * kh * kw, o]}")

    def read(self, view: View, base: np.ndarray, r: Remote, cache: dict[str, Any]) -> np.ndarray:
        return base.reshape(base.shape[0], -1).T[r.rows[0]:r.rows[1], r.cols[0]:r.cols[1]]

    def write(self, view: View, base: np.ndarray, r: Remote, data: np.ndarray) -> None:
        raise SasmError(f"view {view.name}: convw views are read-only")

    def nbytes(self, view: View, base: Dram, r: Remote) -> int:
        return r.shape[0] * r.shape[1] * (base.dtype.bits // 8)


@dataclass(frozen=True)
class ConvOutView:
    keys = ("target", "shape")

    def check(self, view: View, base: Dram) -> None:
        target = view.param("target")
        if len(target) != 4:
            raise SasmError(f"view {view.name}: convout needs an NCHW target")
        MatView().check(View(view.name, "mat", view.base, (("target", target),
                                                           ("shape", (1, prod(target), 1)))), base)
        n, o, ho, wo = target
        if view.shape != (1, n * ho * wo, o):
            raise SasmError(f"view {view.name}: shape should be {[1, n * ho * wo, o]}")

    def _matrix(self, view: View, x: np.ndarray) -> np.ndarray:
        n, o, ho, wo = view.param("target")
        return np.broadcast_to(x, (n, o, ho, wo)).transpose(0, 2, 3, 1).reshape(n * ho * wo, o)

    def read(self, view: View, base: np.ndarray, r: Remote, cache: dict[str, Any]) -> np.ndarray:
        return self._matrix(view, base)[r.rows[0]:r.rows[1], r.cols[0]:r.cols[1]]

    def write(self, view: View, base: np.ndarray, r: Remote, data: np.ndarray) -> None:
        n, o, ho, wo = view.param("target")
        p = np.arange(*r.rows)
        ni, hi, wi = np.unravel_index(p, (n, ho, wo))
        oi = np.arange(*r.cols)
        base[ni[:, None], oi[None, :], hi[:, None], wi[:, None]] = data

    def nbytes(self, view: View, base: Dram, r: Remote) -> int:
        itemsize = base.dtype.bits // 8
        if tuple(base.shape) == tuple(view.param("target")):
            return r.shape[0] * r.shape[1] * itemsize
        index = self._matrix(view, _bcast_index(base.shape, base.shape))
        return int(np.unique(index[r.rows[0]:r.rows[1], r.cols[0]:r.cols[1]]).size) * itemsize


@lru_cache(maxsize=64)
def perm_index(base: tuple[int, ...], split: tuple[int, ...], axes: tuple[int, ...],
               target: tuple[int, ...], shape: tuple[int, ...]) -> np.ndarray:
    """Flat base index of each element of a ``perm`` view (cached: tiles share it)."""
    idx = np.arange(prod(base)).reshape(split).transpose(axes)
    return np.broadcast_to(idx, target).reshape(shape)


@lru_cache(maxsize=64)
def window_index(base: tuple[int, ...], kernel: tuple[int, ...], stride: tuple[int, ...]
                 ) -> np.ndarray:
    """Flat base index of each element of a ``window`` view: row (lead..., ho, wo),
    column (i, j) of the window."""
    (kh, kw), (sh, sw) = kernel, stride
    h, w = base[-2:]
    ho, wo = (h - kh) // sh + 1, (w - kw) // sw + 1
    idx = np.arange(prod(base)).reshape(-1, h, w)
    wins = [idx[:, i:i + sh * (ho - 1) + 1:sh, j:j + sw * (wo - 1) + 1:sw]
            for i in range(kh) for j in range(kw)]
    return np.stack(wins, axis=-1).reshape(1, -1, kh * kw)


@dataclass(frozen=True)
class Relayout:
    """A transpose (``kind="transpose"``, ``ints`` = perm) or reshape (``"reshape"``,
    ``ints`` = the result shape) that the DMA applies on the way in or out through a
    ``perm`` view, so the op itself never runs (``rowplan.absorb_relayouts``)."""

    kind: str
    ints: tuple[int, ...]

    def apply(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """The shape of the relayout of a tensor of ``shape``."""
        return tuple(shape[p] for p in self.ints) if self.kind == "transpose" else self.ints

    def read(self, source: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """``perm`` view (split, axes) presenting the relayout of a ``source`` tensor."""
        if self.kind == "transpose":
            return source, self.ints
        return self.ints, tuple(range(len(self.ints)))

    def write(self, logical: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """``perm`` view (split, axes) of the relayout's result presenting the tensor
        of ``logical`` shape it was made from (so writing it writes the result)."""
        if self.kind == "transpose":
            inverse = tuple(sorted(range(len(self.ints)), key=lambda a: self.ints[a]))
            return self.apply(logical), inverse
        return logical, tuple(range(len(logical)))


class _IndexView(ABC):
    """A view given by the flat base index of every element (``index``): the DMA
    engine gathers (or scatters) those elements; a tile costs its distinct elements."""

    @abstractmethod
    def index(self, view: View, base: tuple[int, ...]) -> np.ndarray: ...

    def read(self, view: View, base: np.ndarray, r: Remote, cache: dict[str, Any]) -> np.ndarray:
        return base.reshape(-1)[_tile(self.index(view, base.shape), r)]

    def write(self, view: View, base: np.ndarray, r: Remote, data: np.ndarray) -> None:
        base.reshape(-1)[_tile(self.index(view, base.shape), r)] = data

    def nbytes(self, view: View, base: Dram, r: Remote) -> int:
        index = _tile(self.index(view, tuple(base.shape)), r)
        return int(np.unique(index).size) * (base.dtype.bits // 8)


@dataclass(frozen=True)
class PermView(_IndexView):
    keys = ("split", "axes", "target", "shape")

    def index(self, view: View, base: tuple[int, ...]) -> np.ndarray:
        return perm_index(tuple(base), *(view.param(k) for k in self.keys))

    def nbytes(self, view: View, base: Dram, r: Remote) -> int:
        if prod(view.param("target")) == prod(base.shape):  # no broadcast: all distinct
            return r.shape[0] * r.shape[1] * (base.dtype.bits // 8)
        return super().nbytes(view, base, r)

    def check(self, view: View, base: Dram) -> None:
        split, axes, target = (view.param(k) for k in self.keys[:3])
        if prod(split) != prod(base.shape) or sorted(axes) != list(range(len(split))):
            raise SasmError(f"view {view.name}: split {list(split)} of {list(base.shape)} "
                            f"or axes {list(axes)} (a permutation of its axes) is wrong")
        moved = tuple(split[a] for a in axes)
        MatView().check(View(view.name, "mat", view.base, (("target", target),
                                                           ("shape", view.shape))),
                        Dram(base.name, base.dtype, moved, base.direction))


@dataclass(frozen=True)
class WindowView(_IndexView):
    keys = ("kernel", "stride", "shape")

    def index(self, view: View, base: tuple[int, ...]) -> np.ndarray:
        return window_index(tuple(base), view.param("kernel"), view.param("stride"))

    def check(self, view: View, base: Dram) -> None:
        (kh, kw), (sh, sw) = view.param("kernel"), view.param("stride")
        if len(base.shape) < 2 or base.direction != "in" or min(kh, kw, sh, sw) < 1:
            raise SasmError(f"view {view.name}: window reads an input of rank >= 2 with "
                            f"kernel and stride >= 1")
        h, w = base.shape[-2:]
        ho, wo = (h - kh) // sh + 1, (w - kw) // sw + 1
        want = (1, prod(base.shape[:-2]) * ho * wo, kh * kw)
        if ho < 1 or wo < 1 or view.shape != want:
            raise SasmError(f"view {view.name}: shape should be {list(want)}")

    def write(self, view: View, base: np.ndarray, r: Remote, data: np.ndarray) -> None:
        raise SasmError(f"view {view.name}: window views are read-only")

    def nbytes(self, view: View, base: Dram, r: Remote) -> int:
        # overlapping windows fetch an element once per window, as im2col does
        return r.shape[0] * r.shape[1] * (base.dtype.bits // 8)


VIEW_KINDS: dict[str, ViewKind] = {
    "mat": MatView(), "im2col": Im2colView(), "convw": ConvWeightView(), "convout": ConvOutView(),
    "perm": PermView(), "window": WindowView(),
}


def view_kind(view: View) -> ViewKind:
    if view.kind not in VIEW_KINDS:
        raise SasmError(f"view {view.name}: unknown kind '{view.kind}'; kinds: "
                        f"{', '.join(VIEW_KINDS)}")
    kind = VIEW_KINDS[view.kind]
    if tuple(k for k, _ in view.params) != kind.keys:
        raise SasmError(f"view {view.name}: {view.kind} takes {', '.join(kind.keys)} in that order")
    return kind
