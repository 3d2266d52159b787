"""The generator's type model: what it knows about each value it builds, and AST helpers.

A ``VType`` is the generator's own prediction of a value's type (dtype, shape,
weakness), plus ``exact``: whether every backend must compute it bit for bit
like the interpreter. The prediction is checked by the real checker when the
program compiles (an output's declared type must match), so a wrong model shows
up as a rejected program, never as a false mismatch.

Invariants:
- A dim is an ``int`` (static), a ``str`` (a symbolic dim of the kernel) or
  ``None`` (an extent the checker cannot name, e.g. a slice with dynamic bounds);
  values with a ``None`` dim are never declared as outputs.
- ``exact`` is False once a float value went through an op whose result may differ
  in the last bits between backends (transcendentals, reassociated sums,
  matmul). Discontinuous ops (comparisons, floor, casts to integers, argmax) only
  take exact operands, so rounding noise never turns into a different branch or
  a different integer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..diagnostics import SourceFile, Span
from ..dtypes import DType, promote
from ..frontend import ast

#: The span of every generated node (spans take no part in AST equality).
SPAN = Span(SourceFile("<fuzz>", ""), 1, 1, 1, 1)

Dim = int | str | None


@dataclass(frozen=True)
class VType:
    """The predicted type of a generated value (rank 0 = scalar)."""

    dtype: DType
    shape: tuple[Dim, ...] = ()
    weak: bool = False
    exact: bool = True

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def known(self) -> bool:
        """Every extent is nameable in a declaration (an output may have this type)."""
        return all(d is not None for d in self.shape)

    def with_(self, **changes: object) -> VType:
        return replace(self, **changes)  # type: ignore[arg-type]


def broadcast(a: tuple[Dim, ...], b: tuple[Dim, ...]) -> tuple[Dim, ...] | None:
    """The broadcast shape, or None when the checker could not prove it (or it fails).

    Only equal dims, or a static 1 against anything, are combined: two different
    symbols may bind to the same extent, but the checker cannot know that.
    """
    out: list[Dim] = []
    for k in range(1, max(len(a), len(b)) + 1):
        x = a[-k] if k <= len(a) else 1
        y = b[-k] if k <= len(b) else 1
        if x == 1:
            out.append(y)
        elif y == 1 or (x == y and x is not None):
            out.append(x)
        else:
            return None
    return tuple(reversed(out))


def binary_type(a: VType, b: VType, op: str) -> VType | None:
    """The type of ``a op b`` for arithmetic and comparisons, or None when invalid."""
    shape = broadcast(a.shape, b.shape)
    if shape is None:
        return None
    dtype, weak = promote(a.dtype, a.weak, b.dtype, b.weak)
    exact = a.exact and b.exact
    if op in ("==", "!=", "<", "<=", ">", ">="):
        return VType(DType.BOOL, shape, False, True)
    if op in ("&&", "||"):
        return VType(DType.BOOL, shape, weak, True)
    if op == "/" and dtype.kind < 2:
        dtype = DType.F64
    if op == "**" and dtype.is_float:
        exact = False
    if op == "%" and dtype.is_float:
        exact = False
    return VType(dtype, shape, weak, exact or not dtype.is_float)


def concrete(shape: tuple[Dim, ...], syms: dict[str, int]) -> tuple[int, ...]:
    """The extents of a known shape under the call's symbol bindings."""
    return tuple(syms[d] if isinstance(d, str) else int(d) for d in shape)  # type: ignore[arg-type]


# ---------------------------------------------------------------- AST helpers

def name(n: str) -> ast.Name:
    return ast.Name(n, span=SPAN)


def lit(value: int | float | bool) -> ast.Expr:
    """A literal as the parser would build it (a minus is a UnaryOp)."""
    if isinstance(value, bool):
        return ast.BoolLit(value, span=SPAN)
    if isinstance(value, float) and math.isinf(value):
        # No literal is inf (1e999 is an error): the program divides, as the unparser writes it.
        node: ast.Expr = binop("/", ast.FloatLit(1.0, span=SPAN), ast.FloatLit(0.0, span=SPAN))
    else:
        node = (ast.IntLit(abs(value), span=SPAN) if isinstance(value, int)
                else ast.FloatLit(abs(value), span=SPAN))
    return ast.UnaryOp("-", node, span=SPAN) if value < 0 else node


def binop(op: str, a: ast.Expr, b: ast.Expr) -> ast.BinOp:
    return ast.BinOp(op, a, b, span=SPAN)


def call(fn: str, *args: ast.Expr, **kw: ast.Expr) -> ast.Call:
    keywords = tuple(ast.Keyword(k, v, span=SPAN) for k, v in kw.items())
    return ast.Call(fn, tuple(args), keywords, span=SPAN)


def array(values: list[ast.Expr]) -> ast.ArrayLit:
    return ast.ArrayLit(tuple(values), span=SPAN)


def dim_expr(d: Dim) -> ast.Expr:
    """A dim as an expression (a symbol is an i64 value in the body)."""
    assert d is not None
    return name(d) if isinstance(d, str) else lit(int(d))


def block(stmts: list[ast.Stmt]) -> ast.Block:
    return ast.Block(tuple(stmts), span=SPAN)


def assign(target: str, value: ast.Expr) -> ast.Assign:
    return ast.Assign(target, value, span=SPAN)


def type_expr(t: VType) -> ast.TypeExpr:
    """The declaration of a (known) type: ``f32`` or ``f32[M, 4]``."""
    if t.rank == 0:
        return ast.ScalarType(t.dtype.value, span=SPAN)
    dims = tuple(ast.Dim(d, span=SPAN) for d in t.shape)  # type: ignore[arg-type]
    return ast.TensorType(t.dtype.value, dims, span=SPAN)
