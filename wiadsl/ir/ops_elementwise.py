"""Elementwise math: one table, two generated op families.

Every row of ``ELEMENTWISE_FNS`` yields ``arith.<fn>`` (scalars or ``index``,
all operand and result types equal) and ``tensor.<fn>`` (tensors and scalars of
one dtype, NumPy broadcasting, result a tensor of the broadcast shape).

Semantics (both families): NumPy's ufunc on values of the op's dtype; integer
``div``/``rem`` are NumPy's floor division and remainder; ``and or not`` are
logical on i1 and bitwise on integers; bf16 is computed in float32 and rounded.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np

from ..diagnostics import WiaRuntimeError
from ..dtypes import DType
from ..records import record
from .core import Operation, Trait
from .numerics import finish, to_dtype
from .ops_base import (
    FoldConstantsMixin,
    check_broadcast_result,
    constant_of,
    expect_counts,
    expect_same_dtype,
    register,
)
from .types import IndexType, IRType, TensorType, dtype_of


def _div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.floor_divide(a, b) if a.dtype.kind in "iu" else np.true_divide(a, b)


def _int_identity(fn: Callable[[np.ndarray], np.ndarray]) -> Callable[[np.ndarray], np.ndarray]:
    """floor/ceil of an integer is the integer itself (no float round trip)."""
    return lambda a: a.copy() if a.dtype.kind in "iu" else fn(a)


def _pow(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # As NumPy: only an exponent that meets an element fails (an empty operand never does).
    if a.dtype.kind in "iu" and np.any(np.broadcast_to(b, np.broadcast_shapes(a.shape, b.shape)) < 0):
        raise WiaRuntimeError("integers to negative integer powers are not allowed")
    return np.power(a, b)


_erf_object = np.frompyfunc(math.erf, 1, 1)


def _erf(a: np.ndarray) -> np.ndarray:
    # NumPy has no erf; math.erf is correctly rounded enough for a reference.
    return np.asarray(_erf_object(a.astype(np.float64)), dtype=np.float64).astype(a.dtype)


def pow_may_trap(op: ArithElementwiseOp | TensorElementwiseOp) -> bool:
    """An integer to a power that is not a constant >= 0 may fail (negative exponent)."""
    dtype = dtype_of(op.result.type)
    if op.fn.name != "pow" or dtype is None or not dtype.is_int:
        return False
    exponent = constant_of(op.operands[1])
    return exponent is None or bool(np.any(np.asarray(exponent) < 0))


def broadcast_may_fail(types: Sequence[IRType]) -> bool:
    """Whether tensor operands' extents can disagree at run time: on an axis where one
    is ``?``, the others must all be 1 (which broadcasts against anything)."""
    shapes = [t.shape for t in types if isinstance(t, TensorType)]
    rank = max((len(s) for s in shapes), default=0)
    for axis in range(1, rank + 1):
        extents = [s[-axis] for s in shapes if len(s) >= axis]
        if None in extents and sum(1 for e in extents if e != 1) > 1:
            return True
    return False


@record(frozen=True)
class ElementwiseFn:
    """One elementwise function: arity, accepted dtypes, traits, NumPy semantics.

    ``domain``: ``any`` (every dtype), ``num`` (not i1), ``float`` (floats only),
    ``bits`` (i1 and integers).
    """

    name: str
    arity: int
    domain: str
    commutative: bool
    numpy_fn: Callable[..., np.ndarray]

    def accepts(self, dtype: DType | None) -> bool:
        """Whether values of ``dtype`` (None: ``index``) are in the domain."""
        if dtype is None:
            return self.domain != "float"
        return {"any": True, "num": dtype.kind > 0, "float": dtype.is_float,
                "bits": not dtype.is_float}[self.domain]


#: the transcendental functions of the table: a backend computes them with a math
#: library (polynomials, range reduction), dozens of instructions an element
TRANSCENDENTAL_FNS = frozenset({"exp", "log", "tanh", "sigmoid", "sin", "cos", "erf", "pow"})

ELEMENTWISE_FNS: tuple[ElementwiseFn, ...] = (
    ElementwiseFn("add", 2, "any", True, np.add),
    ElementwiseFn("sub", 2, "num", False, np.subtract),
    ElementwiseFn("mul", 2, "any", True, np.multiply),
    ElementwiseFn("div", 2, "num", False, _div),
    ElementwiseFn("rem", 2, "num", False, np.remainder),
    ElementwiseFn("pow", 2, "num", False, _pow),
    ElementwiseFn("max", 2, "any", True, np.maximum),
    ElementwiseFn("min", 2, "any", True, np.minimum),
    ElementwiseFn("neg", 1, "num", False, np.negative),
    ElementwiseFn("abs", 1, "num", False, np.abs),
    ElementwiseFn("exp", 1, "float", False, np.exp),
    ElementwiseFn("log", 1, "float", False, np.log),
    ElementwiseFn("sqrt", 1, "float", False, np.sqrt),
    ElementwiseFn("rsqrt", 1, "float", False, lambda a: 1 / np.sqrt(a)),
    ElementwiseFn("tanh", 1, "float", False, np.tanh),
    ElementwiseFn("sigmoid", 1, "float", False, lambda a: 1 / (1 + np.exp(-a))),
    ElementwiseFn("relu", 1, "num", False, lambda a: np.maximum(a, np.zeros((), a.dtype))),
    ElementwiseFn("sin", 1, "float", False, np.sin),
    ElementwiseFn("cos", 1, "float", False, np.cos),
    ElementwiseFn("floor", 1, "num", False, _int_identity(np.floor)),
    ElementwiseFn("ceil", 1, "num", False, _int_identity(np.ceil)),
    # round half to even (NumPy's rint): quantize's rounding, so a fused body can hold it
    ElementwiseFn("rint", 1, "num", False, _int_identity(np.rint)),
    ElementwiseFn("erf", 1, "float", False, _erf),
    ElementwiseFn("and", 2, "bits", True, np.bitwise_and),
    ElementwiseFn("or", 2, "bits", True, np.bitwise_or),
    ElementwiseFn("not", 1, "bits", False, np.invert),
)

ELEMENTWISE_BY_NAME = {fn.name: fn for fn in ELEMENTWISE_FNS}


def apply_elementwise(fn: ElementwiseFn, args: list[Any], dtype: DType | None) -> np.ndarray:
    """``fn`` on operands converted to ``dtype`` (None: index/int64), result in ``dtype``."""
    compute = DType.I64 if dtype is None else dtype
    arrays = [to_dtype(a, compute) for a in args]
    with np.errstate(all="ignore"):
        out = fn.numpy_fn(*arrays)
    return to_dtype(out, compute)


class ArithElementwiseOp(FoldConstantsMixin, Operation):
    """``%r = arith.<fn> %a, %b : T`` on scalars, ``index`` or vectors (``vector<8xf32>``,
    every lane alike); all types equal."""

    fn: ClassVar[ElementwiseFn]

    def verify(self) -> None:
        expect_counts(self, self.fn.arity, 1)
        types = [*self.operand_types, self.result.type]
        if any(isinstance(t, TensorType) for t in types):
            raise self.error(f"takes scalars; use tensor.{self.fn.name} for tensors")
        if len(set(types)) > 1:
            raise self.error(f"operand and result types must be equal, got "
                             f"{', '.join(map(str, types))}")
        dtype = None if isinstance(types[0], IndexType) else types[0].dtype
        if not self.fn.accepts(dtype):
            raise self.error(f"does not accept {types[0]} operands")

    def may_trap(self) -> bool:
        return pow_may_trap(self)

    def evaluate(self, args: list[Any]) -> list[Any]:
        t = self.result.type
        dtype = None if isinstance(t, IndexType) else t.dtype
        return [finish(apply_elementwise(self.fn, args, dtype), t)]


class TensorElementwiseOp(FoldConstantsMixin, Operation):
    """``%r = tensor.<fn> %a, %b : (T1, T2) -> R`` with NumPy broadcasting."""

    fn: ClassVar[ElementwiseFn]

    def verify(self) -> None:
        expect_counts(self, self.fn.arity, 1)
        dtype = expect_same_dtype(self, self.operand_types)
        if not any(isinstance(t, TensorType) for t in self.operand_types):
            raise self.error(f"needs a tensor operand; use arith.{self.fn.name} for scalars")
        result = self.result.type
        if not isinstance(result, TensorType) or result.dtype is not dtype:
            raise self.error(f"result must be a tensor of {dtype.ir_name}, got {result}")
        if not self.fn.accepts(dtype):
            raise self.error(f"does not accept {dtype.ir_name} operands")
        check_broadcast_result(self, self.operand_types, result)

    def may_trap(self) -> bool:
        return pow_may_trap(self) or broadcast_may_fail(self.operand_types)

    def evaluate(self, args: list[Any]) -> list[Any]:
        t: IRType = self.result.type
        return [finish(apply_elementwise(self.fn, args, t.dtype), t)]  # type: ignore[union-attr]


def _traits(fn: ElementwiseFn) -> frozenset[Trait]:
    base = {Trait.PURE, Trait.ELEMENTWISE}
    return frozenset(base | {Trait.COMMUTATIVE} if fn.commutative else base)


def _generate() -> None:
    for fn in ELEMENTWISE_FNS:
        title = fn.name.capitalize()
        for dialect, base in (("arith", ArithElementwiseOp), ("tensor", TensorElementwiseOp)):
            attrs = {"name": f"{dialect}.{fn.name}", "traits": _traits(fn), "fn": fn,
                     "__doc__": f"{dialect}.{fn.name}: {base.__doc__}"}
            register(type(f"{dialect.capitalize()}{title}Op", (base,), attrs))


_generate()
