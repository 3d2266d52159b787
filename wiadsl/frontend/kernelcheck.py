"""Checking one kernel: declared parameters, the body, outputs on every path, call binding.

Invariants:
- Inputs are bound at entry (scalar inputs are strong, LANGUAGE.md §3); outputs
  are not: reading one before assigning it is an error, and each must be bound on
  every path at the end of the body.
- ``bind_call`` is the one place that matches concrete argument types against the
  declarations and binds dim names (the same name must bind the same extent).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..diagnostics import Span, WiaCallError, WiaNameError, WiaTypeError
from ..dtypes import DTYPE_NAMES
from ..records import field, record
from . import ast
from .builtins import Operand, Static, Sym
from .checkctx import BodyCtx
from .checkstmt import StmtChecker
from .scope import Env, ModuleScope
from .typerules import UNKNOWN, ShapeConstraint, Type, ValueType

if TYPE_CHECKING:
    from .typecheck import Checker


@record(frozen=True)
class ParamInfo:
    """A kernel parameter: ``type`` is ``UNKNOWN`` for ``tensor`` (until a call fixes it)."""

    name: str
    direction: str
    type: Type
    span: Span | None = field(default=None, compare=False, repr=False)


@record
class KernelTyping:
    """A kernel's typing: parameter types, dims (``Sym`` or a bound extent), and the
    shape constraints only a call can decide (each with the span to report)."""

    name: str
    kernel: ast.Kernel
    params: tuple[ParamInfo, ...]
    dims: dict[str, Static]
    constraints: list[ShapeConstraint]

    @property
    def inputs(self) -> tuple[ParamInfo, ...]:
        return tuple(p for p in self.params if p.direction == "input")

    @property
    def outputs(self) -> tuple[ParamInfo, ...]:
        return tuple(p for p in self.params if p.direction == "output")


def declared_type(t: ast.TypeExpr) -> Type:
    """The ValueType a parameter declaration means (``UNKNOWN`` for ``tensor``)."""
    if isinstance(t, ast.AnyTensorType):
        return UNKNOWN
    if isinstance(t, ast.ScalarType):
        return ValueType(DTYPE_NAMES[t.dtype])
    if isinstance(t, ast.TensorType):
        return ValueType(DTYPE_NAMES[t.dtype], tuple(d.value for d in t.dims))
    raise TypeError(f"checker: unknown type node {type(t).__name__}")


def declared_params(kernel: ast.Kernel) -> tuple[ParamInfo, ...]:
    return tuple(ParamInfo(p.name, p.direction, declared_type(p.type), p.span)
                 for p in kernel.params)


def _dim_names(kernel: ast.Kernel) -> list[str]:
    names: list[str] = []
    for p in kernel.params:
        for d in p.type.dims if isinstance(p.type, ast.TensorType) else ():
            if isinstance(d.value, str) and d.value not in names:
                names.append(d.value)
    return names


def _check_params(ctx: BodyCtx, kernel: ast.Kernel, dims: list[str]) -> None:
    seen: set[str] = set()
    for p in kernel.params:
        if p.name in seen:
            ctx.report(WiaNameError(f"duplicate parameter '{p.name}' of kernel '{kernel.name}'",
                                    p.span))
        elif p.name in dims:
            ctx.report(WiaNameError(f"'{p.name}' is both a parameter and a dim name", p.span))
        seen.add(p.name)


def check_kernel(checker: Checker, scope: ModuleScope, kernel: ast.Kernel,
                 params: tuple[ParamInfo, ...], dims: Mapping[str, Static] | None = None
                 ) -> KernelTyping:
    """Check one kernel body with these parameter types; errors go to ``checker``."""
    names = _dim_names(kernel)
    dim_values = {n: Sym(n) for n in names} | dict(dims or {})
    outputs = {p.name: p.type for p in params if p.direction == "output"}
    input_dims = _dim_names(ast.Kernel(kernel.name, tuple(p for p in kernel.params
                                                          if p.direction == "input"),
                                       kernel.body, span=kernel.span))
    ctx = BodyCtx(checker, scope, "kernel", kernel.name, dim_values, outputs,
                  output_only_dims=frozenset(names) - set(input_dims))
    _check_params(ctx, kernel, names)
    env = Env()
    for p in params:
        if p.direction == "input":
            env.bind(p.name, Operand(p.type, None, p.name))
    end = StmtChecker(ctx).block(kernel.body, env)
    for p in params:
        if p.direction == "output" and p.name not in end.bound:
            _unassigned(ctx, p, end)
    checker.report(ctx.errors)
    return KernelTyping(kernel.name, kernel, params, dim_values, ctx.constraints)


def _unassigned(ctx: BodyCtx, p: ParamInfo, end: Env) -> None:
    if p.name in end.maybe:
        message = (f"output '{p.name}' is not assigned on every path: "
                   f"not on the path where {end.maybe[p.name]}")
    else:
        message = f"output '{p.name}' is never assigned"
    ctx.report(WiaTypeError(message, p.span))


# ------------------------------------------------------------------ call binding


def bind_call(typing: KernelTyping, arg_types: Mapping[str, ValueType]
              ) -> tuple[tuple[ParamInfo, ...], dict[str, Static]]:
    """Match concrete argument types with the declarations; return the specialized
    parameters and the dim bindings. Raises ``WiaCallError`` naming the argument."""
    known = {p.name for p in typing.params}
    for name in arg_types:
        if name not in known:
            raise WiaCallError(f"{typing.name}: unknown argument '{name}'")
    bindings: dict[str, tuple[int, str]] = {}
    for p in typing.params:
        actual = arg_types.get(p.name)
        if actual is None:
            if p.direction == "input":
                raise WiaCallError(f"{typing.name}: missing argument '{p.name}'")
            continue
        if isinstance(p.type, ValueType):
            _match(typing.name, p, p.type, actual, bindings)
    dims: dict[str, Static] = {d: v for d, (v, _) in bindings.items()}
    params = tuple(ParamInfo(p.name, p.direction,
                             arg_types.get(p.name) or _substitute(p.type, dims), p.span)
                   for p in typing.params)
    return params, dims


def _match(kernel: str, p: ParamInfo, declared: ValueType, actual: ValueType,
           bindings: dict[str, tuple[int, str]]) -> None:
    where = f"{kernel}: argument '{p.name}'"
    if actual.dtype is not declared.dtype:
        raise WiaCallError(f"{where} must be {declared.dtype}, got {actual.dtype}")
    if actual.rank != declared.rank:
        raise WiaCallError(f"{where} must have rank {declared.rank} ({declared}), got {actual}")
    for axis, (d, a) in enumerate(zip(declared.shape, actual.shape, strict=True)):
        if not isinstance(a, int):
            continue
        if isinstance(d, int) and d != a:
            raise WiaCallError(f"{where} must have extent {d} on axis {axis}, got {a}")
        if isinstance(d, str):
            if d in bindings and bindings[d][0] != a:
                first, other = bindings[d]
                raise WiaCallError(f"{kernel}: dim '{d}' is {first} in argument '{other}' "
                                   f"but {a} in argument '{p.name}'")
            bindings.setdefault(d, (a, p.name))


def _substitute(t: Type, dims: Mapping[str, Static]) -> Type:
    if not isinstance(t, ValueType):
        return t
    return t.with_shape(tuple(dims.get(d, d) if isinstance(d, str) else d for d in t.shape))
