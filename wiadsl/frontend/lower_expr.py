"""Lowering of expressions to IR: literals, names, operators, indexing, calls.

Types come from the same pure rules the checker uses (``typerules``,
``shaperules``), so the IR says exactly what the checked program means. Operands
are cast explicitly to the dtype the rules pick (the IR's elementwise ops take
one dtype). Compile-time values (``static``) are folded as the checker folds
them (``constfold``: in the result dtype, as at run time), so ``axis=-1`` or
``2 * EPS`` need no IR.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..diagnostics import WiaError, WiaShapeError, WiaTypeError
from ..dtypes import DTYPE_NAMES, DType
from . import ast
from . import shaperules as sr
from . import typerules as tr
from .builtins import Sym
from .constfold import ARITH_NAMES, FLOAT_CMP, INT_CMP, compare_dtype, fold_binary, fold_unary
from .exprtext import left_chain
from .lower_values import Emitter, TypedValue, dialect, ir_type
from .typerules import ValueType

if TYPE_CHECKING:
    from .lower import BodyLowerer

Env = dict[str, TypedValue]


def rule_error(err: tr.RuleError, span: Any) -> WiaError:
    """A rule's message as the spanned error class the checker would raise."""
    cls = WiaShapeError if isinstance(err, tr.ShapeRuleError) else WiaTypeError
    return cls(err.message, span)


