"""Grammar rules to AST: one method per grammar alias (see grammar/wia.lark).

Invariants:
- ``lalr.LalrParser`` calls the method of each rule as it reduces it, with the
  rule's extent (``meta``) and children (``c``), shaped as Lark shapes a tree's:
  no parse tree is built, and no recursion happens here.
- Every node gets the span of its whole rule; a ``(e)`` leaves no node, so ``e``
  keeps its own span (the enclosing rule's extent still covers the parentheses).
- Problems the grammar cannot see (an unknown dtype, ``for i in foo(n)``, an
  integer beyond i64, a positional argument after a keyword one) are appended to
  ``errors`` as ``WiaSyntaxError``; the builder still returns a node so that
  every such problem in the file is reported.
"""

from __future__ import annotations

from typing import Any

from ..diagnostics import SourceFile, Span, WiaError, WiaSyntaxError
from ..dtypes import DTYPE_NAMES
from . import ast
from .grammar_tables import Token
from .lalr import Extent
from .tokens import token_span

I64_MAX = 2**63 - 1
_Children = list[Any]
#: A rule's extent: (line, column, end_line, end_column) of its text.
Meta = Extent


def _nodes(children: _Children) -> tuple[Any, ...]:
    """The AST nodes among a rule's children: punctuation tokens and placeholders dropped."""
    return tuple(c for c in children if c is not None and not isinstance(c, Token))


