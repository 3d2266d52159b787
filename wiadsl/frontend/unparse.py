"""AST to canonical source text: ``unparse(program)`` and ``unparse_expr(expr)``.

Invariants (tested by tests/frontend/test_unparse.py, also on random ASTs):
- ``parse_source(unparse(p)) == p`` for every program ``p`` the parser can produce
  (spans aside), and ``unparse`` is idempotent through a parse.
- The layout is fixed: 4-space indent, one statement per line, a blank line
  around ``func`` and ``kernel`` declarations, parentheses only where precedence
  needs them, floats by ``repr`` (so they re-parse to the same value).
- Recursion depth is proportional to AST depth, which the parser caps at
  ``MAX_DEPTH``; a left-associated chain ``a + b + ... + z`` is one loop, however long.
"""

from __future__ import annotations

import math

from . import ast
from .exprtext import left_chain

# Binding strength, weakest first (LANGUAGE.md §6).
_OR, _AND, _CMP, _ADD, _MUL, _UNARY, _POW, _POSTFIX, _ATOM = range(1, 10)
_BINARY_PREC = {
    "||": _OR, "&&": _AND,
    "==": _CMP, "!=": _CMP, "<": _CMP, "<=": _CMP, ">": _CMP, ">=": _CMP,
    "+": _ADD, "-": _ADD, "*": _MUL, "/": _MUL, "%": _MUL, "@": _MUL, "**": _POW,
}
_INDENT = "    "


def unparse_expr(expr: ast.Expr) -> str:
    """The canonical text of one expression."""
    return _expr(expr)[0]


def _wrap(part: tuple[str, int], min_prec: int) -> str:
    """``part``'s text, parenthesized when it binds looser than ``min_prec``."""
    text, prec = part
    return text if prec >= min_prec else f"({text})"


def _number(value: int | float) -> tuple[str, int]:
    """A literal's text; a negative one prints like a unary minus and binds like one."""
    if isinstance(value, float):
        if math.isnan(value):
            raise ValueError("a NaN float literal has no source spelling")
        if not math.isfinite(value):
            # No literal overflows to inf (1e999 is an error): a division spells it,
            # and binds like one.
            return ("-1.0 / 0.0" if value < 0 else "1.0 / 0.0"), _MUL
        text = repr(value)
    else:
        text = str(value)
    return text, (_UNARY if text.startswith("-") else _ATOM)


def _expr(e: ast.Expr) -> tuple[str, int]:
    """(text, precedence of its outermost construct)."""
    if isinstance(e, ast.BinOp):
        return _binop(e)
    if isinstance(e, ast.UnaryOp):
        return f"{e.op}{_wrap(_expr(e.operand), _UNARY)}", _UNARY
    if isinstance(e, ast.Call):
        callee = f"{e.module}.{e.name}" if e.module is not None else e.name
        return f"{callee}({_call_args(e)})", _POSTFIX
    if isinstance(e, ast.Index):
        return f"{_wrap(_expr(e.base), _POSTFIX)}[{_items(e.items)}]", _POSTFIX
    if isinstance(e, ast.BoolLit):
        return ("true" if e.value else "false"), _ATOM
    if isinstance(e, ast.IntLit | ast.FloatLit):
        return _number(e.value)
    if isinstance(e, ast.Name):
        return e.id, _ATOM
    if isinstance(e, ast.QualifiedName):
        return f"{e.module}.{e.name}", _ATOM
    if isinstance(e, ast.ArrayLit):
        return "[" + ", ".join(unparse_expr(x) for x in e.elements) + "]", _ATOM
    raise TypeError(f"not an expression node: {type(e).__name__}")


def _binop(e: ast.BinOp) -> tuple[str, int]:
    """A left-associated chain in one loop, pieces joined once: linear in its length."""
    chain = left_chain(e)
    text, prec = _expr(chain[-1].lhs)
    opens, pieces = 0, [text]
    for node in reversed(chain):
        lhs_min, rhs_min = _operand_precs(node.op)
        if prec < lhs_min:  # parenthesize everything so far
            opens += 1
            pieces.append(")")
        pieces.append(f" {node.op} {_wrap(_expr(node.rhs), rhs_min)}")
        prec = _BINARY_PREC[node.op]
    return "(" * opens + "".join(pieces), prec


def _operand_precs(op: str) -> tuple[int, int]:
    """The weakest binding each operand of ``op`` may have without parentheses."""
    prec = _BINARY_PREC[op]
    if prec == _POW:  # postfix ** unary: right-associative
        return _POSTFIX, _UNARY
    if prec == _CMP:  # comparisons do not chain: both sides bind tighter
        return _CMP + 1, _CMP + 1
    return prec, prec + 1  # left-associative


