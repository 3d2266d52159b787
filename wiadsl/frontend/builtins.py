"""The one table of builtin signatures (LANGUAGE.md §7).

Each builtin has parameters (positional-or-keyword, then keyword-only) with an
argument *kind* that says how the checker evaluates the argument, and a rule that
types the call from the evaluated arguments.

Argument kinds (what the rule receives under the parameter's name):
- ``value``   an ``Operand`` (type, compile-time value if any, source label)
- ``dtype``   a ``DType`` (written as a dtype name: ``cast(x, f16)``)
- ``axis``    an int, a tuple of ints, or None (compile-time)
- ``perm``    a tuple of ints or None (compile-time)
- ``int``     an int (compile-time); ``None`` only as a declared default
- ``bool``    a bool (compile-time)
- ``dims``    a tuple of ``Dim`` (a list literal of ints / dim names / int scalars)
- ``tensors`` a tuple of ``Operand`` (a list literal of tensors)

A builtin with a ``fold`` also has a compile-time value when its arguments allow
(``dim(x, 0)`` of a static extent is that extent, so it can size or index).

Invariants: every §7 name is in ``BUILTINS``; arity and keyword checks are done
once, here (``bind_arguments``), for every builtin.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from ..dtypes import DType
from ..records import record
from . import shaperules as sr
from . import typerules as tr
from .typerules import Constraints, Type

if TYPE_CHECKING:
    from .exprtext import ExprLabel

ArgKind = Literal["value", "dtype", "axis", "perm", "int", "bool", "dims", "tensors"]


@record(frozen=True)
class Sym:
    """The compile-time value of a dim name: its extent is bound only at call time."""

    name: str


class AllAxes:
    """The compile-time value of ``none``: "every axis", what a reduction does without
    ``axis=``. A func passes it on (``func norm(x, axis=none)``), so a wrapper's default
    can be its builtin's; it is no value, so it goes nowhere else."""

    def __repr__(self) -> str:
        return "none"


ALL_AXES = AllAxes()

#: A compile-time value: a number, a bool, a dim name, ``ALL_AXES``, or a (nested)
#: tuple of those.
Static = Any


@record(frozen=True)
class Operand:
    """A typed argument: its type, its compile-time value (None if not constant), its source text."""

    type: Type
    static: Static = None
    label: str | ExprLabel = "x"  # str(label) is its source text


class _Required:
    def __repr__(self) -> str:
        return "<required>"


REQUIRED: Any = _Required()


@record(frozen=True)
class BParam:
    name: str
    kind: ArgKind = "value"
    default: Any = REQUIRED
    keyword_only: bool = False


Rule = Callable[[Mapping[str, Any], Constraints], Type]
#: The compile-time value of a call from its evaluated arguments (None: not constant).
Fold = Callable[[Mapping[str, Any]], Static]


@record(frozen=True)
class Builtin:
    name: str
    params: tuple[BParam, ...]
    rule: Rule
    fold: Fold | None = None

    @property
    def positional(self) -> tuple[BParam, ...]:
        return tuple(p for p in self.params if not p.keyword_only)


class SignatureError(Exception):
    """A bad call shape; ``keyword`` names the offending keyword argument, if any."""

    def __init__(self, message: str, keyword: str | None = None):
        self.message = message
        self.keyword = keyword
        super().__init__(message)


def did_you_mean(name: str, candidates: Sequence[str]) -> str:
    """``"; did you mean 'x'?"`` for the closest candidate, or ``""``."""
    close = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def bind_arguments(b: Builtin, n_positional: int, keywords: Sequence[str]) -> dict[str, int | str]:
    """Map each parameter to the index of its positional argument or its keyword name.

    Parameters left out get their default (absent from the result). Raises
    ``SignatureError`` for too many positionals, unknown or repeated keywords and
    missing required parameters.
    """
    pos = b.positional
    if n_positional > len(pos):
        required = sum(1 for p in pos if p.default is REQUIRED)
        takes = _plural(len(pos), "positional argument") if required == len(pos) else \
            f"from {required} to {len(pos)} positional arguments"
        raise SignatureError(f"{b.name} takes {takes} but {n_positional} "
                             f"{'was' if n_positional == 1 else 'were'} given")
    bound: dict[str, int | str] = {p.name: i for i, p in enumerate(pos[:n_positional])}
    names = [p.name for p in b.params]
    for kw in keywords:
        if kw not in names:
            raise SignatureError(f"unknown keyword '{kw}' for {b.name}{did_you_mean(kw, names)}", kw)
        if kw in bound:
            raise SignatureError(f"{b.name} got multiple values for argument '{kw}'", kw)
        bound[kw] = kw
    for p in b.params:
        if p.default is REQUIRED and p.name not in bound:
            raise SignatureError(f"{b.name} is missing required argument '{p.name}'")
    return bound


# ------------------------------------------------------------------ rules


def _t(args: Mapping[str, Any], name: str) -> Type:
    return args[name].type


def _labels(args: Mapping[str, Any], *names: str) -> tuple[str, ...]:
    return tuple(args[n].label for n in names)


def _unary(name: str) -> Builtin:
    return Builtin(name, (BParam("x"),), lambda a, c: tr.unary(name, _t(a, "x")))