class AstBuilder:
    """Builds ``ast`` nodes bottom-up; the ``start`` rule gives the tuple of decls."""

    def __init__(self, source: SourceFile):
        self.source = source
        self.errors: list[WiaError] = []

    def _span(self, meta: Meta) -> Span:
        return Span(self.source, *meta)

    def _error(self, message: str, span: Span) -> None:
        self.errors.append(WiaSyntaxError(message, span))

    def _int(self, token: Token) -> int:
        """An integer literal's value; beyond i64 it is an error (and 0 stands in)."""
        digits = str(token).lstrip("0")
        # The length test comes first: int() refuses strings of more than 4300 digits.
        if len(digits) > 19 or int(digits or "0") > I64_MAX:
            self._error("integer literal out of range for i64", token_span(self.source, token))
            return 0
        return int(digits or "0")

    def _float(self, token: Token) -> float:
        """A float literal's value; one that overflows f64 (``1e999``) is an error
        rather than a silent inf (and 0.0 stands in). Underflow to 0 is rounding."""
        value = float(str(token))
        if value == float("inf"):
            self._error("float literal out of range for f64 (the largest is about 1.8e308)",
                        token_span(self.source, token))
            return 0.0
        return value

    # ---------------------------------------------------------- declarations

    def start(self, meta: Meta | None, c: _Children) -> tuple[ast.Decl, ...]:
        return tuple(c)

    def import_decl(self, meta: Meta, c: _Children) -> ast.Import:
        return ast.Import(str(c[1]), span=self._span(meta))

    def const_decl(self, meta: Meta, c: _Children) -> ast.Const:
        return ast.Const(str(c[1]), c[3], span=self._span(meta))

    def func_decl(self, meta: Meta, c: _Children) -> ast.Func:
        return ast.Func(str(c[1]), c[3] or (), c[5], span=self._span(meta))

    def kernel_decl(self, meta: Meta, c: _Children) -> ast.Kernel:
        return ast.Kernel(str(c[1]), c[3] or (), c[5], span=self._span(meta))

    def func_params(self, meta: Meta, c: _Children) -> tuple[ast.FuncParam, ...]:
        """Parameters with a default come last (LANGUAGE.md §4), as in Python."""
        params: tuple[ast.FuncParam, ...] = _nodes(c)
        defaulted: ast.FuncParam | None = None
        for p in params:
            if p.default is not None:
                defaulted = defaulted or p
            elif defaulted is not None:
                self._error(f"parameter '{p.name}' without a default follows parameter "
                            f"'{defaulted.name}' with one", p.span)
        return params

    def func_param(self, meta: Meta, c: _Children) -> ast.FuncParam:
        # NAME [ASSIGN expr]: the placeholder is None without a default
        return ast.FuncParam(str(c[0]), c[2], span=self._span(meta))

    def kernel_params(self, meta: Meta, c: _Children) -> tuple[ast.Param, ...]:
        return _nodes(c)

    def kernel_param(self, meta: Meta, c: _Children) -> ast.Param:
        return ast.Param(str(c[0]), str(c[1]), c[3], span=self._span(meta))

    # ---------------------------------------------------------- types

    def _dtype(self, token: Token) -> str:
        name = str(token)
        if name not in DTYPE_NAMES:
            known = ", ".join(DTYPE_NAMES)
            self._error(f"unknown dtype '{name}' (expected one of {known})",
                        token_span(self.source, token))
        return name

    def named_type(self, meta: Meta, c: _Children) -> ast.TypeExpr:
        if str(c[0]) == "tensor":
            return ast.AnyTensorType(span=self._span(meta))
        return ast.ScalarType(self._dtype(c[0]), span=self._span(meta))

    def tensor_type(self, meta: Meta, c: _Children) -> ast.TensorType:
        return ast.TensorType(self._dtype(c[0]), _nodes(c), span=self._span(meta))

    def dim(self, meta: Meta, c: _Children) -> ast.Dim:
        token = c[0]
        value: int | str = self._int(token) if token.type == "INT" else str(token)
        return ast.Dim(value, span=self._span(meta))

    # ---------------------------------------------------------- statements

    def block(self, meta: Meta, c: _Children) -> ast.Block:
        return ast.Block(_nodes(c), span=self._span(meta))

    def assign(self, meta: Meta, c: _Children) -> ast.Assign:
        return ast.Assign(str(c[0]), c[2], span=self._span(meta))

    def aug_assign(self, meta: Meta, c: _Children) -> ast.AugAssign:
        return ast.AugAssign(str(c[0]), str(c[1])[0], c[2], span=self._span(meta))

    def slice_assign(self, meta: Meta, c: _Children) -> ast.SliceAssign:
        return ast.SliceAssign(str(c[0]), c[2], c[5], span=self._span(meta))

    def if_stmt(self, meta: Meta, c: _Children) -> ast.If:
        else_body = c[4] if len(c) > 4 else None
        if isinstance(else_body, ast.If):  # `else if`: an If alone in the else block
            else_body = ast.Block((else_body,), span=else_body.span)
        return ast.If(c[1], c[2], else_body, span=self._span(meta))

    def for_stmt(self, meta: Meta, c: _Children) -> ast.For:
        # FOR NAME IN NAME LPAR expr (COMMA expr)* RPAR block
        args = _nodes(c[5:-2])
        if str(c[3]) != "range":
            self._error(f"expected 'range' after 'in', found '{c[3]}'",
                        token_span(self.source, c[3]))
        if len(args) > 3:
            self._error(f"range() takes 1 to 3 arguments, got {len(args)}", args[3].span)
        start, stop, step = None, args[0], None
        if len(args) >= 2:
            start, stop = args[0], args[1]
        if len(args) >= 3:
            step = args[2]
        return ast.For(str(c[1]), start, stop, step, c[-1], span=self._span(meta))

    def while_stmt(self, meta: Meta, c: _Children) -> ast.While:
        return ast.While(c[1], c[2], span=self._span(meta))

    def return_stmt(self, meta: Meta, c: _Children) -> ast.Return:
        return ast.Return(c[1], span=self._span(meta))

    # ---------------------------------------------------------- expressions

    def binop(self, meta: Meta, c: _Children) -> ast.BinOp:
        return ast.BinOp(str(c[1]), c[0], c[2], span=self._span(meta))

    def unary_op(self, meta: Meta, c: _Children) -> ast.UnaryOp:
        return ast.UnaryOp(str(c[0]), c[1], span=self._span(meta))

    def index(self, meta: Meta, c: _Children) -> ast.Index:
        return ast.Index(c[0], c[2], span=self._span(meta))

    def index_items(self, meta: Meta, c: _Children) -> tuple[ast.IndexItem, ...]:
        return _nodes(c)

    def slice(self, meta: Meta, c: _Children) -> ast.Slice:
        # [expr] COLON [expr] [COLON [expr]]: placeholders keep the positions fixed
        return ast.Slice(c[0], c[2], c[4], span=self._span(meta))

    def call(self, meta: Meta, c: _Children) -> ast.Call:
        args, keywords = c[2] or ((), ())
        return ast.Call(str(c[0]), args, keywords, span=self._span(meta))

    def qualified_call(self, meta: Meta, c: _Children) -> ast.Call:
        args, keywords = c[4] or ((), ())
        return ast.Call(str(c[2]), args, keywords, module=str(c[0]), span=self._span(meta))

    def call_args(self, meta: Meta, c: _Children) -> tuple[tuple, tuple]:
        """(positional, keywords); positional after keyword and repeats are errors."""
        args: list[ast.Expr] = []
        keywords: list[ast.Keyword] = []
        for item in _nodes(c):
            if isinstance(item, ast.Keyword):
                if any(k.name == item.name for k in keywords):
                    self._error(f"keyword argument '{item.name}' repeated", item.span)
                keywords.append(item)
            else:
                if keywords:
                    self._error("positional argument after keyword argument", item.span)
                args.append(item)
        return tuple(args), tuple(keywords)

    def keyword(self, meta: Meta, c: _Children) -> ast.Keyword:
        return ast.Keyword(str(c[0]), c[2], span=self._span(meta))

    def name(self, meta: Meta, c: _Children) -> ast.Name:
        return ast.Name(str(c[0]), span=self._span(meta))

    def qualified_name(self, meta: Meta, c: _Children) -> ast.QualifiedName:
        return ast.QualifiedName(str(c[0]), str(c[2]), span=self._span(meta))

    def int_lit(self, meta: Meta, c: _Children) -> ast.IntLit:
        return ast.IntLit(self._int(c[0]), span=self._span(meta))

    def float_lit(self, meta: Meta, c: _Children) -> ast.FloatLit:
        return ast.FloatLit(self._float(c[0]), span=self._span(meta))

    def true_lit(self, meta: Meta, c: _Children) -> ast.BoolLit:
        return ast.BoolLit(True, span=self._span(meta))

    def false_lit(self, meta: Meta, c: _Children) -> ast.BoolLit:
        return ast.BoolLit(False, span=self._span(meta))

    def paren(self, meta: Meta, c: _Children) -> ast.Expr:
        return c[1]

    def array_lit(self, meta: Meta, c: _Children) -> ast.ArrayLit:
        return ast.ArrayLit(_nodes(c), span=self._span(meta))
