"""Binding a func call's arguments to the func's parameters (LANGUAGE.md §4).

A call passes parameters by position, then any by name (``f(x, eps=1e-6)``);
parameters left out take their default. The checker and the lowering bind every
call through ``bind_func_args``, so both see the same argument for each parameter.

Invariants:
- The result has one entry per parameter, in declaration order: the argument's
  expression, or ``None`` where the parameter takes its default.
- Errors point at the offending argument (an unknown or duplicate keyword, the
  first surplus positional) or at the whole call (a missing parameter).
- A keyword repeated in one call is the parser's error (``f(x, a=1, a=2)``).
"""

from __future__ import annotations

from ..diagnostics import WiaError, WiaNameError, WiaTypeError
from . import ast
from .builtins import did_you_mean


def _arguments(n: int) -> str:
    return f"{n} argument{'s' * (n != 1)}"


def _arity(func: ast.Func) -> str:
    required = sum(1 for p in func.params if p.default is None)
    total = len(func.params)
    return _arguments(total) if required == total else f"from {required} to {_arguments(total)}"


def bind_func_args(call: ast.Call, func: ast.Func, name: str
                   ) -> tuple[list[ast.Expr | None], list[WiaError]]:
    """Each parameter's argument (None: its default) and the errors of the call.

    ``name`` is the func's name as the user writes it (``nn.softmax``).
    """
    errors: list[WiaError] = []
    params = func.params
    bound: list[ast.Expr | None] = [None] * len(params)
    given = [False] * len(params)
    if len(call.args) > len(params):
        n = len(call.args)
        errors.append(WiaTypeError(f"func '{name}' takes {_arity(func)} but {n} "
                                   f"{'was' if n == 1 else 'were'} given",
                                   call.args[len(params)].span))
    for k, arg in enumerate(call.args[:len(params)]):
        bound[k], given[k] = arg, True
    index = {p.name: k for k, p in enumerate(params)}
    for kw in call.keywords:
        i = index.get(kw.name)
        if i is None:
            errors.append(WiaNameError(f"func '{name}' has no parameter '{kw.name}'"
                                       f"{did_you_mean(kw.name, list(index))}", kw.span))
        elif given[i]:
            errors.append(WiaTypeError(f"func '{name}' got multiple values for parameter "
                                       f"'{kw.name}'", kw.span))
        else:
            bound[i], given[i] = kw.value, True
    missing = [p.name for p, g in zip(params, given, strict=True) if not g and p.default is None]
    if missing:
        names = ", ".join(f"'{m}'" for m in missing)
        errors.append(WiaTypeError(f"func '{name}' is missing parameter"
                                   f"{'s' * (len(missing) != 1)} {names}", call.span))
    return bound, errors
