"""Checking statements: binding, block scoping, conditions, loops and returns.

Invariants:
- ``block(b, env)`` returns the state after ``b``; the input ``env`` is not modified
  by branches (each branch works on a copy) and paths meet through ``scope.merge``.
- Loops run their body to a fixed point of the loop-carried types (silently), then
  once more reporting errors; a name first bound in a loop body is not visible
  after the loop (the loop may run zero times).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..diagnostics import Span, WiaNameError, WiaShapeError, WiaTypeError
from ..dtypes import DTYPE_NAMES, DType
from . import ast
from . import shaperules as sr
from . import typerules as tr
from .builtins import BUILTINS, Operand
from .checkctx import BodyCtx
from .checkexpr import ExprTyper
from .exprtext import expr_text
from .scope import Env, assigned_names, merge
from .typerules import UNKNOWN, ValueType

#: Passes over a loop body before its carried types must have settled (dims widen to
#: None once, dtypes climb a short lattice, so a few passes always suffice).
MAX_LOOP_PASSES = 6


def _check_output(value: tr.Type, declared: tr.Type, name: str,
                  cons: list[tr.ShapeConstraint]) -> tr.Type:
    """``assignable`` as a rule (its result is unused)."""
    tr.assignable(value, declared, f"output '{name}'", cons)
    return declared


class StmtChecker:
    """Checks the statements of one body."""

    def __init__(self, ctx: BodyCtx):
        self.ctx = ctx
        self.exprs = ExprTyper(ctx)
        self._handlers: dict[type, Callable[[Any, Env], Env]] = {
            ast.Assign: self._assign, ast.AugAssign: self._aug_assign,
            ast.SliceAssign: self._slice_assign, ast.If: self._if, ast.For: self._for,
            ast.While: self._while, ast.Return: self._return,
        }

    def block(self, block: ast.Block, env: Env) -> Env:
        for stmt in block.stmts:
            handler = self._handlers.get(type(stmt))
            if handler is None:
                raise TypeError(f"checker: unknown statement node {type(stmt).__name__}")
            env = handler(stmt, env)
        return env

    # -------------------------------------------------------------- binding

    def _target_error(self, name: str) -> str | None:
        """Why ``name`` cannot be assigned, or None."""
        ctx = self.ctx
        if name in ctx.dims:
            return f"cannot assign to dim '{name}'"
        if name in ctx.outputs:
            return None  # a parameter shadows a kernel or func of the same name
        if name in ctx.scope.consts:
            return f"cannot assign to const '{name}'"
        if name in DTYPE_NAMES:
            return f"cannot assign to dtype name '{name}'"
        if name in BUILTINS or name in ctx.scope.funcs or name in ctx.scope.kernels:
            return f"cannot assign to function '{name}'"
        if name in ctx.scope.imports:
            return f"cannot assign to module '{name}'"
        return None

    def bind(self, name: str, value: Operand, span: Span, env: Env) -> Env:
        """Bind ``name`` to ``value``; an output's dtype and shape are checked first."""
        # A bound name (an input, or a name assigned before) passed these checks already.
        problem = None if name in env.bound else self._target_error(name)
        if problem is not None:
            self.ctx.report(WiaNameError(problem, span))
            return env
        declared = self.ctx.outputs.get(name)
        if declared is not None:
            self.ctx.apply(span, lambda c: _check_output(value.type, declared, name, c))
            if isinstance(declared, ValueType) and isinstance(value.type, ValueType):
                value = Operand(ValueType(declared.dtype, value.type.shape), None, name)
            elif isinstance(declared, ValueType):
                value = Operand(declared, None, name)
        env = env.copy()
        env.bind(name, Operand(value.type, value.static, name))
        return env

    def _assign(self, s: ast.Assign, env: Env) -> Env:
        return self.bind(s.target, self.exprs.expr(s.value, env), s.span, env)

    def _read_target(self, name: str, span: Span, env: Env) -> Operand:
        return self.exprs.name(ast.Name(name, span=span), env)

    def _aug_assign(self, s: ast.AugAssign, env: Env) -> Env:
        old = self._read_target(s.target, s.span, env)
        value = self.exprs.expr(s.value, env)
        t = self.ctx.apply(s.span, lambda c: tr.binary(s.op, old.type, value.type,
                                                       (s.target, value.label), c))
        return self.bind(s.target, Operand(t, None, s.target), s.span, env)

    def _slice_assign(self, s: ast.SliceAssign, env: Env) -> Env:
        old = self._read_target(s.target, s.span, env)
        items = self.exprs.index_items(s.items, env)
        value = self.exprs.expr(s.value, env)
        t = self.ctx.apply(s.span, lambda c: sr.slice_update(old.type, items, value.type,
                                                             (s.target, value.label), c))
        if s.target not in env.bound:
            return env  # already reported by _read_target
        return self.bind(s.target, Operand(t, None, s.target), s.span, env)

    # -------------------------------------------------------------- control flow

    def condition(self, cond: ast.Expr, env: Env) -> None:
        t = self.exprs.expr(cond, env).type
        if isinstance(t, ValueType) and (t.dtype is not DType.BOOL or not t.is_scalar):
            self.ctx.report(WiaTypeError(f"condition must be a scalar bool, got {t}", cond.span))

    def _if(self, s: ast.If, env: Env) -> Env:
        self.condition(s.cond, env)
        then_env = self.block(s.then_body, env.copy())
        else_env = self.block(s.else_body, env.copy()) if s.else_body else env.copy()
        head = f"'if {expr_text(s.cond)}'"
        return merge(then_env, else_env, f"{head} is true", f"{head} is false",
                     self._join_error(s.span))

    def _join_error(self, span: Span) -> Callable[[str, str], None]:
        def report(name: str, message: str) -> None:
            self.ctx.report(WiaTypeError(message, span))
        return report

    def _range_bound(self, e: ast.Expr | None, env: Env) -> Operand | None:
        if e is None:
            return None
        op = self.exprs.expr(e, env)
        t = op.type
        if isinstance(t, ValueType) and (not t.is_scalar or not t.dtype.is_int):
            self.ctx.report(WiaTypeError(f"range bounds must be scalar integers, got {t}", e.span))
        return op

    def _for(self, s: ast.For, env: Env) -> Env:
        for e in (s.start, s.stop, s.step):
            op = self._range_bound(e, env)
            if e is not None and e is s.step and op is not None and op.static == 0 and op.type is not UNKNOWN:
                self.ctx.report(WiaShapeError("range step cannot be zero", e.span))
        if self._target_error(s.var):
            self.ctx.report(WiaNameError(self._target_error(s.var) or "", s.span))

        def body(entry: Env) -> Env:
            entry.bind(s.var, Operand(ValueType(DType.I64, (), True), None, s.var))
            return self.block(s.body, entry)

        head = f"'for {s.var} in range(...)'"
        return self._loop(s.body, env, body, s.span, head)

    def _while(self, s: ast.While, env: Env) -> Env:
        def body(entry: Env) -> Env:
            self.condition(s.cond, entry)
            return self.block(s.body, entry)

        return self._loop(s.body, env, body, s.span, f"'while {expr_text(s.cond)}'")

    def _loop(self, body_ast: ast.Block, env: Env, body: Callable[[Env], Env],
              span: Span, head: str) -> Env:
        carried = assigned_names(body_ast) & env.bound.keys()
        entry = env.copy()
        for n in carried:
            entry.bound[n] = Operand(entry.bound[n].type, None, n)  # values vary per iteration
        for _ in range(MAX_LOOP_PASSES):
            with self.ctx.silenced():
                end = body(entry.copy())
            widened = self._widen(entry, end, carried)
            if widened is None:
                break
            entry = widened
        end = body(entry.copy())
        end.returned = False  # a return in the body does not return on the zero-trip path
        return merge(entry, end, f"{head} runs zero times", f"{head} runs",
                     self._join_error(span))

    def _widen(self, entry: Env, end: Env, carried: set[str]) -> Env | None:
        """``entry`` with each carried type joined with its type after the body; None if stable."""
        out, changed = entry.copy(), False
        for n in carried:
            if n not in end.bound:
                continue
            try:
                t = tr.join(entry.bound[n].type, end.bound[n].type)
            except tr.RuleError:
                continue  # reported by the final pass's merge
            if t != entry.bound[n].type:
                out.bound[n] = Operand(t, None, n)
                changed = True
        return out if changed else None

    def _return(self, s: ast.Return, env: Env) -> Env:
        value = self.exprs.expr(s.value, env)
        if self.ctx.kind != "func":
            self.ctx.report(WiaTypeError("'return' is only allowed in a func", s.span))
            return env
        if not self.ctx.silent:
            self.ctx.returns.append((value, s.span))
        env = env.copy()
        env.returned = True
        return env
