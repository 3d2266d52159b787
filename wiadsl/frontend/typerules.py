"""Value types and the pure dtype/broadcast rules shared by the checker and the lowering.

A value is a ``ValueType``: a dtype, one dim per axis (``()`` is a scalar) and a
NEP 50 ``weak`` flag. A dim is an ``int`` (static extent), a ``str`` (a symbolic
dim name, bound at call time) or ``None`` (unknown until run time, e.g. a slice
with dynamic bounds). ``UNKNOWN`` stands for a ``tensor`` parameter (or anything
computed from one): its dtype and rank are fixed only at call time, so every rule
given ``UNKNOWN`` answers ``UNKNOWN`` instead of checking.

Invariants:
- Rule functions are pure: operand types and attributes in, a ``ValueType`` out,
  or a ``RuleError`` (no span: the caller attaches one). Dims that can only be
  compared at call time (``M`` vs ``N``) are appended as ``ShapeConstraint``\\ s to
  the ``cons`` list the caller passes (``None`` drops them); statically impossible
  dims (``3`` vs ``4``) raise.
- Promotion is ``dtypes.promote`` (NumPy 2.x with NEP 50 weak scalars).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from ..diagnostics import Span
from ..dtypes import WEAK_DEFAULT, DType, promote
from ..records import record

Dim = int | str | None
Shape = tuple[Dim, ...]


@record(frozen=True)
class ValueType:
    """A dtype, a shape (``()`` for a scalar) and the NEP 50 weak flag."""

    dtype: DType
    shape: Shape = ()
    weak: bool = False

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def is_scalar(self) -> bool:
        return not self.shape

    def with_shape(self, shape: Shape) -> ValueType:
        return ValueType(self.dtype, tuple(shape), self.weak)

    def strong(self) -> ValueType:
        return ValueType(self.dtype, self.shape, False)

    def __str__(self) -> str:
        if not self.shape:
            return str(self.dtype)
        return f"{self.dtype}[{', '.join(dim_str(d) for d in self.shape)}]"


@record(frozen=True)
class AnyType:
    """The type of a ``tensor`` parameter before the call fixes its dtype and rank."""

    def __str__(self) -> str:
        return "tensor"


UNKNOWN = AnyType()
Type = ValueType | AnyType


def dim_str(d: Dim) -> str:
    return "?" if d is None else str(d)


def is_known(*types: Type) -> bool:
    """True when no type is ``UNKNOWN`` (the rule can check)."""
    return all(isinstance(t, ValueType) for t in types)


class RuleError(Exception):
    """A dtype or kind error found by a rule; the caller turns it into a spanned WiaTypeError."""

    def __init__(self, message: str):
        self.message = message
        super().__init__(message)


class ShapeRuleError(RuleError):
    """Shapes that cannot agree; the caller turns it into a spanned WiaShapeError."""


ConstraintKind = Literal["equal", "broadcast"]


@record(frozen=True)
class ShapeConstraint:
    """A dim relation that only a call can decide.

    ``equal``: ``left == right``; ``broadcast``: equal, or one of them is 1.
    ``reason`` is the full message to report when the call violates it.
    """

    left: Dim
    right: Dim
    kind: ConstraintKind
    reason: str
    span: Span | None = None

    def holds(self, bindings: dict[str, int]) -> bool | None:
        """Whether it holds under ``bindings``; None while a side is still unbound."""
        a, b = _bind(self.left, bindings), _bind(self.right, bindings)
        if not isinstance(a, int) or not isinstance(b, int):
            return None
        return a == b or (self.kind == "broadcast" and 1 in (a, b))


def _bind(d: Dim, bindings: dict[str, int]) -> Dim:
    return bindings.get(d, d) if isinstance(d, str) else d


Constraints = list[ShapeConstraint] | None


def _record(cons: Constraints, c: ShapeConstraint) -> None:
    if cons is not None and c not in cons:
        cons.append(c)


# ------------------------------------------------------------------ dims


def unify_dim(a: Dim, b: Dim, reason: str, cons: Constraints) -> Dim:
    """Two dims that must be equal: raise when statically different, else the known one."""
    if a == b:
        return a
    if a is None or b is None:
        return b if a is None else a
    if isinstance(a, int) and isinstance(b, int):
        raise ShapeRuleError(reason)
    _record(cons, ShapeConstraint(a, b, "equal", reason))
    return a if isinstance(a, int) or not isinstance(b, int) else b


def broadcast_dim(a: Dim, b: Dim, reason: str, cons: Constraints) -> Dim:
    """NumPy's rule for one axis: equal, or one side 1."""
    if a == b:
        return a
    if a == 1 or b == 1:
        return b if a == 1 else a
    if a is None or b is None:
        # The unknown side must be 1 or the other one; run time checks it.
        return b if a is None else a
    if isinstance(a, int) and isinstance(b, int):
        raise ShapeRuleError(reason)
    _record(cons, ShapeConstraint(a, b, "broadcast", reason))
    if isinstance(a, int) or isinstance(b, int):
        return a if isinstance(a, int) else b
    return None


