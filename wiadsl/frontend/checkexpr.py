"""Typing of expressions: names, literals, operators, indexing and calls.

Every expression gives an ``Operand``: its type (``UNKNOWN`` after an error, so one
mistake is reported once), its compile-time value when it has one (literals,
consts, dim names and arithmetic of those: what axes, dims and ranges need), and
its source text for messages.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..diagnostics import WiaNameError, WiaShapeError, WiaTypeError
from ..dtypes import DTYPE_NAMES, DType, promote
from . import ast
from . import shaperules as sr
from . import typerules as tr
from .builtins import (
    ALL_AXES,
    BUILTINS,
    BParam,
    Builtin,
    Operand,
    SignatureError,
    Static,
    Sym,
    apply_rule,
    bind_arguments,
    did_you_mean,
    fold_call,
)
from .checkctx import BodyCtx
from .constfold import fold_binary, fold_unary, weak_int_outside
from .exprtext import ExprLabel, expr_text, left_chain, op_span
from .funcargs import bind_func_args
from .scope import Env
from .typerules import UNKNOWN, ValueType

_UNRESOLVED: Any = object()  # an attribute that cannot be evaluated (already reported, or UNKNOWN)


def _int(v: Static) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_int_scalar(t: tr.Type) -> bool:
    return not isinstance(t, ValueType) or (t.is_scalar and t.dtype.is_int)


#: Operators that compute in the promoted integer dtype, where an out-of-range literal
#: would wrap (``/`` divides in f64; comparisons widen, ``constfold.compare_dtype``).
WRAPPING_OPS = ("+", "-", "*", "%", "**")


class ExprTyper:
    """Types expressions of one body; errors go to ``ctx``."""

    def __init__(self, ctx: BodyCtx):
        self.ctx = ctx
        self._handlers: dict[type, Callable[[Any, Env], Operand]] = {
            ast.IntLit: self._int_lit, ast.FloatLit: self._float_lit, ast.BoolLit: self._bool_lit,
            ast.ArrayLit: self._array, ast.Name: self.name, ast.QualifiedName: self._qualified,
            ast.UnaryOp: self._unary, ast.BinOp: self._binop, ast.Call: self._call,
            ast.Index: self._index,
        }

    def expr(self, e: ast.Expr, env: Env) -> Operand:
        handler = self._handlers.get(type(e))
        if handler is None:
            raise TypeError(f"checker: unknown expression node {type(e).__name__}")
        op = handler(e, env)
        if op.static is ALL_AXES:
            what = "'none' (all axes)" if op.label == "none" else \
                f"'{op.label}' is none (all axes) here, and none"
            self.ctx.report(WiaTypeError(f"{what} can only be an axis argument, as in "
                                         "reduce_sum(x, axis=none), or a func's argument or "
                                         "default", e.span))
            return Operand(UNKNOWN, None, op.label)
        return op

    def argument(self, e: ast.Expr, env: Env) -> Operand:
        """A func argument or default: any value, or ``none`` (directly, or a parameter
        holding it), which only an ``axis=`` or another func may take."""
        return self.name(e, env) if isinstance(e, ast.Name) else self.expr(e, env)

    # -------------------------------------------------------------- atoms

    def _int_lit(self, e: ast.IntLit, env: Env) -> Operand:
        return Operand(ValueType(DType.I64, (), True), e.value, str(e.value))

    def _float_lit(self, e: ast.FloatLit, env: Env) -> Operand:
        return Operand(ValueType(DType.F64, (), True), e.value, expr_text(e))

    def _bool_lit(self, e: ast.BoolLit, env: Env) -> Operand:
        return Operand(ValueType(DType.BOOL, (), True), e.value, expr_text(e))

    def _array(self, e: ast.ArrayLit, env: Env) -> Operand:
        items = [self.expr(x, env) for x in e.elements]
        label = expr_text(e)
        if not items:
            return Operand(ValueType(DType.F64, (0,), True), (), label)
        if not tr.is_known(*(i.type for i in items)):
            return Operand(UNKNOWN, None, label)
        types = [i.type for i in items if isinstance(i.type, ValueType)]
        for k, t in enumerate(types[1:], 1):
            if t.shape != types[0].shape:
                self.ctx.report(WiaShapeError(f"array literal is ragged: element 0 is {types[0]}, "
                                              f"element {k} is {t}", e.span))
                return Operand(UNKNOWN, None, label)
        dtype, weak = types[0].dtype, types[0].weak
        for t in types[1:]:
            dtype, weak = promote(dtype, weak, t.dtype, t.weak)
        statics = tuple(i.static for i in items)
        static = statics if all(s is not None and not isinstance(s, Sym) for s in statics) else None
        return Operand(ValueType(dtype, (len(items),) + types[0].shape, weak), static, label)

    def name(self, e: ast.Name, env: Env) -> Operand:
        """A name read: locals, then dims, then consts; anything else is an error."""
        ctx, n = self.ctx, e.id
        if n in env.bound:
            return Operand(env.bound[n].type, env.bound[n].static, n)
        if n in env.maybe:
            ctx.report(WiaNameError(f"'{n}' may be unbound here", e.span))
        elif n in ctx.outputs:
            ctx.report(WiaNameError(f"output '{n}' is read before it is assigned", e.span))
        elif n in ctx.output_only_dims:
            ctx.report(WiaNameError(f"dim '{n}' is declared only by outputs, so the body "
                                    "cannot read its extent; declare it on an input too",
                                    e.span))
        elif n in ctx.dims:
            return Operand(ValueType(DType.I64, (), True), ctx.dims[n], n)
        elif n in ctx.scope.consts:
            return ctx.services.const_value(ctx.scope.name, n, e.span)
        elif n == "none":  # a plain name, so a local named none shadows it
            return Operand(UNKNOWN, ALL_AXES, n)
        elif n in DTYPE_NAMES:
            ctx.report(WiaTypeError(f"dtype '{n}' is not a value; dtype names are arguments "
                                    f"such as cast(x, {n})", e.span))
        elif n in ctx.scope.funcs or n in ctx.scope.kernels or n in BUILTINS:
            ctx.report(WiaTypeError(f"'{n}' is a function, not a value; call it as {n}(...)",
                                    e.span))
        else:
            known = [*env.bound, *ctx.dims, *ctx.scope.consts]
            ctx.report(WiaNameError(f"unknown name '{n}'{did_you_mean(n, known)}", e.span))
        return Operand(UNKNOWN, None, n)

    def _qualified(self, e: ast.QualifiedName, env: Env) -> Operand:
        target = self._module(e.module, e.span)
        label = f"{e.module}.{e.name}"
        if target is None:
            return Operand(UNKNOWN, None, label)
        if e.name not in target.consts:
            self.ctx.report(WiaNameError(f"module '{e.module}' has no const '{e.name}'"
                                         f"{did_you_mean(e.name, list(target.consts))}", e.span))
            return Operand(UNKNOWN, None, label)
        value = self.ctx.services.const_value(e.module, e.name, e.span)
        return Operand(value.type, value.static, label)

    def _module(self, module: str, span: Any) -> Any:
        if module not in self.ctx.scope.imports:
            self.ctx.report(WiaNameError(f"unknown module '{module}'; add 'import {module};'", span))
            return None
        return self.ctx.services.scopes[module]

    # -------------------------------------------------------------- operators

    def _unary(self, e: ast.UnaryOp, env: Env) -> Operand:
        x = self.expr(e.operand, env)
        t = self.ctx.apply(e.span, lambda c: tr.unary(e.op, x.type))
        static = None
        if isinstance(t, ValueType) and isinstance(x.type, ValueType):
            static = fold_unary(e.op, x.static, x.type)
        return Operand(t, static, expr_text(e))

    def _binop(self, e: ast.BinOp, env: Env) -> Operand:
        # A chain `a + b + ... + z` is folded in a loop: its length must not cost
        # a stack frame per operand (issue 17).
        chain = left_chain(e)
        value = self.expr(chain[-1].lhs, env)
        for node in reversed(chain):
            value = self._binop_of(node, value, self.expr(node.rhs, env))
        return value

    def _binop_of(self, e: ast.BinOp, lhs: Operand, rhs: Operand) -> Operand:
        labels = (lhs.label, rhs.label)
        span = lambda: op_span(e)  # noqa: E731 - found only for a message or a constraint
        if e.op == "@":
            t = self.ctx.apply(span, lambda c: sr.matmul(lhs.type, rhs.type, labels, c))
        else:
            t = self.ctx.apply(span, lambda c: tr.binary(e.op, lhs.type, rhs.type, labels, c))
        static = None
        if isinstance(t, ValueType) and isinstance(lhs.type, ValueType) \
                and isinstance(rhs.type, ValueType):
            self._check_weak_int(e, lhs, rhs, t)
            static = fold_binary(e.op, lhs.static, lhs.type, rhs.static, rhs.type, t)
        return Operand(t, static, ExprLabel(e))

    def _check_weak_int(self, e: ast.BinOp, lhs: Operand, rhs: Operand, t: ValueType) -> None:
        """An integer literal the other operand's integer dtype cannot hold is an error
        in arithmetic, as NumPy 2 raises; comparisons and ``/`` compute wide enough."""
        if e.op not in WRAPPING_OPS:
            return
        assert isinstance(lhs.type, ValueType) and isinstance(rhs.type, ValueType)
        bad = weak_int_outside(lhs.static, lhs.type, rhs.static, rhs.type, t.dtype)
        if bad is None:
            return
        at_lhs = lhs.type.weak and lhs.static == bad
        self.ctx.report(WiaTypeError(
            f"integer {bad} is out of range for {t.dtype}, the dtype of the other operand "
            f"of '{e.op}' (it would wrap around; NumPy raises OverflowError); cast the "
            f"other operand to a wider type, e.g. cast(x, i64)",
            (e.lhs if at_lhs else e.rhs).span))

    # -------------------------------------------------------------- indexing

    def index_items(self, items: tuple[ast.IndexItem, ...], env: Env) -> list[Any]:
        """Each item as ``IndexAt``/``SliceOf``; non-integer indices are reported."""
        return [self._slice(i, env) if isinstance(i, ast.Slice) else self._index_at(i, env)
                for i in items]

    def _index_value(self, e: ast.Expr, env: Env) -> tuple[int | None, bool]:
        """(compile-time value, dynamic?) of one index or slice bound."""
        op = self.expr(e, env)
        if not _is_int_scalar(op.type):
            self.ctx.report(WiaTypeError(f"index must be a scalar integer, got {op.type}", e.span))
        if _int(op.static):
            return op.static, False
        return None, True

    def _index_at(self, e: ast.Expr, env: Env) -> sr.IndexAt:
        return sr.IndexAt(self._index_value(e, env)[0])

    def _slice(self, s: ast.Slice, env: Env) -> sr.SliceOf:
        parts: list[int | None] = []
        dynamic = False
        for p in (s.start, s.stop, s.step):
            value, dyn = self._index_value(p, env) if p is not None else (None, False)
            parts.append(value)
            dynamic = dynamic or dyn
        return sr.SliceOf(parts[0], parts[1], parts[2], dynamic)

    def _index(self, e: ast.Index, env: Env) -> Operand:
        base = self.expr(e.base, env)
        items = self.index_items(e.items, env)
        t = self.ctx.apply(e.span, lambda c: sr.index(base.type, items))
        return Operand(t, None, expr_text(e))

    # -------------------------------------------------------------- calls

    def _call(self, e: ast.Call, env: Env) -> Operand:
        ctx, label = self.ctx, expr_text(e)
        if e.module is not None:
            target = self._module(e.module, e.span)
            if target is None:
                return Operand(UNKNOWN, None, label)
            if e.name in target.funcs:
                return self._call_func(e, env, target.name, target.funcs[e.name])
            what = "a kernel, not a func" if e.name in target.kernels else "no func"
            ctx.report(WiaNameError(f"module '{e.module}' has {what} '{e.name}'"
                                    f"{did_you_mean(e.name, list(target.funcs))}", e.span))
        elif e.name in ctx.scope.funcs:
            return self._call_func(e, env, ctx.scope.name, ctx.scope.funcs[e.name])
        elif e.name in BUILTINS:
            return self._call_builtin(BUILTINS[e.name], e, env)
        elif e.name in ctx.scope.kernels:
            ctx.report(WiaTypeError(f"kernel '{e.name}' cannot be called; only funcs and "
                                    f"builtins can", e.span))
        else:
            known = [*ctx.scope.funcs, *BUILTINS]
            ctx.report(WiaNameError(f"unknown function '{e.name}'{did_you_mean(e.name, known)}",
                                    e.span))
        for a in e.args:
            self.expr(a, env)  # still report errors inside the arguments
        return Operand(UNKNOWN, None, label)

    def _call_func(self, e: ast.Call, env: Env, module: str, func: ast.Func) -> Operand:
        name = self.ctx.services.scopes[module].qualify(func.name)
        # every argument is typed, in source order, even when the call is bad
        typed = {id(a): self.argument(a, env) for a in (*e.args, *(k.value for k in e.keywords))}
        bound, errors = bind_func_args(e, func, name)
        for err in errors:
            self.ctx.report(err)
        if errors:
            return Operand(UNKNOWN, None, expr_text(e))
        args = [typed[id(a)] if a is not None else
                self.ctx.services.func_default(module, func, p)
                for p, a in zip(func.params, bound, strict=True)]
        result = self.ctx.services.call_func(self.ctx, module, func, args, e)
        return Operand(result.type, result.static, expr_text(e))

    def _call_builtin(self, b: Builtin, e: ast.Call, env: Env) -> Operand:
        label = expr_text(e)
        try:
            bound = bind_arguments(b, len(e.args), [k.name for k in e.keywords])
        except SignatureError as s:
            kw = next((k for k in e.keywords if k.name == s.keyword), None)
            self.ctx.report(WiaTypeError(s.message, kw.span if kw is not None else e.span))
            return Operand(UNKNOWN, None, label)
        keywords = {k.name: k.value for k in e.keywords}
        args: dict[str, Any] = {}
        for p in b.params:
            if p.name in bound:
                where = bound[p.name]
                arg = e.args[where] if isinstance(where, int) else keywords[where]
                args[p.name] = self._argument(b, p, arg, env)
        if any(v is _UNRESOLVED for v in args.values()):
            return Operand(UNKNOWN, None, label)
        t = self.ctx.apply(e.span, lambda c: apply_rule(b, args, c))
        return Operand(t, fold_call(b, args) if t is not UNKNOWN else None, label)

    def _argument(self, b: Builtin, p: BParam, e: ast.Expr, env: Env) -> Any:
        if p.kind == "value":
            return self.expr(e, env)
        if p.kind == "dtype":
            if isinstance(e, ast.Name) and e.id in DTYPE_NAMES:
                return DTYPE_NAMES[e.id]
            return self._bad_arg(b, p, e, "a dtype name such as f32")
        if p.kind == "dims":
            return self._dims(b, p, e, env)
        if p.kind == "tensors":
            if not isinstance(e, ast.ArrayLit):
                return self._bad_arg(b, p, e, "a list of tensors such as [a, b]")
            return tuple(self.expr(x, env) for x in e.elements)
        return self._static(b, p, e, env)

    def _bad_arg(self, b: Builtin, p: BParam, e: ast.Expr, expected: str) -> Any:
        self.ctx.report(WiaTypeError(f"argument '{p.name}' of {b.name} must be {expected}, "
                                     f"got {expr_text(e)}", e.span))
        return _UNRESOLVED

    _STATIC_KINDS: dict[str, tuple[str, Callable[[Static], bool]]] = {
        "int": ("a compile-time integer", _int),
        "bool": ("true or false", lambda v: isinstance(v, bool)),
        "axis": ("a compile-time integer or list of integers",
                 lambda v: _int(v) or (isinstance(v, tuple) and all(_int(a) for a in v))),
        "perm": ("a compile-time list of integers",
                 lambda v: isinstance(v, tuple) and all(_int(a) for a in v)),
    }

    def _static(self, b: Builtin, p: BParam, e: ast.Expr, env: Env) -> Any:
        expected, ok = self._STATIC_KINDS[p.kind]
        op = self.argument(e, env) if p.kind == "axis" else self.expr(e, env)
        if op.static is ALL_AXES:
            return None  # the reduction's own default
        if op.type is UNKNOWN:
            return _UNRESOLVED
        return op.static if ok(op.static) else self._bad_arg(b, p, e, expected)

    def _dims(self, b: Builtin, p: BParam, e: ast.Expr, env: Env) -> Any:
        if not isinstance(e, ast.ArrayLit):
            return self._bad_arg(b, p, e, "a list of dims such as [M, 4]")
        dims: list[tr.Dim] = []
        for x in e.elements:
            op = self.expr(x, env)
            if not _is_int_scalar(op.type):
                self.ctx.report(WiaTypeError(f"a dim must be a scalar integer, got {op.type}",
                                             x.span))
                return _UNRESOLVED
            dims.append(op.static.name if isinstance(op.static, Sym) else
                        op.static if _int(op.static) else None)
        return tuple(dims)
