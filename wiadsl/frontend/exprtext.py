"""Short source renderings of expressions for error messages, and operator spans.

``expr_text`` prints an expression as a user would write it, with the arguments
of calls elided (``reduce_max(...) > 1.0``) so messages stay one line.
``op_span`` finds the operator token of a ``BinOp`` in the source text, so a
shape error in ``A @ x`` points at the ``@`` (LANGUAGE.md §9).

Invariants:
- A text is at most ``TEXT_LIMIT`` characters (longer ones end in ``...``), so a
  label costs O(1) however long the expression, and the checker can label every
  node of a chain ``a + b + ... + z`` in linear time (``binop_text``).
- A left-associated chain is walked by a loop (``left_chain``), never by
  recursion, so its length is not bounded by Python's stack; only real nesting
  deepens recursion, and the parser caps that at ``MAX_DEPTH``.
"""

from __future__ import annotations

from ..diagnostics import Span
from . import ast

_PREC = {"||": 1, "&&": 2, "==": 3, "!=": 3, "<": 3, "<=": 3, ">": 3, ">=": 3,
         "+": 4, "-": 4, "*": 5, "/": 5, "%": 5, "@": 5, "**": 7}
_UNARY_PREC = 6
_ATOM_PREC = 8
#: Longest text ``expr_text`` returns; an error message stays readable beyond this.
TEXT_LIMIT = 100


def left_chain(e: ast.BinOp) -> list[ast.BinOp]:
    """The binary operators down the left operands of ``e``, outermost first.

    ``a + b - c`` gives ``[(a + b) - c, a + b]``; the last one's ``lhs`` is the
    chain's first operand. Walkers evaluate that operand, then fold the list in
    reverse: the same order as recursion on ``lhs``, without a frame per element.
    """
    chain = [e]
    while isinstance(chain[-1].lhs, ast.BinOp):
        chain.append(chain[-1].lhs)
    return chain


def _elide(text: str) -> str:
    return text if len(text) <= TEXT_LIMIT else text[:TEXT_LIMIT - 3] + "..."


def _prec(e: ast.Expr) -> int:
    if isinstance(e, ast.BinOp):
        return _PREC[e.op]
    if isinstance(e, ast.UnaryOp):
        return _UNARY_PREC
    return _ATOM_PREC


def _wrap(e: ast.Expr, min_prec: int, text: str | None = None) -> str:
    """The text of ``e`` (``text`` when already known), parenthesized if it binds looser."""
    text = expr_text(e) if text is None else text
    return f"({text})" if _prec(e) < min_prec else text


class ExprLabel:
    """An expression's source text for messages, computed when one is formatted: most
    operands are never named in a message, and a label per operator made checking a
    long program spend a third of its time on texts (issue 17)."""

    __slots__ = ("expr",)

    def __init__(self, expr: ast.Expr):
        self.expr = expr

    def __str__(self) -> str:
        return expr_text(self.expr)

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)

    def __repr__(self) -> str:
        return repr(str(self))


def binop_text(e: ast.BinOp, lhs_text: str, rhs_text: str) -> str:
    """The text of ``e`` from the texts of its operands: O(``TEXT_LIMIT``), not O(size)."""
    p = _PREC[e.op]
    # '**' is right-associative; everything else is left-associative.
    left, right = (p + 1, p) if e.op == "**" else (p, p + 1)
    return _elide(f"{_wrap(e.lhs, left, lhs_text)} {e.op} {_wrap(e.rhs, right, rhs_text)}")


def _item_text(item: ast.IndexItem) -> str:
    if isinstance(item, ast.Slice):
        parts = [expr_text(p) if p is not None else "" for p in (item.start, item.stop, item.step)]
        return ":".join(parts[:2]) + (f":{parts[2]}" if item.step is not None else "")
    return expr_text(item)


def _number(value: float) -> str:
    return repr(value)


def expr_text(e: ast.Expr) -> str:
    """The expression as source text, call arguments elided, at most ``TEXT_LIMIT`` long."""
    return _elide(_text(e))


def _text(e: ast.Expr) -> str:
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
        chain = left_chain(e)
        text = expr_text(chain[-1].lhs)
        for node in reversed(chain):
            text = binop_text(node, text, expr_text(node.rhs))
        return text
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
