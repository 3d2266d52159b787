"""Whole-program checking: ``check(loaded) -> CheckedProgram`` and call-time re-checking.

What is checked (all errors are collected, then raised together with ``raise_all``):
declarations and names (``scope``), block scoping and paths (``checkstmt``), types
and shapes (``checkexpr`` with the pure rules of ``typerules``/``shaperules``),
recursion, and every kernel output being assigned on every path.

Invariants:
- Funcs are generic: they are typed once with ``UNKNOWN`` parameters (finding the
  errors that do not depend on types) and again at each call site with the
  argument types, memoized per (func, argument types and compile-time values).
- ``tensor`` parameters are ``UNKNOWN`` until ``check_kernel_call`` gives concrete
  types; so are symbolic extents, which become concrete ints there, turning every
  recorded ``ShapeConstraint`` into a static check.
"""

from __future__ import annotations

import numpy as np

from ..diagnostics import Span, WiaCallError, WiaError, WiaNameError, WiaTypeError, raise_all
from ..gcpause import no_cyclic_gc
from ..records import record
from . import ast
from . import typerules as tr
from .builtins import Operand, Static, Sym
from .checkctx import BodyCtx
from .checkstmt import StmtChecker
from .kernelcheck import KernelTyping, ParamInfo, bind_call, check_kernel, declared_params
from .loader import MAIN_MODULE, LoadedProgram
from .scope import Env, FuncKey, ModuleScope, build_scopes, find_recursion
from .typerules import UNKNOWN, ShapeConstraint, Type, ValueType


@record
class CheckedProgram:
    """A program that passed every check; ``consts[module][name]`` are evaluated consts,
    ``defaults[(module, func, param)]`` the evaluated default of each func parameter."""

    loaded: LoadedProgram
    scopes: dict[str, ModuleScope]
    kernels: dict[str, KernelTyping]
    consts: dict[str, dict[str, object]]
    defaults: dict[DefaultKey, Operand]


_MemoKey = tuple[FuncKey, tuple[tuple[Type, object], ...]]
#: (module, func, parameter)
DefaultKey = tuple[str, str, str]


def _hashable(v: Static) -> object:
    return (type(v).__name__, v) if not isinstance(v, tuple) else tuple(_hashable(x) for x in v)