def _call_args(e: ast.Call) -> str:
    parts = [unparse_expr(a) for a in e.args]
    parts += [f"{k.name}={unparse_expr(k.value)}" for k in e.keywords]
    return ", ".join(parts)


def _items(items: tuple[ast.IndexItem, ...]) -> str:
    return ", ".join(_slice(i) if isinstance(i, ast.Slice) else unparse_expr(i) for i in items)


def _slice(s: ast.Slice) -> str:
    def part(x: ast.Expr | None) -> str:
        return "" if x is None else unparse_expr(x)

    text = f"{part(s.start)}:{part(s.stop)}"
    return text if s.step is None else f"{text}:{part(s.step)}"


# ---------------------------------------------------------------- statements

def _block(block: ast.Block, depth: int) -> str:
    """``{...}`` with the body at ``depth + 1``; ``{}`` when empty."""
    if not block.stmts:
        return "{}"
    body = "".join(_stmt(s, depth + 1) for s in block.stmts)
    return "{\n" + body + _INDENT * depth + "}"


def _stmt(s: ast.Stmt, depth: int) -> str:
    """One statement with its indent and newline."""
    return _INDENT * depth + _stmt_text(s, depth) + "\n"


def _stmt_text(s: ast.Stmt, depth: int) -> str:
    if isinstance(s, ast.Assign):
        return f"{s.target} = {unparse_expr(s.value)};"
    if isinstance(s, ast.AugAssign):
        return f"{s.target} {s.op}= {unparse_expr(s.value)};"
    if isinstance(s, ast.SliceAssign):
        return f"{s.target}[{_items(s.items)}] = {unparse_expr(s.value)};"
    if isinstance(s, ast.If):
        return _if(s, depth)
    if isinstance(s, ast.For):
        bounds = [s.stop] if s.start is None and s.step is None else [
            s.start if s.start is not None else ast.IntLit(0, span=s.span), s.stop]
        bounds += [s.step] if s.step is not None else []
        args = ", ".join(unparse_expr(b) for b in bounds)
        return f"for {s.var} in range({args}) {_block(s.body, depth)}"
    if isinstance(s, ast.While):
        return f"while {unparse_expr(s.cond)} {_block(s.body, depth)}"
    if isinstance(s, ast.Return):
        return f"return {unparse_expr(s.value)};"
    raise TypeError(f"not a statement node: {type(s).__name__}")


def _if(s: ast.If, depth: int) -> str:
    """``if``, with an ``else`` block holding only an ``If`` printed as ``else if``."""
    text = f"if {unparse_expr(s.cond)} {_block(s.then_body, depth)}"
    other = s.else_body
    if other is None:
        return text
    if len(other.stmts) == 1 and isinstance(other.stmts[0], ast.If):
        return f"{text} else {_if(other.stmts[0], depth)}"
    return f"{text} else {_block(other, depth)}"


# ---------------------------------------------------------------- declarations

def _type(t: ast.TypeExpr) -> str:
    if isinstance(t, ast.AnyTensorType):
        return "tensor"
    if isinstance(t, ast.TensorType):
        return f"{t.dtype}[{', '.join(str(d.value) for d in t.dims)}]"
    return t.dtype


def _decl(d: ast.Decl) -> str:
    if isinstance(d, ast.Import):
        return f"import {d.module};\n"
    if isinstance(d, ast.Const):
        return f"const {d.name} = {unparse_expr(d.value)};\n"
    if isinstance(d, ast.Func):
        params = ", ".join(p.name if p.default is None else f"{p.name}={unparse_expr(p.default)}"
                           for p in d.params)
        return f"func {d.name}({params}) {_block(d.body, 0)}\n"
    if isinstance(d, ast.Kernel):
        params = ", ".join(f"{p.direction} {p.name}: {_type(p.type)}" for p in d.params)
        return f"kernel {d.name}({params}) {_block(d.body, 0)}\n"
    raise TypeError(f"not a declaration node: {type(d).__name__}")


def unparse(program: ast.Program) -> str:
    """The canonical source of ``program`` (ends with a newline unless empty)."""
    out: list[str] = []
    previous: ast.Decl | None = None
    for d in program.decls:
        same_group = type(d) is type(previous) and isinstance(d, ast.Import | ast.Const)
        if previous is not None and not same_group:
            out.append("\n")
        out.append(_decl(d))
        previous = d
    return "".join(out)