class ExprLowerer:
    """Lowers the expressions of one body; ``owner`` knows names, consts and funcs."""

    def __init__(self, owner: BodyLowerer):
        self.owner = owner
        self.em: Emitter = owner.em
        self._handlers: dict[type, Callable[[Any, Env], TypedValue]] = {
            ast.IntLit: self._int_lit, ast.FloatLit: self._float_lit,
            ast.BoolLit: self._bool_lit, ast.ArrayLit: self._array, ast.Name: self._name,
            ast.QualifiedName: self._qualified, ast.UnaryOp: self._unary,
            ast.BinOp: self._binop, ast.Call: self._call, ast.Index: self._index,
        }

    def expr(self, e: ast.Expr, env: Env) -> TypedValue:
        handler = self._handlers.get(type(e))
        if handler is None:
            raise WiaTypeError(f"cannot lower expression {type(e).__name__}", e.span)
        b = self.em.b
        outer, b.loc = b.loc, e.span
        try:
            return handler(e, env)
        except tr.RuleError as err:
            raise rule_error(err, e.span) from None
        finally:
            b.loc = outer

    # ---------------------------------------------------------------- atoms

    def _int_lit(self, e: ast.IntLit, env: Env) -> TypedValue:
        return self.em.constant(e.value, ValueType(DType.I64, (), True))

    def _float_lit(self, e: ast.FloatLit, env: Env) -> TypedValue:
        return self.em.constant(e.value, ValueType(DType.F64, (), True))

    def _bool_lit(self, e: ast.BoolLit, env: Env) -> TypedValue:
        return self.em.constant(e.value, ValueType(DType.BOOL, (), True))

    def _array(self, e: ast.ArrayLit, env: Env) -> TypedValue:
        static = self.owner.static_value(e, env)
        array = np.asarray(static)
        kind = 2 if array.dtype.kind == "f" else 1 if array.dtype.kind in "iu" else 0
        dtype = {0: DType.BOOL, 1: DType.I64, 2: DType.F64}[kind]
        return self.em.constant(array, ValueType(dtype, array.shape, True), static)

    def _name(self, e: ast.Name, env: Env) -> TypedValue:
        return self.owner.lookup(e.id, e.span, env)

    def _qualified(self, e: ast.QualifiedName, env: Env) -> TypedValue:
        return self.owner.module_const(e.module, e.name, e.span)

    # ------------------------------------------------------------ operators

    def _unary(self, e: ast.UnaryOp, env: Env) -> TypedValue:
        x = self.expr(e.operand, env)
        result = tr.unary("neg" if e.op == "-" else e.op, x.type)
        assert isinstance(result, ValueType)
        static = fold_unary(e.op, x.static, x.type)
        if static is not None:  # ``-5`` is the constant -5
            if isinstance(e.operand, (ast.IntLit, ast.FloatLit)) and not x.value.uses:
                x.value.op.erase()  # type: ignore[attr-defined]  # fresh, unshared
            return self.em.constant(static, result, static)
        if e.op == "-":
            return self.unary_fn("neg", x)
        return self._emit(x.type, "not", [x.value])

    def unary_fn(self, fn: str, x: TypedValue) -> TypedValue:
        """An elementwise unary builtin: cast to the rule's dtype, then ``<dialect>.fn``."""
        result = tr.unary(fn, x.type)
        assert isinstance(result, ValueType)
        x = self.em.cast(x, result.dtype)
        if result.dtype is DType.BOOL and fn in ("abs", "relu", "floor", "ceil"):
            return x  # the identity on bools; the IR has no i1 form of these ops
        return self._emit(result, fn, [x.value])

    def _binop(self, e: ast.BinOp, env: Env) -> TypedValue:
        # A chain `a + b + ... + z` is folded in a loop, not one frame per operand.
        chain = left_chain(e)
        value = self.expr(chain[-1].lhs, env)
        b = self.em.b
        for node in reversed(chain):
            rhs = self.expr(node.rhs, env)
            b.loc = node.span  # each link's ops carry its own span, not the whole chain's
            try:
                value = (self.matmul(value, rhs) if node.op == "@"
                         else self.binary(node.op, value, rhs))
            except tr.RuleError as err:
                raise rule_error(err, node.span) from None
        return value

    def binary(self, op: str, a: TypedValue, b: TypedValue) -> TypedValue:
        """``a OP b`` for an arithmetic, comparison or logic operator, or max/min."""
        result = tr.binary(op, a.type, b.type)
        assert isinstance(result, ValueType)
        static = fold_binary(op, a.static, a.type, b.static, b.type, result)
        if static is not None:
            return self.em.constant(static, result, static)
        if op in FLOAT_CMP:
            compute = compare_dtype(a.static, a.type, b.static, b.type)
            table = FLOAT_CMP if compute.is_float else INT_CMP
            a, b = self.em.cast(a, compute), self.em.cast(b, compute)
            name = f"{dialect(result)}.{'cmpf' if compute.is_float else 'cmpi'}"
            attrs = {"predicate": table[op]}
            return TypedValue(self.em.b.value(name, [a.value, b.value], ir_type(result), attrs),
                              result)
        fn = ARITH_NAMES.get(op, op)
        a, b = self.em.cast(a, result.dtype), self.em.cast(b, result.dtype)
        return self._emit(result, fn, [a.value, b.value])

    def matmul(self, a: TypedValue, b: TypedValue, labels: tuple[str, str] = ("a", "b")
               ) -> TypedValue:
        result = sr.matmul(a.type, b.type, labels, None)
        assert isinstance(result, ValueType)
        a, b = self.em.cast(a, result.dtype), self.em.cast(b, result.dtype)
        return TypedValue(self.em.b.value("tensor.matmul", [a.value, b.value], ir_type(result)),
                          result)

    def _emit(self, result: ValueType, fn: str, operands: list) -> TypedValue:
        name = f"{dialect(result)}.{fn}"
        return TypedValue(self.em.b.value(name, operands, ir_type(result)), result)

    # ---------------------------------------------------------------- calls

    def _call(self, e: ast.Call, env: Env) -> TypedValue:
        if e.module is None and e.name in self.owner.builtin_names:
            from .lower_builtins import lower_builtin

            return lower_builtin(self, e, env)
        return self.owner.call_func(e, env)

    # ------------------------------------------------------------- indexing

    def _index(self, e: ast.Index, env: Env) -> TypedValue:
        base = self.expr(e.base, env)
        items, layout, operands = self.index_items(e.items, env)
        result = sr.index(base.type, items)
        assert isinstance(result, ValueType)
        if all(s == "i" for s in layout) and len(layout) == base.type.rank:
            return TypedValue(self.em.b.value("tensor.extract", [base.value, *operands],
                                              ir_type(result)), result)
        value = self.em.b.value("tensor.extract_slice", [base.value, *operands],
                                ir_type(result), {"layout": layout})
        return TypedValue(value, result)

    def index_items(self, items: tuple[ast.IndexItem, ...], env: Env
                    ) -> tuple[list[sr.IndexAt | sr.SliceOf], list[str], list]:
        """The rule's view of each item, the IR layout strings, and the i64 operands."""
        rule_items: list[sr.IndexAt | sr.SliceOf] = []
        layout: list[str] = []
        operands: list = []
        for item in items:
            if not isinstance(item, ast.Slice):
                tv = self._int_operand(item, env)
                rule_items.append(sr.IndexAt(_static_int(tv.static)))
                layout.append("i")
                operands.append(self.em.to_i64(tv))
                continue
            parts = [(p, self._int_operand(p, env)) for p in (item.start, item.stop, item.step)
                     if p is not None]
            statics = [_static_int(tv.static) for _, tv in parts]
            bounds = iter(statics)
            rule_items.append(sr.SliceOf(
                next(bounds) if item.start is not None else None,
                next(bounds) if item.stop is not None else None,
                next(bounds) if item.step is not None else None,
                dynamic=any(s is None for s in statics)))
            layout.append(("s" if item.start is not None else "") + ":" +
                          ("e" if item.stop is not None else "") +
                          (":t" if item.step is not None else ""))
            operands.extend(self.em.to_i64(tv) for _, tv in parts)
        return rule_items, layout, operands

    def _int_operand(self, e: ast.Expr, env: Env) -> TypedValue:
        tv = self.expr(e, env)
        if not tv.type.is_scalar or not tv.type.dtype.is_int:
            raise WiaTypeError(f"an index must be an integer scalar, got {tv.type}", e.span)
        return tv


def _static_int(static: Any) -> int | None:
    if isinstance(static, (int, np.integer)) and not isinstance(static, bool):
        return int(static)
    return None


def dtype_name(e: ast.Expr) -> DType | None:
    """The dtype an argument names (``cast(x, f16)``), or None."""
    return DTYPE_NAMES.get(e.id) if isinstance(e, ast.Name) else None


__all__ = ["Env", "ExprLowerer", "Sym", "dtype_name", "rule_error"]
