"""Short source renderings of expressions for error messages, and operator spans.

``expr_text`` prints an expression as a user would write it, with the arguments
of calls elided (``reduce_max(...) > 1.0``) so messages stay one line.
``op_span`` finds the operator token of a ``BinOp`` in the source text, so a
shape error in ``A @ x`` points at the ``@`` (LANGUAGE.md §9).
"""

from __future__ import annotations

from ..diagnostics import Span
from . import ast

_PREC = {"||": 1, "&&": 2, "==": 3, "!=": 3, "<": 3, "<=": 3, ">": 3, ">=": 3,
         "+": 4, "-": 4, "*": 5, "/": 5, "%": 5, "@": 5, "**": 7}
_UNARY_PREC = 6
_ATOM_PREC = 8


def _prec(e: ast.Expr) -> int:
    if isinstance(e, ast.BinOp):
        return _PREC[e.op]
    if isinstance(e, ast.UnaryOp):
        return _UNARY_PREC
    return _ATOM_PREC


def _wrap(e: ast.Expr, min_prec: int) -> str:
    text = expr_text(e)
    return f"({text})" if _prec(e) < min_prec else text


def _item_text(item: ast.IndexItem) -> str:
    if isinstance(item, ast.Slice):
        parts = [expr_text(p) if p is not None else "" for p in (item.start, item.stop, item.step)]
        return ":".join(parts[:2]) + (f":{parts[2]}" if item.step is not None else "")
    return expr_text(item)


def _number(value: float) -> str:
    return repr(value)


def expr_text(e: ast.Expr) -> str:
    """The expression as source text, call arguments elided."""
    if isinstance(e, ast.IntLit):
        return str(e.value)
    if isinstance(e, ast.FloatLit):
        return _number(e.value)
    if isinstance(e, ast.BoolLit):
        return "true" if e.value else "false"
    if isinstance(e, ast.Name):
        return e.id
    if isinstance(e, ast.QualifiedName):
        return f"{e.module}.{e.name}"
    if isinstance(e, ast.ArrayLit):
        return "[" + ", ".join(expr_text(x) for x in e.elements) + "]"
    if isinstance(e, ast.UnaryOp):
        return e.op + _wrap(e.operand, _UNARY_PREC)
    if isinstance(e, ast.BinOp):
        p = _PREC[e.op]
        # '**' is right-associative; everything else is left-associative.
        left, right = (p + 1, p) if e.op == "**" else (p, p + 1)
        return f"{_wrap(e.lhs, left)} {e.op} {_wrap(e.rhs, right)}"
    if isinstance(e, ast.Call):
        name = f"{e.module}.{e.name}" if e.module else e.name
        return f"{name}(...)" if e.args or e.keywords else f"{name}()"
    if isinstance(e, ast.Index):
        return f"{_wrap(e.base, _ATOM_PREC)}[{', '.join(_item_text(i) for i in e.items)}]"
    raise TypeError(f"expr_text: unknown expression node {type(e).__name__}")


def op_span(e: ast.BinOp) -> Span:
    """The span of the operator token of ``e``; ``e.span`` when it cannot be found.

    Only the text between the operands is searched, and positions convert through
    the source's line table, so this costs O(gap) and never rescans the file.
    """
    source = e.span.source
    try:
        lo = source.offset(e.lhs.span.end_line, e.lhs.span.end_column)
        hi = source.offset(e.rhs.span.line, e.rhs.span.column)
    except ValueError:
        return e.span
    at = source.text.find(e.op, lo, hi)
    if at < 0:
        return e.span
    line, column = source.position(at)
    return Span(source, line, column, line, column + len(e.op))
