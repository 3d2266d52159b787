"""The loop level: buffers, element loads/stores, checks and micro-kernel calls.

After ``wiadsl.loops.lower`` a function holds no tensor-level computation: every
tensor op became loops over ``loop.*`` memory ops. Loops are ordinary CFG loops
(a header block whose ``index`` argument is the induction variable and whose
further arguments are the iteration values, as docs/ir.md's counted loop), so
the printer, parser, verifier and interpreter of the tensor level work unchanged.

Memory model (docs/ir.md, "Loop level"):
- A value of ``tensor<...>`` type at this level *names a buffer*: a C-contiguous
  array of its dtype's storage. ``loop.alloc`` makes a new, uninitialized one;
  ``loop.store`` writes into it in place (the only ops with side effects, with
  ``loop.gemm``, ``loop.copy`` and ``loop.check``).
- Element access is by a linear ``index`` into the C-order flattening; the
  lowering computes offsets from extents (``tensor.dim``), so a backend needs
  no stride bookkeeping and static extents fold to constants.
- Function parameters are read-only buffers (the caller's arrays).

Text forms:
    %b = loop.alloc %n : index -> tensor<?x4xf32>
    %v = loop.load %b, %i : (tensor<?x4xf32>, index) -> f32
    loop.store %v, %b, %i : (f32, tensor<?x4xf32>, index)
    loop.check %ok {message = "'tensor.extract': index out of range"} : i1
    loop.copy %src, %dst, %soff, %doff, %n : (...)
    loop.gemm %a, %b, %c, %aoff, %boff, %coff, %m, %n, %k, %lda, %ldb, %ldc {accumulate = false} : (...)
    loop.qgemm %a, %b, %c, %aoff, %boff, %coff, %m, %n, %k, %lda, %ldb, %ldc : (...)
    loop.conv2d %x, %w, %y, %xoff, %yoff, %c, %hp, %wp, %o, %kh, %kw, %ho, %wo {stride = [sh, sw]} : (...)
    loop.conv2d ..., %wo, %p_lo, %p_hi {stride = [sh, sw], chunk = 256} : (...)   (output pixels [p_lo, p_hi) only)
    loop.conv2d ..., %p_hi, %o_lo, %o_hi {..., channels = 128} : (...)   (of output channels [o_lo, o_hi) only)
    loop.conv2d ..., %p_hi, %s, %soff, %sstep, %t, %toff, %tstep {..., affine = ["scale", "shift"],
        clamp = [0.0, 6.0]} : (...)   (each output clamp(v * s[c] + t[c], 0, 6) as written;
        "residual": two more operands, a buffer laid out as y and its offset)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..diagnostics import WiaRuntimeError
from ..dtypes import DType
from .core import Operation
from .ops_base import (
    PURE,
    attr_bool,
    attr_ints,
    check_dynamic_extents,
    expect_counts,
    expect_index,
    expect_tensor,
    register,
)
from .types import ScalarType, TensorType, shapes_compatible


@register
class AllocOp(Operation):
    """``loop.alloc <extents>``: a new buffer; one ``index`` operand per ``?``.

    Contents are unspecified until stored (the interpreter fills them with a
    recognizable garbage pattern so that reads before writes show up in tests).
    ``{stack}``: a small static buffer that lives until its function returns, in the
    function's stack frame (contract_rows.py's row buffers: a parallel loop's chunk
    then allocates nothing).
    """

    name = "loop.alloc"
    traits = PURE

    def verify(self) -> None:
        expect_counts(self, (0, None), 1)
        result = expect_tensor(self, self.result.type, "result")
        check_dynamic_extents(self, result, self.operands)
        if attr_bool(self, "stack", False) and (self.operands or None in result.shape):
            raise self.error("a {stack} buffer must have static extents")

    def evaluate(self, args: list[Any]) -> list[Any]:
        it = iter(int(a) for a in args)
        shape = tuple(next(it) if d is None else d for d in self.result.type.shape)  # type: ignore[union-attr]
        if any(d < 0 for d in shape):
            raise WiaRuntimeError(f"'{self.name}': negative extent in {shape}")
        out = np.empty(shape, dtype=self.result.type.dtype.numpy)  # type: ignore[union-attr]
        if out.dtype.kind == "f":
            out.fill(np.nan)
        return [out]


def _buffer_and_offset(op: Operation, buf_index: int, offset_index: int) -> TensorType:
    buf = expect_tensor(op, op.operand_types[buf_index], "buffer")
    expect_index(op, op.operand_types[offset_index], "offset")
    return buf


def _flat_get(op: Operation, buf: np.ndarray, i: Any) -> Any:
    i = int(i)
    if not 0 <= i < buf.size:
        raise WiaRuntimeError(f"'{op.name}': offset {i} outside a buffer of {buf.size} elements")
    return buf.reshape(-1)[i]


@register
class LoadOp(Operation):
    """``loop.load %buf, %offset``: the element at a linear offset (scalar of the dtype)."""

    name = "loop.load"
    traits = PURE

    def verify(self) -> None:
        expect_counts(self, 2, 1)
        buf = _buffer_and_offset(self, 0, 1)
        if self.result.type != ScalarType(buf.dtype):
            raise self.error(f"result must be {buf.dtype.ir_name}, got {self.result.type}")

    def evaluate(self, args: list[Any]) -> list[Any]:
        return [_flat_get(self, args[0], args[1])]


@register
class StoreOp(Operation):
    """``loop.store %v, %buf, %offset``: write one element in place."""

    name = "loop.store"

    def verify(self) -> None:
        expect_counts(self, 3, 0)
        buf = _buffer_and_offset(self, 1, 2)
        if self.operand_types[0] != ScalarType(buf.dtype):
            raise self.error(f"stores {buf.dtype.ir_name} values, got {self.operand_types[0]}")

    def evaluate(self, args: list[Any]) -> list[Any]:
        buf, i = args[1], int(args[2])
        if not 0 <= i < buf.size:
            raise WiaRuntimeError(f"'{self.name}': offset {i} outside a buffer of {buf.size} elements")
        buf.reshape(-1)[i] = args[0]
        return []


@register
class CheckOp(Operation):
    """``loop.check %ok {message}``: a runtime error with ``message`` when ``%ok`` is false.

    ``message`` names the tensor-level op (and its source line when known); the
    native backends turn it into an error code, the jit into a WiaRuntimeError.
    """

    name = "loop.check"

    def verify(self) -> None:
        expect_counts(self, 1, 0)
        if self.operand_types[0] != ScalarType(DType.BOOL):
            raise self.error(f"condition must be i1, got {self.operand_types[0]}")
        if not isinstance(self.attributes.get("message"), str):
            raise self.error("needs a string attribute 'message'")

    def evaluate(self, args: list[Any]) -> list[Any]:
        if not bool(args[0]):
            raise WiaRuntimeError(self.attributes["message"])
        return []


@register
class CopyOp(Operation):
    """``loop.copy %src, %dst, %soff, %doff, %n``: ``n`` contiguous elements (memcpy).

    Source and destination have one dtype and do not overlap.
    """

    name = "loop.copy"

    def verify(self) -> None:
        expect_counts(self, 5, 0)
        src = expect_tensor(self, self.operand_types[0], "source")
        dst = expect_tensor(self, self.operand_types[1], "destination")
        if src.dtype is not dst.dtype:
            raise self.error(f"copies between one dtype, got {src} and {dst}")
        for i, t in enumerate(self.operand_types[2:]):
            expect_index(self, t, f"operand {i + 2}")

    def evaluate(self, args: list[Any]) -> list[Any]:
        src, dst = args[0].reshape(-1), args[1].reshape(-1)
        so, do, n = (int(a) for a in args[2:])
        if n < 0 or so < 0 or do < 0 or so + n > src.size or do + n > dst.size:
            raise WiaRuntimeError(f"'{self.name}': range outside a buffer")
        dst[do:do + n] = src[so:so + n]
        return []


@register
class GemmOp(Operation):
    """``loop.gemm``: ``C[m, n] (+)= sum_k A[m, k] * B[k, n]`` on row-major panels.

    Operands: buffers A, B, C (one float dtype, f32 or f64), then ``index``
    offsets aoff, boff, coff, extents m, n, k and leading dimensions lda, ldb,
    ldc. ``accumulate`` (default false) adds into C instead of overwriting it.
    The backend emits a packed, cache-blocked, register-blocked micro-kernel.
    """

    name = "loop.gemm"

    def verify(self) -> None:
        expect_counts(self, 12, 0)
        types = [expect_tensor(self, t, f"operand {i}") for i, t in enumerate(self.operand_types[:3])]
        if len({t.dtype for t in types}) != 1 or types[0].dtype not in (DType.F32, DType.F64):
            raise self.error(f"takes f32 or f64 buffers of one dtype, got {', '.join(map(str, types))}")
        for i, t in enumerate(self.operand_types[3:]):
            expect_index(self, t, f"operand {i + 3}")
        attr_bool(self, "accumulate", False)

    def evaluate(self, args: list[Any]) -> list[Any]:
        a, b, c = (x.reshape(-1) for x in args[:3])
        ao, bo, co, m, n, k, lda, ldb, ldc = (int(x) for x in args[3:])
        am = np.lib.stride_tricks.as_strided(a[ao:], (m, k), (lda * a.itemsize, a.itemsize))
        bm = np.lib.stride_tricks.as_strided(b[bo:], (k, n), (ldb * b.itemsize, b.itemsize))
        cm = np.lib.stride_tricks.as_strided(c[co:], (m, n), (ldc * c.itemsize, c.itemsize))
        prod = am @ bm
        if self.attributes.get("accumulate", False):
            cm += prod
        else:
            cm[...] = prod
        return []


#: The loop-level ops that write memory or fail: never removed, never reordered.
SIDE_EFFECTS = frozenset({"loop.store", "loop.check", "loop.copy", "loop.gemm", "loop.vstore",
                          "loop.prefetch"})


@register
class RetypeOp(Operation):
    """``loop.retype %buf : tensor<5xf32> -> tensor<?xf32>``: the same buffer under a
    compatible type (static extents made dynamic or the reverse, same dtype), where a
    block argument, a return or a call needs the exact type."""

    name = "loop.retype"
    traits = PURE

    def verify(self) -> None:
        expect_counts(self, 1, 1)
        src = expect_tensor(self, self.operand_types[0], "operand")
        dst = expect_tensor(self, self.result.type, "result")
        if src.dtype is not dst.dtype or not shapes_compatible(src.shape, dst.shape):
            raise self.error(f"cannot retype {src} as {dst}")

    def evaluate(self, args: list[Any]) -> list[Any]:
        return [args[0]]


@register
class QGemmOp(Operation):
    """``loop.qgemm``: operands A, B (i8 buffers), C (i32 buffer), then nine ``index``
    values aoff, boff, coff, m, n, k, lda, ldb, ldc; no results.

    ``C[m, n] = sum_k int32(A[m, k]) * int32(B[k, n])`` on row-major panels, written
    (never accumulated); exact, wrapping modulo 2**32 as NumPy's int32 matmul of the
    widened operands does (``tensor.matmul(cast(a, i32), cast(b, i32))`` of i8)."""

    name = "loop.qgemm"

    def verify(self) -> None:
        expect_counts(self, 12, 0)
        types = [expect_tensor(self, t, f"operand {i}") for i, t in enumerate(self.operand_types[:3])]
        if types[0].dtype is not DType.I8 or types[1].dtype is not DType.I8 or types[2].dtype is not DType.I32:
            raise self.error(f"takes i8, i8, i32 buffers, got {', '.join(map(str, types))}")
        for i, t in enumerate(self.operand_types[3:]):
            expect_index(self, t, f"operand {i + 3}")

    def evaluate(self, args: list[Any]) -> list[Any]:
        a, b, c = (x.reshape(-1) for x in args[:3])
        ao, bo, co, m, n, k, lda, ldb, ldc = (int(x) for x in args[3:])
        am = np.lib.stride_tricks.as_strided(a[ao:], (m, k), (lda, 1)).astype(np.int64)
        bm = np.lib.stride_tricks.as_strided(b[bo:], (k, n), (ldb, 1)).astype(np.int64)
        cm = np.lib.stride_tricks.as_strided(c[co:], (m, n), (ldc * 4, 4))
        cm[...] = (am @ bm).astype(np.int32)  # int64 sums wrapped to int32: NumPy's int32 result
        return []


#: operands of each group of a ``loop.conv2d`` epilogue (buffer, offset[, step])
AFFINE_OPERANDS = {"scale": 3, "shift": 3, "residual": 2}


@register
class Conv2dOp(Operation):
    """``loop.conv2d``: buffers x (padded input), w (weights), y (output), then ten
    ``index`` values xoff, yoff, c, hp, wp, o, kh, kw, ho, wo; attribute ``stride``.

    One image of a float convolution as an implicit GEMM (cross-correlation, one
    group, no padding: the lowering passes an input already zero-padded, ``hp x wp``
    per channel):

        y[yoff + (oc * ho + oh) * wo + ow] =
            sum_{ci, i, j} w[((oc * c + ci) * kh + i) * kw + j]
                           * x[xoff + (ci * hp + oh * sh + i) * wp + ow * sw + j]

    written (never accumulated) for every ``oc < o, oh < ho, ow < wo``; f32/f64
    buffers of one dtype, ``w`` the contiguous OIHW weight at offset 0, and every
    read inside the image (``(ho - 1) * sh + kh <= hp``, the same for w).
    With two more operands ``p_lo, p_hi`` only the output pixels ``oh * wo + ow`` in
    ``[p_lo, p_hi)`` are written, by the calling thread (the caller splits an image
    into such chunks); the attribute ``chunk``, if any, is the pixels a call covers
    at most (a cost hint). With two more ``o_lo, o_hi``, only those pixels of the
    output channels ``[o_lo, o_hi)`` (an image of few pixels splits over its
    channels); the attribute ``channels``, if any, is the most a call covers.
    The attribute ``rows`` (a unit hint, no change of meaning): ``w`` is a frozen
    input of the kernel and the plane small, so a backend may compute the pixels as
    the rows of a GEMM with ``w`` packed once (backends/llvm/conv_rows.py). The unit
    hint ``winograd = m`` (with ``rows`` or alone, on a whole image; m = 2 or 4): a 3x3
    stride-1 convolution may be computed as Winograd's F(m x m, 3x3) (backends/llvm/
    conv_winograd.py; equal up to rounding).
    An epilogue of the written outputs (attribute ``clamp = [lo, hi]``, floats, -inf /
    inf for no bound): each is ``clamp(v * scale[c] + shift[c] + residual[c, p], lo,
    hi)`` for its output channel c and pixel p (``v * scale + shift`` may round once,
    as a fused multiply-add), where ``affine`` lists which of "scale", "shift" and
    "residual" (in that order) follow the ranges: the scale and the shift as (buffer,
    offset, step), channel c's value at ``offset + c * step``; the residual as (buffer,
    offset), laid out as ``y`` (``offset + (c * ho + oh) * wo + ow``, as ``yoff``). A
    missing scale is 1, a missing shift -0.0, a missing residual none. The clamp is
    ``arith.max`` then ``arith.min`` against the bounds (a NaN stays NaN)."""

    name = "loop.conv2d"

    @property
    def affine(self) -> list[str]:
        """The epilogue's operand groups, in order ("scale", "shift", "residual")."""
        return list(self.attributes.get("affine", []))

    @property
    def affine_start(self) -> int:
        """The index of the first ``affine`` operand (after the ranges)."""
        return len(self.operands) - sum(AFFINE_OPERANDS.get(name, 0) for name in self.affine)

    def affine_groups(self) -> list[tuple[str, int]]:
        """Each ``affine`` group's name and the index of its first operand (its buffer)."""
        out, at = [], self.affine_start
        for name in self.affine:
            out.append((name, at))
            at += AFFINE_OPERANDS[name]
        return out

    @property
    def pixel_range(self) -> bool:
        """Whether this op writes a range of the image's output pixels only."""
        return self.affine_start >= 15

    @property
    def channel_range(self) -> bool:
        """Whether this op writes a range of the output channels only."""
        return self.affine_start == 17

    def verify(self) -> None:
        expect_counts(self, (13, 26), 0)
        affine = self.attributes.get("affine", [])
        order = ["scale", "shift", "residual"]
        if not isinstance(affine, list) or not all(isinstance(v, str) and v in order for v in affine) \
                or [v for v in order if v in affine] != affine:
            raise self.error(f"attribute 'affine' must list some of \"scale\", \"shift\", \"residual\" "
                             f"in that order, got {affine!r}")
        if affine and "clamp" not in self.attributes:
            raise self.error("has 'affine' operands but no 'clamp' epilogue")
        if "clamp" in self.attributes:
            bounds = self.attributes["clamp"]
            if not (isinstance(bounds, list) and len(bounds) == 2
                    and all(isinstance(v, float) for v in bounds)):
                raise self.error(f"attribute 'clamp' must be two floats [lo, hi], got {bounds!r}")
        if self.affine_start not in (13, 15, 17):
            raise self.error("takes a pixel range and then a channel range, two operands each, "
                             "then the 'affine' groups' (three for a scale or shift, two for a residual)")
        types = [expect_tensor(self, t, f"operand {i}") for i, t in enumerate(self.operand_types[:3])]
        if len({t.dtype for t in types}) != 1 or types[0].dtype not in (DType.F32, DType.F64):
            raise self.error(f"takes f32 or f64 buffers of one dtype, got {', '.join(map(str, types))}")
        first = self.affine_start
        for i, t in enumerate(self.operand_types[3:first]):
            expect_index(self, t, f"operand {i + 3}")
        for name, at in self.affine_groups():
            t = expect_tensor(self, self.operand_types[at], f"the {name} buffer")
            if t.dtype is not types[0].dtype:
                raise self.error(f"takes a {name} buffer of {types[0].dtype}, got {t}")
            for i in range(at + 1, at + AFFINE_OPERANDS[name]):
                expect_index(self, self.operand_types[i], f"operand {i}")
        stride = attr_ints(self, "stride", 2)
        if min(stride) < 1:
            raise self.error(f"needs stride >= 1, got {stride}")

    def _epilogue(self, args: list[Any], values: np.ndarray, o_lo: int, p_lo: int, plane: int) -> np.ndarray:
        """``values`` (channels from ``o_lo`` x pixels from ``p_lo`` of planes of ``plane``
        pixels) through the epilogue, if any."""
        if "clamp" not in self.attributes:
            return values
        channels = np.arange(o_lo, o_lo + values.shape[0])[:, None]
        pixels = np.arange(p_lo, p_lo + values.shape[1])[None, :]
        for name, at in self.affine_groups():
            buf, off = args[at].reshape(-1), int(args[at + 1])
            index = off + channels * plane + pixels if name == "residual" else off + channels * int(args[at + 2])
            if index.size and (index.min() < 0 or index.max() >= buf.size):
                raise WiaRuntimeError(f"'{self.name}': its {name} reads outside its buffer of "
                                      f"{buf.size} elements")
            part = buf[index].astype(values.dtype)
            values = values * part if name == "scale" else values + part
        low, high = (values.dtype.type(v) for v in self.attributes["clamp"])
        with np.errstate(invalid="ignore"):
            values = np.where((values > low) | np.isnan(values), values, low)
            return np.where((values < high) | np.isnan(values), values, high)

    def evaluate(self, args: list[Any]) -> list[Any]:
        x, w, y = (a.reshape(-1) for a in args[:3])
        xoff, yoff, c, hp, wp, o, kh, kw, ho, wo = (int(v) for v in args[3:13])
        sh, sw = self.attributes["stride"]
        image = x[xoff:xoff + c * hp * wp].reshape(c, hp, wp)
        win = np.lib.stride_tricks.sliding_window_view(image, (kh, kw), axis=(1, 2))
        win = win[:, ::sh, ::sw][:, :ho, :wo]  # (c, ho, wo, kh, kw)
        weight = w[:o * c * kh * kw].reshape(o, c, kh, kw)
        out = np.tensordot(weight, win, axes=([1, 2, 3], [0, 3, 4])).reshape(o, ho * wo)
        lo, hi = (int(v) for v in args[13:15]) if self.pixel_range else (0, ho * wo)
        if not 0 <= lo <= hi <= ho * wo:
            raise WiaRuntimeError(f"'{self.name}': pixel range [{lo}, {hi}) outside the "
                                  f"image's {ho * wo}")
        o_lo, o_hi = (int(v) for v in args[15:17]) if self.channel_range else (0, o)
        if not 0 <= o_lo <= o_hi <= o:
            raise WiaRuntimeError(f"'{self.name}': channel range [{o_lo}, {o_hi}) outside the "
                                  f"{o} output channels")
        image = y[yoff:yoff + o * ho * wo].reshape(o, ho * wo)
        image[o_lo:o_hi, lo:hi] = self._epilogue(args, out[o_lo:o_hi, lo:hi].astype(y.dtype), o_lo, lo, ho * wo)
        return []
