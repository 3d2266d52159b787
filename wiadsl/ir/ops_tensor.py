"""Tensor computations: reductions, linear algebra, convolution, pooling, quantization.

Text forms:
    %s = tensor.reduce_sum %x {axes = [0], keepdims = false} : tensor<?xf32> -> f32
    %i = tensor.argmax %x {axes = [1]} : tensor<4x5xf32> -> tensor<4xi64>
    %c = tensor.matmul %a, %b : (tensor<4x3xf32>, tensor<3x?xf32>) -> tensor<4x?xf32>
    %t = tensor.transpose %a {perm = [1, 0]} : tensor<4x3xf32> -> tensor<3x4xf32>
    %y = tensor.conv2d %x, %w {stride = [1, 1], padding = [0, 0]} : (...) -> ...
    %p = tensor.max_pool %x {kernel = [2, 2], stride = [2, 2]} : ... -> ...
    %p = tensor.max_pool %x {kernel = [3, 3], stride = [2, 2], padding = [1, 1, 1, 1]} : ...
    %q = tensor.quantize %x, %scale, %zp : (tensor<4xf32>, f32, i64) -> tensor<4xi8>
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..diagnostics import WiaRuntimeError
from ..dtypes import DType
from .core import Operation
from .numerics import finish, to_dtype
from .ops_base import (
    PURE,
    attr_bool,
    attr_ints,
    expect_counts,
    expect_result_shape,
    expect_same_dtype,
    expect_tensor,
    has_dynamic_shape,
    normalize_axis,
    register,
    value_dtype,
)
from .types import TensorType, broadcast_shapes, shape_of


class ReduceOp(Operation):
    """Reduce ``axes`` (``keepdims`` default false); all axes -> a scalar result.

    ``argmax``/``argmin`` take one axis, or every axis (index into the flattened
    tensor), and give i64; ``reduce_mean`` needs floats; sum/prod need non-i1.
    """

    traits = PURE
    kind: ClassVar[str]

    def axes(self) -> tuple[int, ...]:
        rank = self.operand_types[0].rank  # type: ignore[union-attr]
        return tuple(normalize_axis(self, a, rank) for a in attr_ints(self, "axes"))

    def verify(self) -> None:
        expect_counts(self, 1, 1)
        x = expect_tensor(self, self.operand_types[0], "operand")
        axes = self.axes()
        if len(set(axes)) != len(axes):
            raise self.error(f"axes {list(axes)} repeat an axis")
        keep = attr_bool(self, "keepdims", False)
        if self.kind in ("sum", "prod") and x.dtype is DType.BOOL:
            raise self.error("does not accept i1 operands")
        if self.kind == "mean" and not x.dtype.is_float:
            raise self.error(f"needs a float operand, got {x}")
        arg = self.kind in ("argmax", "argmin")
        if arg and len(axes) != 1 and len(axes) != x.rank:
            raise self.error("takes one axis or all axes")
        shape = [(1 if i in axes else d) for i, d in enumerate(x.shape) if keep or i not in axes]
        expect_result_shape(self, self.result.type, DType.I64 if arg else x.dtype, shape)

    def may_trap(self) -> bool:
        """max/min/argmax/argmin of zero elements fail; the others have an identity."""
        if self.kind in ("sum", "prod", "mean"):
            return False
        x = self.operand_types[0]
        shape = x.shape if isinstance(x, TensorType) else ()
        return any(shape[a] in (None, 0) for a in self.axes())

    def evaluate(self, args: list[Any]) -> list[Any]:
        x, axes = np.asarray(args[0]), self.axes()
        keep = bool(self.attributes.get("keepdims", False))
        t = self.result.type
        reduced = int(np.prod([x.shape[a] for a in axes])) if x.ndim else x.size
        if reduced == 0 and self.kind not in ("sum", "prod", "mean"):
            # NumPy's rule: only a reduction over zero elements has no value
            # (max over axis 1 of a [0, 3] array is an empty result, not an error)
            raise WiaRuntimeError(f"'{self.name}' of an empty tensor (shape {x.shape})")
        if self.kind in ("argmax", "argmin"):
            axis = axes[0] if len(axes) == 1 else None
            if self.kind == "argmax":
                return [finish(np.argmax(x, axis=axis, keepdims=keep), t)]
            return [finish(np.argmin(x, axis=axis, keepdims=keep), t)]
        if self.kind == "mean":
            with np.errstate(all="ignore"):
                return [finish(np.mean(x, axis=axes, keepdims=keep), t)]
        reducers: dict[str, Callable[..., Any]] = {
            "sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min}
        fn = reducers[self.kind]
        extra = {"dtype": x.dtype} if self.kind in ("sum", "prod") else {}
        with np.errstate(all="ignore"):
            return [finish(fn(x, axis=axes, keepdims=keep, **extra), t)]


for _kind in ("sum", "mean", "max", "min", "prod", "argmax", "argmin"):
    _name = f"tensor.{_kind}" if _kind.startswith("arg") else f"tensor.reduce_{_kind}"
    register(type(f"Reduce{_kind.capitalize()}Op", (ReduceOp,), {"name": _name, "kind": _kind}))


def matmul_shape(a: tuple[int | None, ...], b: tuple[int | None, ...]) -> tuple[int | None, ...]:
    """NumPy matmul's result shape; ValueError when inner or batch extents clash."""
    a2 = (1, *a) if len(a) == 1 else a
    b2 = (*b, 1) if len(b) == 1 else b
    k1, k2 = a2[-1], b2[-2]
    if k1 is not None and k2 is not None and k1 != k2:
        raise ValueError(f"inner extents {k1} and {k2} differ")
    batch = broadcast_shapes(a2[:-2], b2[:-2])
    out = (*batch, a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return out


@register
class MatmulOp(Operation):
    """``tensor.matmul``: NumPy ``matmul`` (1-D, 2-D, batched with broadcast batch dims)."""

    name = "tensor.matmul"
    traits = PURE

    def verify(self) -> None:
        expect_counts(self, 2, 1)
        a = expect_tensor(self, self.operand_types[0], "lhs")
        b = expect_tensor(self, self.operand_types[1], "rhs")
        dtype = expect_same_dtype(self, [a, b])
        try:
            shape = matmul_shape(a.shape, b.shape)
        except ValueError as e:
            raise self.error(f"shapes {a} and {b} do not agree: {e}") from None
        expect_result_shape(self, self.result.type, dtype, shape)

    def may_trap(self) -> bool:
        return has_dynamic_shape(self)  # static extents were checked by verify()

    def evaluate(self, args: list[Any]) -> list[Any]:
        a, b = (np.asarray(x) for x in args)
        if a.shape[-1] != b.shape[-2 if b.ndim > 1 else 0]:
            raise WiaRuntimeError(f"'{self.name}': inner extents differ ({a.shape} @ {b.shape})")
        with np.errstate(all="ignore"):
            return [finish(np.matmul(a, b), self.result.type)]


@register
class TransposeOp(Operation):
    """``tensor.transpose {perm}``: NumPy ``transpose(x, perm)``."""

    name = "tensor.transpose"
    traits = PURE

    def verify(self) -> None:
        expect_counts(self, 1, 1)
        x = expect_tensor(self, self.operand_types[0], "operand")
        perm = attr_ints(self, "perm")
        if sorted(perm) != list(range(x.rank)):
            raise self.error(f"perm {perm} is not a permutation of the {x.rank} axes")
        expect_result_shape(self, self.result.type, x.dtype, [x.shape[p] for p in perm])

    def evaluate(self, args: list[Any]) -> list[Any]:
        return [finish(np.transpose(args[0], self.attributes["perm"]), self.result.type)]


def _window_size(n: int, k: int, stride: int, pad: int) -> int:
    return (n + 2 * pad - k) // stride + 1


def _window_extent(n: int | None, k: int | None, stride: int, pad: int) -> int | None:
    return None if n is None or k is None else _window_size(n, k, stride, pad)


@register
class Conv2dOp(Operation):
    """``tensor.conv2d {stride = [sh, sw], padding = [ph, pw]}``: NCHW input, OIHW
    weight, zero padding, cross-correlation (no kernel flip), one group."""

    name = "tensor.conv2d"
    traits = PURE

    def verify(self) -> None:
        expect_counts(self, 2, 1)
        x = expect_tensor(self, self.operand_types[0], "input")
        w = expect_tensor(self, self.operand_types[1], "weight")
        dtype = expect_same_dtype(self, [x, w])
        if x.rank != 4 or w.rank != 4:
            raise self.error(f"takes an NCHW input and an OIHW weight, got {x} and {w}")
        stride, pad = attr_ints(self, "stride", 2), attr_ints(self, "padding", 2)
        if min(stride) < 1 or min(pad) < 0:
            raise self.error(f"needs stride >= 1 and padding >= 0, got {stride}, {pad}")
        if None not in (x.shape[1], w.shape[1]) and x.shape[1] != w.shape[1]:
            raise self.error(f"input has {x.shape[1]} channels, weight expects {w.shape[1]}")
        hw = [_window_extent(x.shape[2 + i], w.shape[2 + i], stride[i], pad[i]) for i in (0, 1)]
        if any(e is not None and e < 1 for e in hw):
            raise self.error(f"kernel larger than padded input ({x} with {w})")
        expect_result_shape(self, self.result.type, dtype, [x.shape[0], w.shape[0], *hw])

    def may_trap(self) -> bool:
        return has_dynamic_shape(self)  # static extents were checked by verify()

    def evaluate(self, args: list[Any]) -> list[Any]:
        x, w = (np.asarray(a) for a in args)
        (sh, sw), (ph, pw) = self.attributes["stride"], self.attributes["padding"]
        if x.shape[1] != w.shape[1]:
            raise WiaRuntimeError(f"'{self.name}': input has {x.shape[1]} channels, weight "
                                  f"expects {w.shape[1]}")
        ho = _window_size(x.shape[2], w.shape[2], sh, ph)
        wo = _window_size(x.shape[3], w.shape[3], sw, pw)
        if ho < 1 or wo < 1:
            raise WiaRuntimeError(f"'{self.name}': kernel {w.shape} larger than input {x.shape}")
        return [finish(_conv_as_matmul(x, w, (sh, sw), (ph, pw), (ho, wo)), self.result.type)]


def _conv_as_matmul(x: np.ndarray, w: np.ndarray, stride: tuple[int, int],
                    pad: tuple[int, int], out_hw: tuple[int, int]) -> np.ndarray:
    """The convolution as one ``np.matmul`` of the weight rows with the input's
    windows (im2col), in the storage dtype as ``tensor.matmul`` evaluates: BLAS for
    floats, so a model's first calls on the interpreter (tiered start) take tens of
    milliseconds rather than a second of per-tap einsums."""
    (sh, sw), (ph, pw), (ho, wo) = stride, pad, out_hw
    n, c = x.shape[:2]
    o, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    windows = sliding_window_view(xp, (kh, kw), axis=(2, 3))[:, :, ::sh, ::sw]
    # rows (c, i, j), columns (y, x): each row is copied from rows of the input
    columns = windows.transpose(0, 1, 4, 5, 2, 3).reshape(n, c * kh * kw, ho * wo)
    with np.errstate(all="ignore"):
        out = np.matmul(w.reshape(o, c * kh * kw), columns)
    return out.reshape(n, o, ho, wo)


class PoolOp(Operation):
    """``{kernel = [kh, kw], stride = [sh, sw]}`` over the last two axes. A max pool may
    also have ``padding = [top, left, bottom, right]``: windows reach that far past the
    input, and what they read there takes no part (as a ``-inf`` fill would; the CPU
    backend's ``fold-pool-padding`` pass makes it from a ``-inf``-padded copy, which
    the backend's kernel then never makes)."""

    traits = PURE
    kind: ClassVar[str]

    def verify(self) -> None:
        expect_counts(self, 1, 1)
        x = expect_tensor(self, self.operand_types[0], "operand")
        kernel, stride = attr_ints(self, "kernel", 2), attr_ints(self, "stride", 2)
        if x.rank < 2 or min(kernel) < 1 or min(stride) < 1:
            raise self.error(f"needs rank >= 2, kernel >= 1 and stride >= 1, got {x}")
        if self.kind == "avg" and not x.dtype.is_float:
            raise self.error(f"needs a float operand, got {x}")
        pad = pool_padding(self)
        if "padding" in self.attributes and (self.kind != "max" or min(pad) < 0
                                             or pad[0] >= kernel[0] or pad[1] >= kernel[1]):
            raise self.error(f"padding {pad}: only a max pool has one, each side at least 0 "
                             f"and the leading ones less than the kernel {kernel}")
        extents = [x.shape[-2 + i] for i in (0, 1)]
        hw = [None if e is None else (e + pad[i] + pad[i + 2] - kernel[i]) // stride[i] + 1
              for i, e in enumerate(extents)]
        if any(e is not None and e < 1 for e in hw):
            raise self.error(f"kernel {kernel} larger than input {x}")
        expect_result_shape(self, self.result.type, x.dtype, [*x.shape[:-2], *hw])

    def may_trap(self) -> bool:
        return has_dynamic_shape(self)  # static extents were checked by verify()

    def evaluate(self, args: list[Any]) -> list[Any]:
        x = np.asarray(args[0])
        (kh, kw), (sh, sw) = self.attributes["kernel"], self.attributes["stride"]
        top, left, bottom, right = pool_padding(self)
        if top or left or bottom or right:
            lowest = -np.inf if x.dtype.kind in "fc" else False if x.dtype == bool else np.iinfo(x.dtype).min
            x = np.pad(x, [(0, 0)] * (x.ndim - 2) + [(top, bottom), (left, right)],
                       constant_values=np.array(lowest).astype(x.dtype))
        ho, wo = (x.shape[-2] - kh) // sh + 1, (x.shape[-1] - kw) // sw + 1
        if ho < 1 or wo < 1:
            raise WiaRuntimeError(f"'{self.name}': kernel {[kh, kw]} larger than input {x.shape}")
        windows = [x[..., i:i + sh * (ho - 1) + 1:sh, j:j + sw * (wo - 1) + 1:sw]
                   for i in range(kh) for j in range(kw)]
        with np.errstate(all="ignore"):
            if self.kind == "max":
                out = np.max(np.stack(windows), axis=0)
            else:
                out = np.sum(np.stack(windows), axis=0, dtype=x.dtype) / (kh * kw)
        return [finish(out, self.result.type)]


def pool_padding(op: Operation) -> list[int]:
    """A pool's ``padding`` [top, left, bottom, right]; zeros when it has none."""
    return attr_ints(op, "padding", 4) if "padding" in op.attributes else [0, 0, 0, 0]


register(type("MaxPoolOp", (PoolOp,), {"name": "tensor.max_pool", "kind": "max"}))
register(type("AvgPoolOp", (PoolOp,), {"name": "tensor.avg_pool", "kind": "avg"}))


class QuantOp(Operation):
    """``%q = tensor.<op> %x, %scale, %zero_point``; the three broadcast.

    quantize: ``clamp(rint(x / scale) + zp, -128, 127)`` computed in x's float
    dtype, result i8. dequantize: ``(q - zp) * scale`` in f32, result f32.
    fake_quant: dequantize(quantize(x)), result f32.
    """

    traits = PURE
    kind: ClassVar[str]

    def verify(self) -> None:
        expect_counts(self, 3, 1)
        x, scale, zp = self.operand_types
        xd = value_dtype(self, x, "operand")
        if self.kind == "dequantize":
            if not xd.is_int:
                raise self.error(f"dequantizes integers, got {x}")
        elif not xd.is_float:
            raise self.error(f"quantizes floats, got {x}")
        elif value_dtype(self, scale, "scale") is not xd:
            raise self.error(f"scale must have the input's dtype {xd.ir_name}, got {scale}")
        if not value_dtype(self, scale, "scale").is_float:
            raise self.error(f"scale must be a float, got {scale}")
        if value_dtype(self, zp, "zero point").kind == 0:
            raise self.error(f"zero point must be numeric, got {zp}")
        shape = broadcast_shapes(*(shape_of(t) for t in (x, scale, zp)))
        out = DType.I8 if self.kind == "quantize" else DType.F32
        expect_result_shape(self, self.result.type, out, shape)

    def evaluate(self, args: list[Any]) -> list[Any]:
        x, scale, zp = args
        if self.kind != "dequantize":
            x = _quantize(x, scale, zp, self.operand_types[0].dtype)  # type: ignore[union-attr]
        if self.kind != "quantize":
            x = (to_dtype(x, DType.F32) - to_dtype(zp, DType.F32)) * to_dtype(scale, DType.F32)
        return [finish(x, self.result.type)]


def _quantize(x: Any, scale: Any, zp: Any, dtype: DType) -> np.ndarray:
    with np.errstate(all="ignore"):
        q = to_dtype(np.rint(to_dtype(to_dtype(x, dtype) / to_dtype(scale, dtype), dtype)), dtype)
        q = to_dtype(q + to_dtype(zp, dtype), dtype)
        return np.clip(q, -128, 127).astype(np.int8)


for _kind in ("quantize", "dequantize", "fake_quant"):
    register(type(f"{_kind.title().replace('_', '')}Op", (QuantOp,),
                  {"name": f"tensor.{_kind}", "kind": _kind}))