def mismatch(op: str, labels: Sequence[object], types: Sequence[ValueType]) -> str:
    """The message naming every operand: ``shape mismatch in '@': A is f32[M, K], x is f32[N]``."""
    parts = ", ".join(f"{lab} is {t}" for lab, t in zip(labels, types, strict=False))
    return f"shape mismatch in {op}: {parts}"


def broadcast_types(op: str, types: Sequence[ValueType], labels: Sequence[object],
                    cons: Constraints) -> Shape:
    """The broadcast shape of several operands (NumPy rules, right-aligned)."""
    shape: Shape = ()
    for i, t in enumerate(types):
        if not t.shape or t.shape == shape:
            continue  # a scalar or the same shape leaves the shape as it is
        if not shape:
            shape = tuple(t.shape)
            continue
        rank = max(len(shape), t.rank)
        pairs = list(zip((1,) * (rank - len(shape)) + shape, (1,) * (rank - t.rank) + t.shape,
                         strict=True))
        # The message (the costly part) is built only for an axis that can fail or
        # needs a constraint: broadcast_dim uses it for no other.
        reason = ""
        if not all(_trivial_broadcast(a, b) for a, b in pairs):
            reason = mismatch(op, labels[:i + 1], types[:i + 1])
        shape = tuple(broadcast_dim(a, b, reason, cons) for a, b in pairs)
    return shape


def _trivial_broadcast(a: Dim, b: Dim) -> bool:
    """Whether ``broadcast_dim(a, b, ...)`` decides without its reason."""
    return a == b or a == 1 or b == 1 or a is None or b is None


# ------------------------------------------------------------------ dtypes

ARITH_OPS = ("+", "-", "*", "/", "%", "**")
COMPARE_OPS = ("==", "!=", "<", "<=", ">", ">=")
LOGIC_OPS = ("&&", "||")

#: NumPy's float result for transcendental functions of integer/bool inputs.
FLOAT_OF = {DType.BOOL: DType.F16, DType.I8: DType.F16, DType.I32: DType.F64,
            DType.I64: DType.F64}


def binary_dtype(op: str, a: ValueType, b: ValueType) -> tuple[DType, bool]:
    """The (dtype, weak) of ``a OP b`` for an elementwise operator or ``@``."""
    if op in LOGIC_OPS:
        if a.dtype is not DType.BOOL or b.dtype is not DType.BOOL:
            raise RuleError(f"operator '{op}' needs bool operands, got {a.dtype} and {b.dtype}")
        return DType.BOOL, a.weak and b.weak
    dtype, weak = promote(a.dtype, a.weak, b.dtype, b.weak)
    if op in COMPARE_OPS:
        return DType.BOOL, weak
    if op == "/" and not dtype.is_float:
        # NumPy's true_divide: integers and bools divide in f64.
        return (WEAK_DEFAULT[2] if weak else DType.F64), weak
    if op == "-" and dtype is DType.BOOL:
        raise RuleError("operator '-' is not defined for bool operands; use '!=' or '!'")
    if op in ("%", "**") and dtype is DType.BOOL:
        return DType.I8, weak  # NumPy: bool % bool and bool ** bool give int8
    if op in ARITH_OPS or op in ("@", "max", "min"):
        return dtype, weak
    raise RuleError(f"unknown operator '{op}'")


def binary(op: str, a: Type, b: Type, labels: Sequence[object] = ("lhs", "rhs"),
           cons: Constraints = None) -> Type:
    """An elementwise binary operator (arithmetic, comparison, logic, max, min)."""
    if not isinstance(a, ValueType) or not isinstance(b, ValueType):
        return UNKNOWN
    dtype, weak = binary_dtype(op, a, b)
    shape = broadcast_types(f"'{op}'", (a, b), labels, cons)
    return ValueType(dtype, shape, weak)