class Checker:
    """Holds what all bodies share: scopes, recursion, const values, func instantiations."""

    def __init__(self, loaded: LoadedProgram):
        self.loaded = loaded
        self.errors: list[WiaError] = []
        self.scopes = build_scopes(loaded, self.errors)
        self.recursive = find_recursion(self.scopes, self.errors)
        self._consts: dict[tuple[str, str], Operand] = {}
        self._const_active: set[tuple[str, str]] = set()
        self.defaults: dict[DefaultKey, Operand] = {}
        self._default_active: set[DefaultKey] = set()
        self._memo: dict[_MemoKey, tuple[Operand, list[WiaError], list[ShapeConstraint]]] = {}

    def report(self, errors: list[WiaError]) -> None:
        seen = {(type(e), e.message, _where(e.span)) for e in self.errors}
        for e in errors:
            key = (type(e), e.message, _where(e.span))
            if key not in seen:
                seen.add(key)
                self.errors.append(e)

    # -------------------------------------------------------------- consts

    def const_value(self, module: str, name: str, span: Span) -> Operand:
        """The evaluated const (weak type, compile-time value); UNKNOWN after an error."""
        key = (module, name)
        if key in self._consts:
            return self._consts[key]
        decl = self.scopes[module].consts[name]
        if key in self._const_active:
            self.report([WiaTypeError(f"const '{name}' is defined in terms of itself", decl.span)])
            return Operand(UNKNOWN, None, name)
        self._const_active.add(key)
        ctx = BodyCtx(self, self.scopes[module], "const", name)
        value = StmtChecker(ctx).exprs.expr(decl.value, Env())
        self._const_active.discard(key)
        self.report(ctx.errors)
        if not ctx.errors and (value.static is None or _has_sym(value.static)):
            self.report([WiaTypeError(f"const '{name}' must be a number or an array literal",
                                      decl.value.span)])
            value = Operand(UNKNOWN, None, name)
        self._consts[key] = Operand(value.type, value.static, name)
        return self._consts[key]

    def const_values(self) -> dict[str, dict[str, object]]:
        """Every const of every module as a Python scalar or NumPy array."""
        out: dict[str, dict[str, object]] = {}
        for scope in self.scopes.values():
            values = out.setdefault(scope.name, {})
            for name, decl in scope.consts.items():
                op = self.const_value(scope.name, name, decl.span)
                values[name] = _numpy_value(op)
        return out

    def func_default(self, module: str, func: ast.Func, param: ast.FuncParam) -> Operand:
        """A parameter's default: a constant expression, evaluated once in the func's
        module (its consts are visible, its parameters are not); UNKNOWN after an error."""
        key = (module, func.name, param.name)
        if key in self.defaults:
            return self.defaults[key]
        assert param.default is not None, "bind_func_args fills only defaulted parameters"
        scope = self.scopes[module]
        ctx = BodyCtx(self, scope, "const", scope.qualify(func.name))
        if key in self._default_active:  # `func f(x, a=f(1.0))`
            self.report([WiaTypeError(f"default of parameter '{param.name}' of func "
                                      f"'{ctx.name}' is defined in terms of itself",
                                      param.default.span)])
            return Operand(UNKNOWN, None, param.name)
        self._default_active.add(key)
        value = StmtChecker(ctx).exprs.argument(param.default, Env())
        self._default_active.discard(key)
        self.report(ctx.errors)
        # UNKNOWN: an error was reported already (here, or where the value came from)
        if not ctx.errors and value.type is not UNKNOWN and \
                (value.static is None or _has_sym(value.static)):
            self.report([WiaTypeError(f"default of parameter '{param.name}' of func "
                                      f"'{ctx.name}' must be a constant expression",
                                      param.default.span)])
            value = Operand(UNKNOWN, None, param.name)
        self.defaults[key] = Operand(value.type, value.static, param.name)
        return self.defaults[key]

    # -------------------------------------------------------------- funcs

    def call_func(self, ctx: BodyCtx, module: str, func: ast.Func, args: list[Operand],
                  call: ast.Call) -> Operand:
        """Type one call of a generic func with these arguments (memoized)."""
        fkey = (module, func.name)
        if fkey in self.recursive:
            return Operand(UNKNOWN, None, func.name)
        key = (fkey, tuple((a.type, _hashable(a.static)) for a in args))
        if key not in self._memo:
            self._memo[key] = self._instantiate(module, func, args)
        result, errors, constraints = self._memo[key]
        ctx.report_all(errors, constraints)
        return result

    def _instantiate(self, module: str, func: ast.Func, args: list[Operand]
                     ) -> tuple[Operand, list[WiaError], list[ShapeConstraint]]:
        scope = self.scopes[module]
        ctx = BodyCtx(self, scope, "func", scope.qualify(func.name))
        env = Env()
        seen: set[str] = set()
        for p, a in zip(func.params, args, strict=False):
            if p.name in seen:
                ctx.report(WiaNameError(f"duplicate parameter '{p.name}' of func "
                                        f"'{ctx.name}'", p.span))
            seen.add(p.name)
            env.bind(p.name, Operand(a.type, a.static, p.name))
        end = StmtChecker(ctx).block(func.body, env)
        if not end.returned:
            ctx.report(WiaTypeError(f"func '{ctx.name}' does not return a value on every path",
                                    func.span))
        return self._return_type(ctx), ctx.errors, ctx.constraints

    def _return_type(self, ctx: BodyCtx) -> Operand:
        if not ctx.returns:
            return Operand(UNKNOWN, None, ctx.name)
        result, _ = ctx.returns[0]
        t: Type = result.type
        for value, span in ctx.returns[1:]:
            try:
                t = tr.join(t, value.type)
            except tr.RuleError as e:
                ctx.errors.append(WiaTypeError(f"func '{ctx.name}' returns {e.message}", span))
                return Operand(UNKNOWN, None, ctx.name)
        static = result.static if len(ctx.returns) == 1 else None
        return Operand(t, static, ctx.name)

    def check_funcs_generically(self) -> None:
        """Type every func with UNKNOWN parameters: finds errors in funcs nobody calls."""
        for scope in self.scopes.values():
            for func in scope.funcs.values():
                for p in func.params:
                    if p.default is not None:
                        self.func_default(scope.name, func, p)
                if (scope.name, func.name) in self.recursive:
                    continue
                _, errors, _ = self._instantiate(scope.name, func,
                                                 [Operand(UNKNOWN, None, p.name) for p in func.params])
                self.report(errors)


def _where(span: Span | None) -> tuple[str, int, int] | None:
    return None if span is None else (span.filename, span.line, span.column)


def _has_sym(v: Static) -> bool:
    return isinstance(v, Sym) or (isinstance(v, tuple) and any(_has_sym(x) for x in v))


def _numpy_value(op: Operand) -> object:
    if isinstance(op.static, tuple) and isinstance(op.type, ValueType):
        return np.array(op.static, dtype=op.type.dtype.numpy)
    return op.static


def check(loaded: LoadedProgram) -> CheckedProgram:
    """Check the whole program; raise every error found (``WiaErrors`` for several)."""
    with no_cyclic_gc():
        checker = Checker(loaded)
        consts = checker.const_values()
        checker.check_funcs_generically()
        kernels: dict[str, KernelTyping] = {}
        for scope in checker.scopes.values():
            for kernel in scope.kernels.values():
                typing = check_kernel(checker, scope, kernel, declared_params(kernel))
                if scope.name == MAIN_MODULE:
                    kernels[kernel.name] = typing
    raise_all(checker.errors)
    return CheckedProgram(loaded, checker.scopes, kernels, consts, checker.defaults)


def check_kernel_call(checked: CheckedProgram, kernel_name: str,
                      arg_types: dict[str, ValueType]) -> KernelTyping:
    """Re-check a kernel with the concrete types of a call.

    ``arg_types`` maps parameter names (inputs, and outputs when given) to concrete
    types. Dims bind to the extents found; a mismatch with a declaration raises
    ``WiaCallError``; a constraint that now fails raises the spanned source error.
    """
    typing = checked.kernels.get(kernel_name)
    if typing is None:
        raise WiaCallError(f"no kernel named '{kernel_name}'")
    params, dims = bind_call(typing, arg_types)
    checker = Checker(checked.loaded)
    scope = checker.scopes[MAIN_MODULE]
    result = check_kernel(checker, scope, typing.kernel, params, dims)
    raise_all(checker.errors)
    return result


__all__ = ["CheckedProgram", "Checker", "KernelTyping", "ParamInfo", "check", "check_kernel_call"]