def _minmax(name: str) -> Builtin:
    return Builtin(name, (BParam("a"), BParam("b")),
                   lambda a, c: tr.binary(name, _t(a, "a"), _t(a, "b"), _labels(a, "a", "b"), c))


def _reduction(name: str) -> Builtin:
    return Builtin(name, (BParam("x"), BParam("axis", "axis", None, True),
                          BParam("keepdims", "bool", False, True)),
                   lambda a, c: sr.reduce(name, _t(a, "x"), a["axis"], a["keepdims"]))


def _pool(name: str) -> Builtin:
    return Builtin(name, (BParam("x"), BParam("kernel", "int", 2, True),
                          BParam("stride", "int", None, True)),
                   lambda a, c: sr.pool(name, _t(a, "x"), a["kernel"], a["stride"]))


def _filled(name: str) -> Builtin:
    return Builtin(name, (BParam("shape", "dims"), BParam("dtype", "dtype", DType.F64)),
                   lambda a, c: sr.filled(name, a["shape"], a["dtype"]))


def _quant(name: str) -> Builtin:
    return Builtin(name, (BParam("x"), BParam("scale"), BParam("zero_point")),
                   lambda a, c: sr.quantize(name, _t(a, "x"), _t(a, "scale"), _t(a, "zero_point"),
                                            _labels(a, "x", "scale", "zero_point"), c))


def _arange_extent(n: Operand) -> tr.Dim:
    if isinstance(n.static, Sym):
        return n.static.name
    if isinstance(n.static, (int, float)) and not isinstance(n.static, bool):
        return n.static  # type: ignore[return-value]
    return None


def _extent_static(a: Mapping[str, Any]) -> Static:
    """``dim(x, axis)`` of a static extent is that int; of a dim name, the name's ``Sym``."""
    d = sr.extent_value(_t(a, "x"), a["axis"])
    return Sym(d) if isinstance(d, str) else d


def _concat(a: Mapping[str, Any], c: Constraints) -> Type:
    xs = a["tensors"]
    return sr.concat([x.type for x in xs], a["axis"], [x.label for x in xs], c)


_TABLE: list[Builtin] = [
    *(_unary(n) for n in ("abs", "neg", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid",
                          "relu", "sin", "cos", "floor", "ceil", "erf")),
    _minmax("max"), _minmax("min"),
    Builtin("where", (BParam("c"), BParam("a"), BParam("b")),
            lambda a, c: tr.where(_t(a, "c"), _t(a, "a"), _t(a, "b"), _labels(a, "c", "a", "b"), c)),
    *(_reduction(n) for n in sr.REDUCTIONS),
    Builtin("matmul", (BParam("a"), BParam("b")),
            lambda a, c: sr.matmul(_t(a, "a"), _t(a, "b"), _labels(a, "a", "b"), c, "'matmul'")),
    Builtin("transpose", (BParam("x"), BParam("perm", "perm", None)),
            lambda a, c: sr.transpose(_t(a, "x"), a["perm"])),
    Builtin("conv2d", (BParam("x"), BParam("w"), BParam("stride", "int", 1, True),
                       BParam("padding", "int", 0, True)),
            lambda a, c: sr.conv2d(_t(a, "x"), _t(a, "w"), a["stride"], a["padding"],
                                   _labels(a, "x", "w"), c)),
    _pool("max_pool"), _pool("avg_pool"),
    Builtin("reshape", (BParam("x"), BParam("shape", "dims")),
            lambda a, c: sr.reshape(_t(a, "x"), a["shape"])),
    Builtin("flatten", (BParam("x"),), lambda a, c: sr.flatten(_t(a, "x"))),
    Builtin("broadcast_to", (BParam("x"), BParam("shape", "dims")),
            lambda a, c: sr.broadcast_to(_t(a, "x"), a["shape"], c)),
    Builtin("concat", (BParam("tensors", "tensors"), BParam("axis", "int", 0, True)), _concat),
    _filled("zeros"), _filled("ones"),
    Builtin("full", (BParam("shape", "dims"), BParam("value"), BParam("dtype", "dtype", None)),
            lambda a, c: sr.full(a["shape"], _t(a, "value"), a["dtype"])),
    Builtin("arange", (BParam("n"),),
            lambda a, c: sr.arange(_t(a, "n"), _arange_extent(a["n"]))),
    Builtin("cast", (BParam("x"), BParam("dtype", "dtype")),
            lambda a, c: tr.cast(_t(a, "x"), a["dtype"])),
    Builtin("dim", (BParam("x"), BParam("axis", "int")),
            lambda a, c: sr.extent(_t(a, "x"), a["axis"]), _extent_static),
    *(_quant(n) for n in ("quantize", "dequantize", "fake_quant")),
]

#: Every builtin of LANGUAGE.md §7, by name.
BUILTINS: dict[str, Builtin] = {b.name: b for b in _TABLE}


def apply_rule(b: Builtin, args: Mapping[str, Any], cons: Constraints = None) -> Type:
    """Type a call whose arguments are evaluated (defaults filled in)."""
    full = {p.name: args.get(p.name, p.default) for p in b.params}
    return b.rule(full, cons)


def fold_call(b: Builtin, args: Mapping[str, Any]) -> Static:
    """The call's compile-time value (after ``apply_rule`` accepted it), or None."""
    if b.fold is None:
        return None
    return b.fold({p.name: args.get(p.name, p.default) for p in b.params})

