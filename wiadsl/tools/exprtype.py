"""The static type of one expression over concrete inputs (the REPL's result type).

The REPL runs ``EXPR`` by wrapping it into a generated kernel whose output must be
declared with a dtype and shape. This module asks the frontend's own expression
checker for that type, so the REPL never guesses it.

Invariant: ``expression_type`` either returns a concrete ``ValueType``
(every extent an int, since every input extent is) or raises the frontend's
``WiaError`` for the expression, with its span.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..diagnostics import WiaTypeError, raise_all
from ..dtypes import DType
from ..frontend import ast
from ..frontend.builtins import Operand
from ..frontend.checkctx import BodyCtx
from ..frontend.checkstmt import StmtChecker
from ..frontend.loader import MAIN_MODULE, LoadedProgram
from ..frontend.scope import Env
from ..frontend.typecheck import Checker
from ..frontend.typerules import ValueType


def expression_type(loaded: LoadedProgram, expr: ast.Expr,
                    inputs: Mapping[str, tuple[DType, tuple[int, ...]]]) -> ValueType:
    """The type of ``expr`` (from the main module of ``loaded``) given input types.

    The type keeps its NEP 50 ``weak`` flag (``ValueType.strong()`` drops it).
    """
    checker = Checker(loaded)
    ctx = BodyCtx(checker, checker.scopes[MAIN_MODULE], "kernel", "<expression>")
    env = Env()
    for name, (dtype, shape) in inputs.items():
        env.bind(name, Operand(ValueType(dtype, tuple(shape)), None, name))
    result = StmtChecker(ctx).exprs.expr(expr, env)
    raise_all([*checker.errors, *ctx.errors])
    t = result.type
    if not isinstance(t, ValueType) or any(not isinstance(d, int) for d in t.shape):
        raise WiaTypeError(f"cannot determine a concrete type for this expression (got {t})",
                           getattr(expr, "span", None))
    return t