UnaryKind = Literal["float", "keep", "neg", "not"]

#: How each elementwise unary builtin (and prefix operator) types its result.
UNARY_KINDS: dict[str, UnaryKind] = {
    **{n: "float" for n in ("exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "sin", "cos", "erf")},
    # NumPy 2.4: abs, floor, ceil keep integer dtypes; relu is maximum(x, 0).
    **{n: "keep" for n in ("abs", "relu", "floor", "ceil")},
    "neg": "neg", "-": "neg", "!": "not",
}


def unary(op: str, x: Type) -> Type:
    """An elementwise unary builtin or prefix operator (``-``, ``!``)."""
    if not isinstance(x, ValueType):
        return UNKNOWN
    kind = UNARY_KINDS.get(op)
    if kind is None:
        raise RuleError(f"unknown unary operation '{op}'")
    if kind == "float" and not x.dtype.is_float:
        dtype = WEAK_DEFAULT[2] if x.weak else FLOAT_OF[x.dtype]
        return ValueType(dtype, x.shape, x.weak)
    if kind == "neg" and x.dtype is DType.BOOL:
        raise RuleError(f"'{op}' is not defined for bool; use '!'")
    if kind == "not" and x.dtype is not DType.BOOL:
        raise RuleError(f"operator '!' needs a bool operand, got {x.dtype}")
    return x


def where(c: Type, a: Type, b: Type, labels: Sequence[object] = ("c", "a", "b"),
          cons: Constraints = None) -> Type:
    """``where(c, a, b)``: c is bool; a and b promote; all three broadcast."""
    if not is_known(c, a, b):
        return UNKNOWN
    assert isinstance(c, ValueType) and isinstance(a, ValueType) and isinstance(b, ValueType)
    if c.dtype is not DType.BOOL:
        raise RuleError(f"the condition of 'where' must be bool, got {c}")
    dtype, weak = promote(a.dtype, a.weak, b.dtype, b.weak)
    return ValueType(dtype, broadcast_types("'where'", (c, a, b), labels, cons), weak)


def cast(x: Type, dtype: DType) -> Type:
    """``cast(x, dtype)``: a strong value of ``dtype`` with the shape of ``x``."""
    if not isinstance(x, ValueType):
        return UNKNOWN
    return ValueType(dtype, x.shape, False)


def join(a: Type, b: Type) -> Type:
    """The type of a name that holds ``a`` on one path and ``b`` on another.

    Weak values adapt (as a literal would); two different strong dtypes raise;
    dims that differ become unknown (``None``). The message has no subject: the
    caller prefixes it ("'h' is ...", "func 'f' returns ...").
    """
    if not isinstance(a, ValueType) or not isinstance(b, ValueType):
        return UNKNOWN
    if a.rank != b.rank:
        raise ShapeRuleError(f"{a} on one path and {b} on another (different ranks)")
    dtype, weak = a.dtype, a.weak and b.weak
    if a.dtype is not b.dtype or a.weak != b.weak:
        dtype, weak = promote(a.dtype, a.weak, b.dtype, b.weak)
        strong = [t.dtype for t in (a, b) if not t.weak]
        if len(strong) == 2 or (strong and strong[0] is not dtype):
            raise RuleError(f"{a} on one path and {b} on another; use cast")
    shape = tuple(x if x == y else None for x, y in zip(a.shape, b.shape, strict=False))
    return ValueType(dtype, shape, weak)


def assignable(value: Type, declared: Type, what: str, cons: Constraints) -> None:
    """Check that ``value`` may be stored in an output declared ``declared``.

    The dtype must match (a weak value of a kind the declared dtype holds adapts);
    ranks must match; dims unify (symbolic ones become call-time constraints).
    """
    if not isinstance(value, ValueType) or not isinstance(declared, ValueType):
        return
    adapts = value.weak and value.dtype.kind <= declared.dtype.kind
    if value.dtype is not declared.dtype and not adapts:
        raise RuleError(f"cannot assign {value.dtype} to {what} declared {declared.dtype}; "
                        f"use cast(..., {declared.dtype})")
    reason = f"cannot assign {value} to {what} declared {declared}"
    if value.rank != declared.rank:
        raise ShapeRuleError(reason)
    for a, b in zip(value.shape, declared.shape, strict=False):
        unify_dim(a, b, reason, cons)
