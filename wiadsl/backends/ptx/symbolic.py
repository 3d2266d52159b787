"""Symbolic sizes: launch-plan expressions over dims and host scalars.

A ``Sym`` is an ``int`` (known at compile time) or a ``str`` holding an expression
in the plan's expression language (docs/ptx.md): integer literals, names (dims
such as ``A_0``, host scalars such as ``s12``), ``+ - * // %``, comparisons,
``and or not``, ``x if c else y``, and the calls in ``FUNCTIONS``.

Invariants:
- Builders fold: an expression whose operands are all ints is an int.
- ``evaluate`` accepts only that language (an AST whitelist, no attribute access,
  no builtins), so a plan read from disk cannot run arbitrary Python.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from typing import Any

from ...diagnostics import WiaRuntimeError

Sym = int | str


def _wrap_index(i: int, n: int, what: str = "index") -> int:
    j = i + n if i < 0 else i
    if not 0 <= j < n:
        raise WiaRuntimeError(f"{what} {i} is out of range for an axis of extent {n}")
    return j


def _slice_start(start: int | None, stop: int | None, step: int | None, n: int) -> int:
    if step == 0:
        raise WiaRuntimeError("slice step cannot be zero")
    return slice(start, stop, step).indices(n)[0]


def _slice_len(start: int | None, stop: int | None, step: int | None, n: int) -> int:
    if step == 0:
        raise WiaRuntimeError("slice step cannot be zero")
    return len(range(*slice(start, stop, step).indices(n)))


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _bcast(a: int, b: int) -> int:
    if a != b and a != 1 and b != 1:
        raise WiaRuntimeError(f"extents {a} and {b} do not broadcast")
    return b if a == 1 else a


FUNCTIONS: dict[str, Callable[..., int]] = {
    "cdiv": _cdiv, "max": max, "min": min, "wrap_index": _wrap_index,
    "slice_start": _slice_start, "slice_len": _slice_len, "bcast": _bcast, "int": int,
}

_ALLOWED = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp,
            ast.Call, ast.Name, ast.Constant, ast.Load, ast.Add, ast.Sub, ast.Mult,
            ast.FloorDiv, ast.Mod, ast.USub, ast.Not, ast.And, ast.Or, ast.Eq, ast.NotEq,
            ast.Lt, ast.LtE, ast.Gt, ast.GtE)

_CACHE: dict[str, Any] = {}


def compile_expr(text: str) -> Any:
    """Parse and whitelist-check ``text``; a code object (cached)."""
    code = _CACHE.get(text)
    if code is None:
        tree = ast.parse(text, mode="eval")
        for node in ast.walk(tree):
            if not isinstance(node, _ALLOWED):
                raise ValueError(f"'{type(node).__name__}' is not allowed in a plan expression: {text}")
            if isinstance(node, ast.Call) and not (
                    isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS):
                raise ValueError(f"unknown function in plan expression: {text}")
        code = compile(tree, "<plan>", "eval")
        _CACHE[text] = code
    return code


def evaluate(expr: Sym, env: Mapping[str, Any]) -> Any:
    """The value of ``expr`` given names in ``env``."""
    if isinstance(expr, int):
        return expr
    scope = dict(FUNCTIONS)
    scope.update(env)
    return eval(compile_expr(expr), {"__builtins__": {}}, scope)  # noqa: S307 - whitelisted AST


def _fold(text: str) -> Sym:
    try:
        value = evaluate(text, {"None": None})
    except NameError:
        return text
    except WiaRuntimeError:
        return text  # a static error still surfaces at run time, with the plan's message
    return int(value) if isinstance(value, (int, bool)) else text


def _p(a: Sym) -> str:
    return str(a) if isinstance(a, int) and a >= 0 else f"({a})"


def add(a: Sym, b: Sym) -> Sym:
    if a == 0:
        return b
    if b == 0:
        return a
    return _fold(f"{_p(a)} + {_p(b)}")


def sub(a: Sym, b: Sym) -> Sym:
    return a if b == 0 else _fold(f"{_p(a)} - {_p(b)}")


def mul(a: Sym, b: Sym) -> Sym:
    if a == 0 or b == 0:
        return 0
    if a == 1:
        return b
    if b == 1:
        return a
    return _fold(f"{_p(a)} * {_p(b)}")


def call(fn: str, *args: Sym | None) -> Sym:
    return _fold(f"{fn}({', '.join('None' if a is None else str(a) for a in args)})")


def product(items: list[Sym]) -> Sym:
    out: Sym = 1
    for x in items:
        out = mul(out, x)
    return out


def where(cond: str, a: Sym, b: Sym) -> Sym:
    return a if a == b else _fold(f"({a} if {cond} else {b})")


def contiguous_strides(shape: list[Sym]) -> list[Sym]:
    """Row-major strides (in elements) of ``shape``."""
    strides: list[Sym] = []
    acc: Sym = 1
    for d in reversed(shape):
        strides.append(acc)
        acc = mul(acc, d)
    return list(reversed(strides))


def divisible(v: Sym, n: int) -> bool:
    """Whether ``v`` is a multiple of ``n`` whatever integers its names hold: a multiple
    of n, a product with such a factor, a sum, difference or choice of such terms (the
    batch stride ``(T) * 64`` of a dense [B, T, 64] tensor is one)."""
    if isinstance(v, int):
        return v % n == 0
    try:
        return _divisible(ast.parse(v, mode="eval").body, n)
    except SyntaxError:
        return False


def _divisible(node: ast.expr, n: int) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int) and node.value % n == 0
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        return _divisible(node.left, n) or _divisible(node.right, n)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub):
        return _divisible(node.left, n) and _divisible(node.right, n)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return _divisible(node.operand, n)
    if isinstance(node, ast.IfExp):
        return _divisible(node.body, n) and _divisible(node.orelse, n)
    return False
